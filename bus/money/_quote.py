"""What a model costs (:class:`Price`, with its :class:`Tier` s) and where that price came
from (:class:`Quote`). Values only; :class:`~sopbus.bus.PriceBook` finds them.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Literal

import msgspec

from .._protocol import Usage

PriceSource = Literal["command-line", "scenario", "sopbus", "genai-prices"]
"""Who priced a model: ``--price`` on the command line (or ``price=`` to the Python API),
the scenario's ``[prices]``, sopbus's ``bus/money/prices.toml``, or the genai-prices library
(in that order of precedence)."""

_PER_TOKEN = Decimal(1_000_000)


class Tier(msgspec.Struct, frozen=True, kw_only=True):
    """Rates (USD per 1M tokens) that bill a whole call whose prompt has more than
    ``above`` tokens, as providers bill long-context tiers (Claude and Gemini above 200k)."""

    above: int
    input: Decimal
    output: Decimal
    cached_input: Decimal
    cache_write: Decimal | None = None


class Price(msgspec.Struct, frozen=True):
    """USD per 1 million tokens. ``cached_input`` bills prompt tokens served from the cache,
    ``cache_write`` prompt tokens written to it (Anthropic bills a write at 1.25 times the
    input price; ``None``: at ``input``, as providers whose cache is free to fill do).
    ``tiers`` (ascending by ``above``) replace the base rates for long prompts."""

    input: Decimal
    output: Decimal
    cached_input: Decimal
    tiers: tuple[Tier, ...] = ()
    cache_write: Decimal | None = None

    def rates(self, prompt_tokens: int) -> tuple[Decimal, Decimal, Decimal]:
        """``(input, output, cached_input)`` for a call with ``prompt_tokens`` of prompt."""
        for tier in reversed(self.tiers):
            if prompt_tokens > tier.above:
                return tier.input, tier.output, tier.cached_input
        return self.input, self.output, self.cached_input

    def write_rate(self, prompt_tokens: int) -> Decimal:
        """The ``cache_write`` rate for a call with ``prompt_tokens`` of prompt (its tier's;
        the input rate where none is given)."""
        for tier in reversed(self.tiers):
            if prompt_tokens > tier.above:
                return tier.input if tier.cache_write is None else tier.cache_write
        return self.input if self.cache_write is None else self.cache_write

    def cost(self, usage: Usage) -> Decimal:
        """Exact cost of ``usage``; ``usage.cached_tokens`` and ``usage.cache_write_tokens``
        are part of ``prompt_tokens`` (as the OpenAI API reports cached tokens; sopbus adds
        Anthropic's separate counts up the same way) and billed at ``cached_input`` and
        ``cache_write``."""
        rate_in, rate_out, rate_cached = self.rates(usage.prompt_tokens)
        cached = min(usage.cached_tokens, usage.prompt_tokens)
        written = min(usage.cache_write_tokens, usage.prompt_tokens - cached)
        return (
            (usage.prompt_tokens - cached - written) * rate_in
            + cached * rate_cached
            + written * self.write_rate(usage.prompt_tokens)
            + usage.completion_tokens * rate_out
        ) / _PER_TOKEN

    def worst_case(self, prompt_tokens: int, completion_tokens: int) -> Decimal:
        """The most a call of up to ``prompt_tokens`` and ``completion_tokens`` can cost,
        however many are served from or written to the cache and whichever tier the real
        prompt lands in."""
        levels = [(self.input, self.output, self.cached_input, self.cache_write)] + [
            (t.input, t.output, t.cached_input, t.cache_write)
            for t in self.tiers
            if prompt_tokens > t.above
        ]
        return max(
            (prompt_tokens * max(i, c, i if w is None else w) + completion_tokens * o) / _PER_TOKEN
            for i, o, c, w in levels
        )


class Quote(msgspec.Struct, frozen=True, kw_only=True):
    """A model's :class:`Price` and why: which ``source`` gave it and, for genai-prices,
    what it matched.

    ``matched`` and ``matched_name`` are the library's id and display name of the model the
    name matched, ``provider`` and ``provider_name`` the provider whose price is used, ``how``
    the rule that chose it, ``also`` the other providers listing the name, and ``notes``
    what the price leaves out or how it was taken. All empty for the scenario and sopbus,
    whose entries are the model's name itself.
    """

    model: str
    price: Price
    source: PriceSource
    matched: str = ""
    matched_name: str = ""
    provider: str = ""
    provider_name: str = ""
    how: str = ""
    notes: tuple[str, ...] = ()
    also: tuple[str, ...] = ()
