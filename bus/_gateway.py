"""The LLM gateway: the one door through which every call of a run goes.

For each attempt of a call, in this order: look up the model's price (an unknown model fails
here, before anything is sent); reserve the worst case (an upper bound of the prompt tokens
plus ``max_tokens`` of completion) in the :class:`~bus.Budget`, or write a ``refused`` line and
raise :class:`~bus.BudgetExhausted`; call the provider; settle the actual usage; write one
:class:`~bus.LedgerLine` to the sink and the MetaGPT-style cost line to the log.

A retryable :class:`~bus.ProviderError` (429, 5xx, timeouts) is retried after an exponential
backoff that honours the server's ``retry-after``, up to ``max_attempts`` attempts in all.
Each attempt is reserved and ledgered; a failed attempt returned no usage and costs $0 (the
providers do not bill a request that failed; what a timed-out request may have cost on the
server side cannot be known, and guessing would make the ledger disagree with the invoice).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from decimal import Decimal
from typing import Any

import trio
from loguru import logger

from ._budget import Budget, Reservation
from ._errors import BudgetExhausted, ProviderError
from ._ledger import LedgerLine, Outcome
from ._llm import Completion, LLMRequest, Provider, Usage
from ._prices import Price, PriceBook
from ._tokens import prompt_upper_bound

LedgerSink = Callable[[LedgerLine], None]

_NO_USAGE = Usage(prompt_tokens=0, completion_tokens=0)
_ZERO = Decimal(0)


class Gateway:
    """Prices, budget-checks and ledgers every call of one run (see the module docstring).

    ``sink`` receives each :class:`~bus.LedgerLine` as it is made (the run store writes
    ``costs.jsonl`` from it). ``clock`` gives the wall-clock ``t`` of ledger lines; latency
    is measured on trio's clock, so it follows ``autojump_clock`` in tests. ``max_backoff_s``
    bounds one wait: a server that asks for a longer pause fails the call instead. ``sleep``
    waits between attempts (``trio.sleep``; tests pass a recorder).
    """

    def __init__(self, provider: Provider, prices: PriceBook, budget: Budget, *,
                 sink: LedgerSink | None = None, max_attempts: int = 3, backoff_s: float = 0.5,
                 max_backoff_s: float = 60.0, clock: Callable[[], float] = time.time,
                 sleep: Callable[[float], Awaitable[None]] = trio.sleep):
        if max_attempts < 1:
            raise ValueError(f"max_attempts is at least 1, got {max_attempts}")
        self.provider = provider
        self.prices = prices
        self.budget = budget
        self._sink = sink
        self._max_attempts = max_attempts
        self._backoff_s = backoff_s
        self._max_backoff_s = max_backoff_s
        self._clock = clock
        self._sleep = sleep
        # Replayed answers cost nothing, so a replay provider reserves nothing either.
        self._free = bool(getattr(provider, "free", False))
        self._seq = 0
        self._calls = 0
        self._prompt_tokens = 0
        self._completion_tokens = 0

    async def complete(self, request: LLMRequest, *, round: int, attempt: int = 1) -> Completion:
        """The provider's answer to ``request``; raises :class:`~bus.ConfigError` (no price),
        :class:`~bus.BudgetExhausted` (refused, nothing sent) or the last
        :class:`~bus.ProviderError` when the attempts are used up or it is not retryable."""
        for retry in range(self._max_attempts):
            try:
                return await self._attempt(request, round, attempt + retry)
            except ProviderError as error:
                if not error.retryable or retry + 1 == self._max_attempts:
                    raise
                await self._sleep(self._delay(error, retry))
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _delay(self, error: ProviderError, retry: int) -> float:
        delay = max(self._backoff_s * 2**retry, error.retry_after or 0.0)
        if delay > self._max_backoff_s:
            raise error
        return delay

    async def _attempt(self, request: LLMRequest, round: int, attempt: int) -> Completion:
        price = self.prices.price(request.model)
        worst = _ZERO if self._free else price.worst_case(prompt_upper_bound(request), request.max_tokens)
        try:
            reservation = self.budget.reserve(worst)
        except BudgetExhausted:
            self._ledger(request, round, attempt, "refused", _NO_USAGE, _ZERO, 0.0)
            raise
        start = trio.current_time()
        try:
            completion = await self.provider.complete(request)
        except BaseException:
            # ProviderError, cancellation, or a bug: the call returned no usage.
            self._close(request, round, attempt, price, reservation, None, start)
            raise
        self._close(request, round, attempt, price, reservation, completion, start)
        return completion

    def _close(self, request: LLMRequest, round: int, attempt: int, price: Price,
               reservation: Reservation, completion: Completion | None, start: float) -> None:
        latency_ms = round_ms(trio.current_time() - start)
        if completion is None:
            self.budget.release(reservation)
            self._ledger(request, round, attempt, "error", _NO_USAGE, _ZERO, latency_ms)
            return
        usage = completion.usage
        cost = _ZERO if completion.replayed else price.cost(usage)
        if cost > reservation.amount:
            logger.warning("{} {} cost ${} but reserved ${}: the prompt bound was too low",
                           request.role, request.action, cost, reservation.amount)
        self.budget.settle(reservation, cost)
        outcome: Outcome = "replayed" if completion.replayed else "ok"
        self._ledger(request, round, attempt, outcome, usage, cost, latency_ms)

    def _ledger(self, request: LLMRequest, round: int, attempt: int, outcome: Outcome,
                usage: Usage, cost: Decimal, latency_ms: float) -> None:
        self._seq += 1
        if outcome != "refused":
            self._calls += 1
        self._prompt_tokens += usage.prompt_tokens
        self._completion_tokens += usage.completion_tokens
        budget = self.budget
        line = LedgerLine(
            seq=self._seq, round=round, role=request.role, action=request.action,
            provider=self.provider.name, model=request.model,
            prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens,
            cached_tokens=usage.cached_tokens, cost_usd=cost, total_usd=budget.spent,
            budget_usd=budget.cap, attempt=attempt, outcome=outcome,
            latency_ms=latency_ms, t=self._clock())
        if self._sink is not None:
            self._sink(line)
        if outcome != "refused":  # a refusal is not a call; BudgetExhausted tells the run
            logger.info("Total running cost: ${:.3f} | Max budget: ${:.3f} | Current cost: ${:.3f}, "
                        "prompt_tokens: {}, completion_tokens: {}", budget.spent, budget.cap,
                        cost, usage.prompt_tokens, usage.completion_tokens)

    def stats(self) -> dict[str, Any]:
        """Totals for the run summary: ``total_usd`` and ``budget_usd`` (Decimal),
        ``llm_calls`` (attempts sent to the provider; refusals are not calls),
        ``prompt_tokens`` and ``completion_tokens``."""
        return {"total_usd": self.budget.spent, "budget_usd": self.budget.cap,
                "llm_calls": self._calls, "prompt_tokens": self._prompt_tokens,
                "completion_tokens": self._completion_tokens}


def round_ms(seconds: float) -> float:
    return round(seconds * 1000, 3)
