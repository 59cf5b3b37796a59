"""A provider's own prompt overhead (what it adds to a request unseen, such as Anthropic's
system prompt for tools) is part of every reservation, behind any wrapper."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from sopbus.bus import (
    Budget,
    BudgetExhausted,
    ChatMessage,
    Completion,
    Gateway,
    LedgerLine,
    LLMRequest,
    PriceBook,
    ProviderBase,
    Usage,
)
from sopbus.bus.llm import (
    HUMAN_MODEL,
    HumanProvider,
    HumanRouter,
    RecordingProvider,
    prompt_upper_bound,
)

PRICES = PriceBook.load()
REQUEST = LLMRequest(
    messages=(ChatMessage("user", "Name three flowers."),),
    model="gpt-4o-mini",
    max_tokens=100,
    role="Ada",
    action="Ask",
)


class Tooled(ProviderBase):
    """Adds 600 prompt tokens to each request, as a server with a hidden system prompt."""

    name = "tooled"

    async def complete(self, request: LLMRequest) -> Completion:
        return Completion(text="rose", usage=Usage(650, 1), model=request.model, provider=self.name)

    def prompt_overhead(self, request: LLMRequest) -> int:
        return 600


class Unasked:
    """A person never asked: every call here is refused before it is made."""

    def ask(self, question: object) -> str:
        raise AssertionError("never asked")


async def refused_reservation(provider: ProviderBase) -> Decimal:
    lines: list[LedgerLine] = []
    gateway = Gateway(provider, PRICES, Budget(Decimal("0.0000001")), sink=lines.append)
    with pytest.raises(BudgetExhausted):
        await gateway.complete(REQUEST, round=1)
    (line,) = lines
    assert line.outcome == "refused" and line.reserved_usd is not None
    return line.reserved_usd


async def test_the_reservation_counts_the_providers_overhead(tmp_path: Path) -> None:
    price = PRICES.price("gpt-4o-mini")
    bound = prompt_upper_bound(REQUEST)
    assert await refused_reservation(Tooled()) == price.worst_case(bound + 600, 100)
    recorded = RecordingProvider(Tooled(), tmp_path / "tape.jsonl")
    assert await refused_reservation(recorded) == price.worst_case(bound + 600, 100)
    routed = HumanRouter(Tooled(), HumanProvider(answers=Unasked()))
    assert await refused_reservation(routed) == price.worst_case(bound + 600, 100)
    person = LLMRequest(messages=REQUEST.messages, model=HUMAN_MODEL)
    assert routed.prompt_overhead(person) == 0  # a person adds nothing to what they read


async def test_a_provider_without_one_reserves_as_before() -> None:
    class Plain(ProviderBase):
        name = "plain"

        async def complete(self, request: LLMRequest) -> Completion:
            raise AssertionError("never called: the reservation is refused")

    price = PRICES.price("gpt-4o-mini")
    assert await refused_reservation(Plain()) == price.worst_case(prompt_upper_bound(REQUEST), 100)
