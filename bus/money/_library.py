"""genai-prices behind the price book: the one module that talks to that library.

genai-prices (maintained by the pydantic team) ships the prices of a couple of thousand
models of some fifty providers in its wheel, so a lookup is offline. A model name is
matched the way a user means it, first hit wins:

1. the endpoint (``base_url``) names a provider the library knows (``api.groq.com`` is
   Groq), and that provider lists the model;
2. the name starts with a provider id (``anthropic/claude-sonnet-4``) that lists the rest;
3. the library's own rule: the provider whose naming pattern the name fits (``claude-*`` is
   Anthropic) lists it;
4. the first provider, in the library's order, that lists a model of that name (Llama and
   Qwen models are listed only by the hosts that serve them).

The library's prices are richer than a call's usage: they are turned into a :class:`Price`
for prompt, completion, cached and cache-write tokens, with its tiers. Prices that change with the hour
(DeepSeek's off-peak discount) are taken at their peak, so the cap holds whenever the calls
happen; prices the usage cannot bill (one-hour cache writes, audio, per-request fees) are
named in the quote's notes. A cache write is billed at the library's ``cache_write_mtok``,
the price of Anthropic's default (five-minute) cache, which is the one sopbus asks for.

``genai_prices`` takes ~0.4 s to import, so it is imported only when the scenario and
``prices.toml`` do not know a model.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from ._quote import Price, Quote, Tier

if TYPE_CHECKING:
    from genai_prices.types import ModelInfo, ModelPrice, Provider

LIBRARY = "genai-prices"
# Price keys a call's usage bills; every other key of a model is named in the notes.
_BILLED = {"input_mtok", "output_mtok", "cache_read_mtok", "cache_write_mtok"}


def version() -> str:
    """The installed genai-prices version (its data is as of that release)."""
    from importlib.metadata import version as dist_version

    return dist_version("genai-prices")


def look_up(model: str, *, endpoint: str | None = None, at: datetime | None = None) -> Quote | None:
    """The library's price of ``model`` as a :class:`Quote` (see the module docstring for
    how a name is matched), or ``None`` when no provider lists it with token prices. ``at``
    (default now) picks the prices in force; ``endpoint`` is the run's ``base_url``."""
    found = _find(model.strip().lower(), endpoint)
    if found is None:
        return None
    provider, info, how = found
    price, notes = _price_of(info, at or datetime.now(tz=UTC))
    if price is None:
        return None
    also = tuple(p.id for p in _providers() if p is not provider and _lists(p, model.lower()))
    return Quote(
        model=model,
        price=price,
        source="genai-prices",
        matched=info.id,
        matched_name=info.name or "",
        provider=provider.id,
        provider_name=provider.name,
        how=how,
        notes=notes,
        also=also,
    )


def known_names() -> list[str]:
    """Every model id the library lists (for "close names" in an error)."""
    return sorted({m.id for p in _providers() for m in p.models})


def _providers() -> list[Provider]:
    from genai_prices import data_snapshot

    return data_snapshot.get_snapshot().providers


def _lists(provider: Provider, ref: str) -> bool:
    return any(m.is_match(ref) for m in provider.models)


def _find(ref: str, endpoint: str | None) -> tuple[Provider, ModelInfo, str] | None:
    providers = _providers()
    if endpoint:
        for provider in providers:
            if re.match(provider.api_pattern, endpoint) and (
                m := provider.find_model(ref, all_providers=providers)
            ):
                return provider, m, f"the endpoint {endpoint} is {provider.name}'s"
    prefix, _, rest = ref.partition("/")
    if rest:
        for provider in providers:
            if provider.id == prefix and (m := provider.find_model(rest, all_providers=providers)):
                return provider, m, f"the name's prefix {prefix}/ is a provider"
    for provider in providers:
        if provider.model_match is not None and provider.model_match.is_match(ref):
            if m := provider.find_model(ref, all_providers=providers):
                return provider, m, f"the name follows {provider.name}'s model names"
            break  # the library's rule names one provider; others may still list the name
    for provider in providers:
        if m := provider.find_model(ref):
            return provider, m, f"{provider.name} is the first provider that lists it"
    return None


def _price_of(info: ModelInfo, at: datetime) -> tuple[Price | None, tuple[str, ...]]:
    """``info``'s token price at ``at`` (the peak of the day when it varies by the hour),
    and notes on what the price leaves out."""
    moments = [at] + [
        at.replace(hour=t.hour, minute=t.minute, second=0, microsecond=0) + timedelta(seconds=1)
        for t in _day_boundaries(info)
    ]
    candidates = [info.get_prices(moment) for moment in moments]
    prices = [p for p in (_convert(c) for c in candidates) if p is not None]
    if not prices:
        return None, ()
    peak = prices[0]
    for other in prices[1:]:
        peak = _at_most(peak, other)
    notes = (
        ["prices change with the time of day; the peak is taken"] if len(set(prices)) > 1 else []
    )
    unbilled = sorted(
        {
            k
            for c in candidates
            for k, v in vars(c).items()
            if v is not None and not k.startswith("_")
        }
        - _BILLED
    )
    if unbilled:
        notes.append(
            "not billed (a call's usage does not report them): "
            + ", ".join(_unit(k) for k in unbilled)
        )
    return peak, tuple(notes)


def _unit(price_key: str) -> str:
    return price_key.removesuffix("_mtok").removesuffix("_kcount").replace("_", " ")


def _day_boundaries(info: ModelInfo) -> list[Any]:
    from genai_prices.types import TimeOfDateConstraint

    if not isinstance(info.prices, list):
        return []
    # Both ends: a moment just after each start and each end falls in every price's window.
    return [
        moment
        for c in info.prices
        if isinstance(c.constraint, TimeOfDateConstraint)
        for moment in (c.constraint.start_time, c.constraint.end_time)
    ]


def _convert(price: ModelPrice) -> Price | None:
    """A :class:`Price` from the library's ``ModelPrice``; ``None`` when it has no input or
    no output price per token (image, audio or per-request models)."""
    keys = {
        "input": price.input_mtok,
        "output": price.output_mtok,
        "cached_input": price.cache_read_mtok
        if price.cache_read_mtok is not None
        else price.input_mtok,
    }
    if keys["input"] is None or keys["output"] is None:
        return None
    if price.cache_write_mtok is not None:
        keys["cache_write"] = price.cache_write_mtok
    starts = sorted({tier.start for value in keys.values() for tier in _tiers(value)})
    tiers = tuple(
        Tier(above=start, **{k: _rate(v, start + 1) for k, v in keys.items()}) for start in starts
    )
    return Price(**{k: _rate(v, 0) for k, v in keys.items()}, tiers=tiers)


def _tiers(value: Any) -> list[Any]:
    return list(getattr(value, "tiers", ()) or ())


def _rate(value: Any, prompt_tokens: int) -> Decimal:
    """The rate of a flat or tiered price for a call of ``prompt_tokens`` (the library's
    rule: a tier applies to the whole call once the prompt passes its start)."""
    if isinstance(value, Decimal):
        return value
    rate = value.base
    for tier in sorted(value.tiers, key=lambda t: t.start):
        if prompt_tokens > tier.start:
            rate = tier.price
    return Decimal(rate)


def _at_most(a: Price, b: Price) -> Price:
    """A price at least ``a`` and at least ``b`` for every prompt size."""
    starts = sorted({t.above for t in (*a.tiers, *b.tiers)})

    def top(tokens: int) -> dict[str, Decimal]:
        ra = (*a.rates(tokens), a.write_rate(tokens))
        rb = (*b.rates(tokens), b.write_rate(tokens))
        keys = ("input", "output", "cached_input", "cache_write")[: 4 if writes else 3]
        return {k: max(x, y) for k, x, y in zip(keys, ra, rb)}

    # A price without cache writes stays without (they bill at the input rate either way).
    writes = any(
        p.cache_write is not None or any(t.cache_write is not None for t in p.tiers) for p in (a, b)
    )
    return Price(**top(0), tiers=tuple(Tier(above=s, **top(s + 1)) for s in starts))
