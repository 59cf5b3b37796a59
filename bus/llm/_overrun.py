"""Usage that cannot be true, and what such a call is counted at.

A call's reservation is its worst case: an upper bound of the prompt tokens
(:func:`~sopbus.bus.llm._tokens.prompt_upper_bound`) plus ``max_tokens`` of completion. The cap
holds because no honest answer costs more. A provider that reports a negative count, more
completion tokens than ``max_tokens``, or usage that prices above the reservation (absurd
prompt sizes) says something that cannot be true of the request it was sent; such usage is an
overrun (:class:`~sopbus.bus.ProviderOverrun`), never a warning: the gateway ledgers what the
provider says it billed and the run ends at once. (More prompt tokens than the bound that
still price within the reservation leave the cap intact: that is a warning.)

What the provider "says it billed" is its usage at the model's price. A negative count bills
nothing that can be read, so a call with one is counted at its reservation (or at what its
non-negative counts price at, if that is more), marked estimated: the provider did answer, and
a run must never get money back from a lie.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from .._protocol import LLMRequest, Usage
from ..money import Price


def impossible_usage(
    usage: Usage, request: LLMRequest, *, cost: Decimal, reserved: Decimal
) -> str | None:
    """Why ``usage`` (pricing at ``cost``) cannot be the true usage of ``request``, whose
    reservation was ``reserved``, or ``None`` when it can."""
    counts = {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "cached_tokens": usage.cached_tokens,
        "cache_write_tokens": usage.cache_write_tokens,
    }
    negative = [f"{name}={value}" for name, value in counts.items() if value < 0]
    if negative:
        return f"negative token counts ({', '.join(negative)})"
    if usage.completion_tokens > request.max_tokens:
        return (
            f"{usage.completion_tokens} completion tokens, above the request's "
            f"max_tokens={request.max_tokens}"
        )
    if cost > reserved:
        return (
            f"{usage.prompt_tokens} prompt and {usage.completion_tokens} completion tokens "
            f"cost ${cost}, above the ${reserved} reserved as the call's worst case"
        )
    return None


def overrun_cost(price: Price, usage: Usage, reserved: Decimal) -> tuple[Decimal, bool]:
    """What a call with impossible ``usage`` is counted at, and whether that is an estimate
    (see the module docstring)."""
    counts = (usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens)
    if min(*counts, usage.cache_write_tokens) >= 0:
        return price.cost(usage), False
    readable = Usage(*(max(n, 0) for n in (*counts, usage.cache_write_tokens)))
    return max(price.cost(readable), reserved), True


def overrun_record(
    request: LLMRequest,
    usage: Usage,
    *,
    round: int,
    provider: str,
    why: str,
    prompt_bound: int,
    reserved: Decimal,
    cost: Decimal,
    estimated: bool,
    spent: Decimal,
    cap: Decimal,
) -> dict[str, Any]:
    """The overrun as ``summary.json`` reports it: who asked, what the provider reported
    against what the request allowed, what was counted and how far past the cap it went."""
    return {
        "provider": provider,
        "round": round,
        "role": request.role,
        "action": request.action,
        "model": request.model,
        "reason": why,
        "reported": {
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
            "cached_tokens": usage.cached_tokens,
            # Only where the provider reports cache writes, so older summaries read alike.
            **({"cache_write_tokens": n} if (n := usage.cache_write_tokens) else {}),
        },
        "allowed": {"prompt_tokens": prompt_bound, "completion_tokens": request.max_tokens},
        "reserved_usd": reserved,
        "cost_usd": cost,
        "estimated": estimated,
        "over_cap_usd": max(spent - cap, Decimal(0)),
    }
