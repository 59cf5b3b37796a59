"""The LLM gateway: the one door through which every call of a run goes.

For each attempt of a call, in this order: look up the model's price (an unknown model fails
here, before anything is sent; the ledger line names the price's source); reserve the worst
case (an upper bound of the prompt tokens plus ``max_tokens`` of completion) in the
:class:`~bus.Budget`, or write a ``refused`` line and raise :class:`~bus.BudgetExhausted`; call the provider; settle the actual usage; write one
:class:`~bus.LedgerLine` to the sink and the MetaGPT-style cost line to the log.

A retryable :class:`~bus.ProviderError` (429, 5xx, timeouts) is retried after an exponential
backoff that honours the server's ``retry-after``, up to ``max_attempts`` attempts in all.
Each attempt is reserved and ledgered; a failed attempt returned no usage and costs $0 (the
providers do not bill a request that failed; what a timed-out request may have cost on the
server side cannot be known, and guessing would make the ledger disagree with the invoice).

A :class:`CallJournal` (optional) hears of each attempt twice: when its reservation is made,
before anything is sent, and when it ends, before its ledger line is written. The run's
journal (:class:`bus.llm._tape.CallLog`) keeps the answers as a cassette and the reservations as
events, so that ``sopbus resume`` knows which calls were answered and which were in flight
when a run was killed. :meth:`Gateway.carry`, :meth:`Gateway.record_lost` and
:meth:`Gateway.record_replay` are the resume's and the replay's ways into the same ledger.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from decimal import Decimal
from typing import Any, Protocol

import msgspec
import trio
from loguru import logger

from ..money._budget import Budget, Reservation
from .._errors import BudgetExhausted, ProviderError
from ..money._ledger import LedgerLine, Outcome
from .._protocol import Completion, LLMRequest, Provider, Usage
from ..money._prices import Price, PriceBook
from ._tokens import prompt_upper_bound

LedgerSink = Callable[[LedgerLine], None]


class CallJournal(Protocol):
    """Hears of every attempt the gateway sends (see the module docstring)."""

    def reserved(self, request: LLMRequest, *, round: int, attempt: int, amount: Decimal) -> int:
        """The attempt's reservation is held and it is about to be sent; returns its call id."""
        ...

    def closed(self, call: int, request: LLMRequest, completion: Completion | None,
               line: LedgerLine) -> None:
        """The attempt ``call`` ended with ``completion`` (``None``: it failed or was
        cancelled, and its reservation was released); ``line`` is about to be ledgered."""
        ...

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
                 sleep: Callable[[float], Awaitable[None]] = trio.sleep,
                 journal: CallJournal | None = None):
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
        self._journal = journal
        self._resume = 0  # which execution of the run this is (see carry)
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
        call = 0
        if self._journal is not None:
            call = self._journal.reserved(request, round=round, attempt=attempt, amount=worst)
        start = trio.current_time()
        try:
            completion = await self.provider.complete(request)
        except BaseException:
            # ProviderError, cancellation, or a bug: the call returned no usage.
            self._close(request, round, attempt, price, reservation, None, start, call)
            raise
        self._close(request, round, attempt, price, reservation, completion, start, call)
        return completion

    def _close(self, request: LLMRequest, round: int, attempt: int, price: Price,
               reservation: Reservation, completion: Completion | None, start: float,
               call: int) -> None:
        latency_ms = round_ms(trio.current_time() - start)
        if completion is None:
            self.budget.release(reservation)
            self._ledger(request, round, attempt, "error", _NO_USAGE, _ZERO, latency_ms,
                         call=call)
            return
        usage = completion.usage
        cost = _ZERO if completion.replayed else price.cost(usage)
        if cost > reservation.amount:
            logger.warning("{} {} cost ${} but reserved ${}: the prompt bound was too low",
                           request.role, request.action, cost, reservation.amount)
        self.budget.settle(reservation, cost)
        outcome: Outcome = "replayed" if completion.replayed else "ok"
        self._ledger(request, round, attempt, outcome, usage, cost, latency_ms,
                     call=call, completion=completion)

    def _ledger(self, request: LLMRequest, round: int, attempt: int, outcome: Outcome,
                usage: Usage, cost: Decimal, latency_ms: float, *, call: int = 0,
                completion: Completion | None = None, provider: str | None = None) -> LedgerLine:
        self._seq += 1
        if outcome != "refused":
            self._calls += 1
        self._prompt_tokens += usage.prompt_tokens
        self._completion_tokens += usage.completion_tokens
        budget = self.budget
        # The price's source, except for a replayed answer: it costs $0 whatever the price.
        source = "" if outcome == "replayed" else self.prices.quote(request.model).source
        line = LedgerLine(
            seq=self._seq, round=round, role=request.role, action=request.action,
            provider=provider or self._provider_name(request), model=request.model,
            prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens,
            cached_tokens=usage.cached_tokens, cost_usd=cost, total_usd=budget.spent,
            budget_usd=budget.cap, attempt=attempt, outcome=outcome, price_source=source,
            resume=self._resume,
            latency_ms=latency_ms, t=self._clock())
        # The journal first: a run killed between the two writes keeps the answer, and
        # `sopbus resume` restores the ledger line from it (see bus.store._resume).
        if self._journal is not None and (call or completion is not None):
            self._journal.closed(call, request, completion, line)
        if self._sink is not None:
            self._sink(line)
        if outcome != "refused":  # a refusal is not a call; BudgetExhausted tells the run
            logger.info("Total running cost: ${:.3f} | Max budget: ${:.3f} | Current cost: ${:.3f}, "
                        "prompt_tokens: {}, completion_tokens: {}", budget.spent, budget.cap,
                        cost, usage.prompt_tokens, usage.completion_tokens)
        return line

    def _provider_name(self, request: LLMRequest) -> str:
        # A router (a person for some roles, a model for the rest) names who answers what.
        name_for = getattr(self.provider, "name_for", None)
        return str(name_for(request)) if callable(name_for) else self.provider.name

    # -- continuing a run (sopbus resume, replay, fork) ----------------------------------

    def carry(self, lines: Sequence[LedgerLine], *, resume: int) -> None:
        """Continues the ledger ``lines`` of earlier executions of this run: their spend is
        spent, their calls and tokens count in :meth:`stats`, the next line's ``seq``
        follows theirs, and new lines say ``resume``. Call it before any call is made; the
        spend must fit under the cap (the resume checks that first)."""
        spent = sum((line.cost_usd for line in lines), _ZERO)
        self.budget.settle(self.budget.reserve(spent), spent)
        self._seq = max((line.seq for line in lines), default=self._seq)
        for line in lines:
            self._calls += int(line.outcome != "refused")
            self._prompt_tokens += line.prompt_tokens
            self._completion_tokens += line.completion_tokens
        self._resume = resume

    def record_lost(self, request: LLMRequest, *, round: int, attempt: int, amount: Decimal) -> LedgerLine:
        """Ledgers a call that was in flight when an earlier execution died, as ``lost`` at its
        reserved ``amount``: the provider may have billed it, so the reservation counts as
        spent (it fit under the cap when it was made, and the resume checks the cap again)."""
        self.budget.settle(self.budget.reserve(amount), amount)
        return self._ledger(request, round, attempt, "lost", _NO_USAGE, amount, 0.0)

    def record_replay(self, request: LLMRequest, completion: Completion, *, round: int,
                      attempt: int) -> Completion:
        """``completion`` (recorded by an earlier run) as the answer to ``request``, without a
        provider call or a reservation: ledgered ``replayed`` at $0 and told to the journal."""
        completion = msgspec.structs.replace(completion, replayed=True)
        self._ledger(request, round, attempt, "replayed", completion.usage, _ZERO, 0.0,
                     completion=completion, provider="replay")
        return completion

    def stats(self) -> dict[str, Any]:
        """Totals for the run summary: ``total_usd`` and ``budget_usd`` (Decimal),
        ``llm_calls`` (attempts sent to the provider; refusals are not calls),
        ``prompt_tokens`` and ``completion_tokens``."""
        return {"total_usd": self.budget.spent, "budget_usd": self.budget.cap,
                "llm_calls": self._calls, "prompt_tokens": self._prompt_tokens,
                "completion_tokens": self._completion_tokens}


def round_ms(seconds: float) -> float:
    return round(seconds * 1000, 3)
