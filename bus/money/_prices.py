"""Model prices: what a call costs, in ``Decimal`` USD, and which source said so.

A model is priced by the first of three sources that knows it (:data:`PriceSource`):

1. ``scenario``: the scenario's ``[prices."<model>"]`` tables;
2. ``sopbus``: ``bus/money/prices.toml``, shipped with the package (the common OpenAI models);
3. ``genai-prices``: the genai-prices library's offline data (Claude, Gemini, DeepSeek,
   Llama and Qwen hosts, ...; see :mod:`sopbus.bus.money._library` for how a name is matched).

A model no source knows is a :class:`~sopbus.bus.ConfigError` naming the model, close names and
the fix, never $0: a price of 0 counts only when someone wrote it down.
"""

from __future__ import annotations

import tomllib
from collections.abc import Collection, Mapping
from datetime import UTC, datetime
from decimal import Decimal
from importlib import resources
from typing import Any

from .._errors import ConfigError
from .._util import closest
from ._quote import Price, PriceSource, Quote

# How user-facing text names the shipped price list: by the command that shows it and the
# docs page that explains it, not by a path inside the package (a user cannot open that).
PACKAGED = "sopbus's price list"
# The file itself, for an error in it (a defect of the package, reported to its developers).
_PACKAGED_FILE = "sopbus/bus/money/prices.toml"
_KEYS = ("input", "output", "cached_input", "cache_write")


class PriceBook:
    """Prices by model name from the scenario, ``prices.toml`` and genai-prices, in that
    order (see the module docstring). Each model is looked up once; later calls get the
    same :class:`Quote`, so one run prices every call of a model alike.

    ``endpoint`` (the run's ``base_url``) lets genai-prices pick the provider that serves
    the model; ``at`` is when prices are taken (default: when the book is made).
    ``library=False`` leaves genai-prices out.

    >>> book = PriceBook.load({"my-model": {"input": 0.5, "output": 1.5}})
    >>> book.price("my-model").cost(Usage(prompt_tokens=1000, completion_tokens=100))
    Decimal('0.00065')
    """

    def __init__(
        self,
        prices: Mapping[str, Price],
        *,
        sources: Mapping[str, PriceSource] | None = None,
        library: bool = False,
        endpoint: str | None = None,
        at: datetime | None = None,
    ):
        self._quotes = {
            model: Quote(model=model, price=price, source=(sources or {}).get(model, "scenario"))
            for model, price in prices.items()
        }
        self._library = library
        self._endpoint = endpoint
        self._at = at or datetime.now(tz=UTC)
        self._misses: set[str] = set()

    @classmethod
    def load(
        cls,
        overrides: Mapping[str, Mapping[str, Any]] | None = None,
        *,
        library: bool = True,
        endpoint: str | None = None,
        at: datetime | None = None,
        command_line: Collection[str] = (),
    ) -> PriceBook:
        """The packaged prices with ``overrides`` (``{model: {"input", "output",
        "cached_input", "cache_write"}}``, USD per 1M tokens, from a scenario) laid over them, whole model
        by whole model, and genai-prices behind both. The models in ``command_line`` were
        priced by ``--price``: their quotes (and ledger lines) name that source."""
        text = (
            resources.files("sopbus.bus.money").joinpath("prices.toml").read_text(encoding="utf-8")
        )
        table = tomllib.loads(text, parse_float=Decimal)["prices"]
        prices = {
            model: _parse_price(model, entry, _PACKAGED_FILE) for model, entry in table.items()
        }
        sources: dict[str, PriceSource] = dict.fromkeys(prices, "sopbus")
        for model, entry in (overrides or {}).items():
            prices[model] = _parse_price(model, entry, "the scenario")
            sources[model] = "command-line" if model in command_line else "scenario"
        return cls(prices, sources=sources, library=library, endpoint=endpoint, at=at)

    @property
    def models(self) -> tuple[str, ...]:
        """The models of the scenario and ``prices.toml`` (genai-prices' are not listed)."""
        return tuple(sorted(m for m, q in self._quotes.items() if q.source != "genai-prices"))

    def __contains__(self, model: object) -> bool:
        if not isinstance(model, str):
            return False
        try:
            self.quote(model)
        except ConfigError:
            return False
        return True

    def price(self, model: str) -> Price:
        """The price of ``model``; a :class:`~sopbus.bus.ConfigError` with the fix when there is none."""
        return self.quote(model).price

    def quote(self, model: str) -> Quote:
        """``model``'s price with its source and, from genai-prices, what it matched."""
        known = self._quotes.get(model)
        if known is not None:
            return known
        if self._library and model not in self._misses:
            from ._library import look_up

            found = look_up(model, endpoint=self._endpoint, at=self._at)
            if found is not None:
                self._quotes[model] = found
                return found
            self._misses.add(model)
        raise ConfigError(self._unknown_model_message(model))

    def _unknown_model_message(self, model: str) -> str:
        names = list(self.models)
        searched = f"the scenario's [prices] and {PACKAGED}"
        if self._library:
            from ._library import known_names, version

            names += known_names()
            searched = f"the scenario's [prices], {PACKAGED} and genai-prices {version()}"
        close = closest(model, dict.fromkeys(names), cutoff=0.5)
        hint = f"; close names: {', '.join(close)}" if close else ""
        return (
            f'no price for model {model!r} in {searched}{hint}; add [prices."{model}"] '
            f"input = ..., output = ... (USD per 1M tokens) to the scenario, or give "
            f"--price INPUT,OUTPUT on the command line (--price 0,0 for a local model), or "
            f"pick a priced model (`sopbus prices MODEL` shows what a model costs)"
        )


def _parse_price(model: str, entry: Mapping[str, Any], where: str) -> Price:
    place = f'[prices."{model}"] in {where}'
    if not isinstance(entry, Mapping):
        raise ConfigError(f"{place} must be a table with input and output, got {entry!r}")
    unknown = sorted(set(entry) - set(_KEYS))
    if unknown:
        raise ConfigError(
            f"{place} has unknown key(s) {', '.join(unknown)}; expected {', '.join(_KEYS)}"
        )
    for key in ("input", "output"):
        if key not in entry:
            raise ConfigError(f"{place} has no {key} price; add {key} = <USD per 1M tokens>")
    values = {key: _usd(entry[key], f"{place}.{key}") for key in _KEYS if key in entry}
    return Price(
        values["input"],
        values["output"],
        values.get("cached_input", values["input"]),
        cache_write=values.get("cache_write"),
    )


def _usd(value: Any, place: str) -> Decimal:
    # bool is an int in Python; `input = true` is a typo, not a price.
    if isinstance(value, bool) or not isinstance(value, int | float | str | Decimal):
        raise ConfigError(f"{place} must be a number (USD per 1M tokens), got {value!r}")
    try:
        # str() first: a float 0.075 becomes Decimal("0.075"), not its binary expansion.
        amount = Decimal(str(value))
    except ArithmeticError:
        raise ConfigError(f"{place} must be a number (USD per 1M tokens), got {value!r}") from None
    if not amount.is_finite() or amount < 0:
        raise ConfigError(f"{place} must be a price of 0 or more, got {value!r}")
    return amount
