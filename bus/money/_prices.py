"""Model prices: what a call costs, in ``Decimal`` USD.

The prices of the common OpenAI models ship with the package (``bus/prices.toml``, USD per
1 million tokens); a scenario adds or overrides models with ``[prices."<model>"]``. A model
without a price is a :class:`~bus.ConfigError` naming the model and the fix, never $0: a
price of 0 counts only when someone wrote it down.
"""

from __future__ import annotations

import difflib
import tomllib
from collections.abc import Mapping
from decimal import Decimal
from importlib import resources
from typing import Any

import msgspec

from .._errors import ConfigError
from .._protocol import Usage

_PER_TOKEN = Decimal(1_000_000)
_KEYS = ("input", "output", "cached_input")


class Price(msgspec.Struct, frozen=True):
    """USD per 1 million tokens. ``cached_input`` bills prompt tokens served from the cache."""

    input: Decimal
    output: Decimal
    cached_input: Decimal

    def cost(self, usage: Usage) -> Decimal:
        """Exact cost of ``usage``; ``usage.cached_tokens`` are part of ``prompt_tokens``
        (as the OpenAI API reports them) and billed at ``cached_input``."""
        cached = min(usage.cached_tokens, usage.prompt_tokens)
        return ((usage.prompt_tokens - cached) * self.input + cached * self.cached_input
                + usage.completion_tokens * self.output) / _PER_TOKEN

    def worst_case(self, prompt_tokens: int, completion_tokens: int) -> Decimal:
        """The most ``prompt_tokens`` and ``completion_tokens`` can cost, however many are
        served from the cache."""
        top_input = max(self.input, self.cached_input)
        return (prompt_tokens * top_input + completion_tokens * self.output) / _PER_TOKEN


class PriceBook:
    """Prices by model name: the packaged table plus a scenario's overrides.

    >>> book = PriceBook.load({"my-model": {"input": 0.5, "output": 1.5}})
    >>> book.price("my-model").cost(Usage(prompt_tokens=1000, completion_tokens=100))
    Decimal('0.00065')
    """

    def __init__(self, prices: Mapping[str, Price]):
        self._prices = dict(prices)

    @classmethod
    def load(cls, overrides: Mapping[str, Mapping[str, Any]] | None = None) -> PriceBook:
        """The packaged prices with ``overrides`` (``{model: {"input", "output",
        "cached_input"}}``, USD per 1M tokens) laid over them, whole model by whole model."""
        text = resources.files("bus.money").joinpath("prices.toml").read_text(encoding="utf-8")
        table = tomllib.loads(text, parse_float=Decimal)["prices"]
        prices = {model: _parse_price(model, entry, "bus/prices.toml") for model, entry in table.items()}
        for model, entry in (overrides or {}).items():
            prices[model] = _parse_price(model, entry, "the scenario")
        return cls(prices)

    @property
    def models(self) -> tuple[str, ...]:
        return tuple(sorted(self._prices))

    def __contains__(self, model: object) -> bool:
        return model in self._prices

    def price(self, model: str) -> Price:
        """The price of ``model``; a :class:`~bus.ConfigError` with the fix when there is none."""
        try:
            return self._prices[model]
        except KeyError:
            raise ConfigError(_unknown_model_message(model, self._prices)) from None


def _unknown_model_message(model: str, known: Mapping[str, Price]) -> str:
    close = difflib.get_close_matches(model, list(known), n=3, cutoff=0.5)
    hint = f"known models close to it: {', '.join(close)}" if close else (
        f"known models: {', '.join(sorted(known))}")
    return (f"no price for model {model!r} ({hint}); add [prices.\"{model}\"] input = ..., "
            f"output = ... (USD per 1M tokens) to the scenario, or pick a priced model")


def _parse_price(model: str, entry: Mapping[str, Any], where: str) -> Price:
    place = f'[prices."{model}"] in {where}'
    if not isinstance(entry, Mapping):
        raise ConfigError(f"{place} must be a table with input and output, got {entry!r}")
    unknown = sorted(set(entry) - set(_KEYS))
    if unknown:
        raise ConfigError(f"{place} has unknown key(s) {', '.join(unknown)}; "
                          f"expected {', '.join(_KEYS)}")
    for key in ("input", "output"):
        if key not in entry:
            raise ConfigError(f"{place} has no {key} price; add {key} = <USD per 1M tokens>")
    values = {key: _usd(entry[key], f"{place}.{key}") for key in _KEYS if key in entry}
    values.setdefault("cached_input", values["input"])
    return Price(**values)


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
