from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal

import msgspec
import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from loguru import logger

from sopbus.bus import (
    Budget,
    BudgetExhausted,
    ChatMessage,
    Completion,
    ConfigError,
    Gateway,
    GatewayStats,
    LedgerLine,
    LLMRequest,
    PriceBook,
    ProviderError,
    SimProvider,
    Usage,
)
from sopbus.bus.llm._tokens import prompt_upper_bound

PRICES = PriceBook.load({"test-model": {"input": 1000, "output": 2000}})


class Scripted:
    """A provider that answers (or fails) from a script and counts its calls."""

    name = "scripted"

    def __init__(self, *steps: Completion | ProviderError, replayed: bool = False):
        self.steps = list(steps)
        self.calls = 0

    async def complete(self, request: LLMRequest) -> Completion:
        step = self.steps[min(self.calls, len(self.steps) - 1)]
        self.calls += 1
        await trio.sleep(0.25)
        if isinstance(step, ProviderError):
            raise step
        return step


def answer(
    prompt: int = 10, completion: int = 5, cached: int = 0, replayed: bool = False
) -> Completion:
    return Completion(
        text="ok",
        usage=Usage(prompt, completion, cached),
        model="test-model",
        provider="scripted",
        replayed=replayed,
    )


def request(model: str = "test-model", max_tokens: int = 100, text: str = "hello") -> LLMRequest:
    return LLMRequest(
        messages=(ChatMessage("user", text),),
        model=model,
        max_tokens=max_tokens,
        role="Alice",
        action="WritePRD",
    )


def gateway(provider: object, cap: str = "10", **kw: object) -> tuple[Gateway, list[LedgerLine]]:
    lines: list[LedgerLine] = []
    gw = Gateway(
        provider,  # type: ignore[arg-type]
        PRICES,
        Budget(Decimal(cap)),
        sink=lines.append,
        clock=lambda: 1700000000.0,
        **kw,  # type: ignore[arg-type]
    )
    return gw, lines


async def test_a_call_is_priced_settled_and_ledgered(autojump_clock: object) -> None:
    gw, lines = gateway(Scripted(answer(10, 5, cached=4)))
    completion = await gw.complete(request(), round=3)
    assert completion.text == "ok"
    cost = (
        Decimal("0.001") * 6 + Decimal("0.001") * 4 + Decimal("0.002") * 5
    )  # cached at input price
    assert lines == [
        LedgerLine(
            seq=1,
            round=3,
            role="Alice",
            action="WritePRD",
            provider="scripted",
            model="test-model",
            prompt_tokens=10,
            completion_tokens=5,
            cached_tokens=4,
            cost_usd=cost,
            total_usd=cost,
            budget_usd=Decimal(10),
            attempt=1,
            outcome="ok",
            price_source="scenario",
            latency_ms=250.0,
            t=1700000000.0,
        )
    ]
    assert gw.stats() == GatewayStats(
        total_usd=cost,
        budget_usd=Decimal(10),
        llm_calls=1,
        prompt_tokens=10,
        completion_tokens=5,
        overrun=None,
    )
    assert gw.budget.reserved == 0


async def test_the_cost_line_has_metagpts_form_and_names_who_spent_it(
    autojump_clock: object,
) -> None:
    messages: list[str] = []
    handler = logger.add(lambda m: messages.append(m.record["message"]), format="{message}")
    try:
        gw, _ = gateway(Scripted(answer(10, 5), answer(8, 1)), cap="1")
        await gw.complete(request(), round=1)
        await gw.complete(msgspec.structs.replace(request(), subject="docs/prd.md"), round=1)
    finally:
        logger.remove(handler)
    assert messages == [
        "Total running cost: $0.02 | Max budget: $1.00 | Current cost: $0.02 by Alice WritePRD, "
        "prompt_tokens: 10, completion_tokens: 5",
        "Total running cost: $0.03 | Max budget: $1.00 | Current cost: $0.01 by Alice "
        "WritePRD (docs/prd.md), prompt_tokens: 8, completion_tokens: 1",
    ]


async def test_retries_honour_retry_after_and_ledger_every_attempt(autojump_clock: object) -> None:
    provider = Scripted(ProviderError("429", retryable=True, retry_after=30.0), answer())
    gw, lines = gateway(provider, backoff_s=0.5)
    start = trio.current_time()
    await gw.complete(request(), round=1, attempt=2)
    assert trio.current_time() - start == pytest.approx(30.0 + 2 * 0.25)
    assert [(line.outcome, line.attempt, line.cost_usd) for line in lines] == [
        ("error", 2, Decimal(0)),
        ("ok", 3, Decimal("0.02")),
    ]
    assert gw.stats().llm_calls == 2 and gw.budget.reserved == 0


async def test_backoff_doubles_and_attempts_are_bounded(autojump_clock: object) -> None:
    delays: list[float] = []

    async def sleep(seconds: float) -> None:
        delays.append(seconds)

    error = ProviderError("500", retryable=True)
    gw, lines = gateway(Scripted(error), max_attempts=4, backoff_s=0.5, sleep=sleep)
    with pytest.raises(ProviderError):
        await gw.complete(request(), round=1)
    assert delays == [0.5, 1.0, 2.0]
    assert [line.outcome for line in lines] == ["error"] * 4 and gw.budget.spent == 0


async def test_a_non_retryable_error_is_raised_at_once(autojump_clock: object) -> None:
    provider = Scripted(ProviderError("400", retryable=False), answer())
    gw, lines = gateway(provider)
    with pytest.raises(ProviderError):
        await gw.complete(request(), round=1)
    assert provider.calls == 1 and [line.outcome for line in lines] == ["error"]


async def test_a_retry_after_past_the_longest_wait_fails_the_call(autojump_clock: object) -> None:
    provider = Scripted(ProviderError("429", retryable=True, retry_after=3600.0), answer())
    gw, _ = gateway(provider, max_backoff_s=60.0)
    with pytest.raises(ProviderError):
        await gw.complete(request(), round=1)
    assert provider.calls == 1


async def test_a_refused_call_is_ledgered_and_never_made(autojump_clock: object) -> None:
    provider = Scripted(answer())
    gw, lines = gateway(provider, cap="0.1")  # worst case: 100 completion tokens at $2000/1M
    with pytest.raises(BudgetExhausted):
        await gw.complete(request(max_tokens=100), round=2)
    assert provider.calls == 0
    assert [(ln.outcome, ln.prompt_tokens, ln.cost_usd, ln.total_usd) for ln in lines] == [
        ("refused", 0, Decimal(0), Decimal(0))
    ]
    assert gw.stats().llm_calls == 0


async def test_an_unknown_model_fails_before_any_call(autojump_clock: object) -> None:
    provider = Scripted(answer())
    gw, lines = gateway(provider)
    with pytest.raises(ConfigError, match="no price for model 'gpt-4q'"):
        await gw.complete(request(model="gpt-4q"), round=1)
    assert provider.calls == 0 and lines == []


async def test_a_replayed_answer_costs_nothing_and_reserves_nothing(autojump_clock: object) -> None:
    provider = Scripted(answer(100, 50, replayed=True))
    provider.free = True  # type: ignore[attr-defined]
    gw, lines = gateway(provider, cap="0")
    await gw.complete(request(), round=1)
    assert [(ln.outcome, ln.prompt_tokens, ln.cost_usd) for ln in lines] == [
        ("replayed", 100, Decimal(0))
    ]


async def test_a_cancelled_call_releases_its_reservation(autojump_clock: object) -> None:
    gw, lines = gateway(Scripted(answer()))
    with trio.move_on_after(0.1):
        await gw.complete(request(), round=1)
    assert gw.budget.reserved == 0 and gw.budget.spent == 0
    assert [line.outcome for line in lines] == ["error"]


# The cap, under concurrency -------------------------------------------------------------


def _requests(sizes: Sequence[tuple[int, int]]) -> list[LLMRequest]:
    words = "alpha beta gamma delta epsilon zeta theta kappa lambda sigma".split()
    return [
        LLMRequest(
            messages=(ChatMessage("user", " ".join(words[: 1 + n % 10]) * (1 + n)),),
            model="gpt-4o",
            max_tokens=max_tokens,
            role=f"r{n % 3}",
            action=f"A{i % 4}",
        )
        for i, (n, max_tokens) in enumerate(sizes)
    ]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sizes=st.lists(st.tuples(st.integers(0, 30), st.integers(1, 3000)), min_size=1, max_size=40),
    cap=st.decimals(min_value=0, max_value=Decimal("0.4"), places=5),
    seed=st.integers(0, 99),
)
def test_concurrent_calls_never_spend_past_the_cap(
    sizes: list[tuple[int, int]], cap: Decimal, seed: int
) -> None:
    requests = _requests(sizes)
    price = PRICES.price("gpt-4o")
    worst = [price.worst_case(prompt_upper_bound(r), r.max_tokens) for r in requests]
    lines: list[LedgerLine] = []
    gw = Gateway(
        SimProvider(seed=seed, latency_ms=(0, 200)), PRICES, Budget(cap), sink=lines.append
    )
    refused: list[LLMRequest] = []

    async def call(r: LLMRequest) -> None:
        try:
            await gw.complete(r, round=1)
        except BudgetExhausted:
            refused.append(r)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            for r in requests:
                nursery.start_soon(call, r)

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))

    assert gw.budget.spent <= cap and gw.budget.reserved == 0
    assert sum(line.cost_usd for line in lines) == gw.stats().total_usd == gw.budget.spent
    assert [line.seq for line in lines] == list(range(1, len(requests) + 1))
    assert all(line.total_usd <= cap for line in lines)
    assert sorted(ln.outcome for ln in lines) == sorted(
        ["refused"] * len(refused) + ["ok"] * (len(requests) - len(refused))
    )
    by_action = {(ln.role, ln.action, ln.cost_usd) for ln in lines if ln.outcome == "ok"}
    assert len(by_action) >= 1 or refused
    if cap < max(worst):  # that call can never fit, whatever the interleaving
        assert refused
    if cap >= sum(worst):  # every call fits even if none had settled yet
        assert not refused
    if cap < min(worst):
        assert len(refused) == len(requests) and gw.budget.spent == 0
