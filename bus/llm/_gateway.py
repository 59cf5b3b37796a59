"""The LLM gateway: the one door through which every call of a run goes.

For each attempt of a call: look up the price, reserve the worst case in the
:class:`~sopbus.bus.Budget` (or ledger ``refused`` and raise
:class:`~sopbus.bus.BudgetExhausted`), call the provider, settle the usage, write one
:class:`~sopbus.bus.LedgerLine`. Retries, the cost of failed attempts, overruns, the call
journal and a sweep's shared ``pool`` are described in docs/design/money.md.

The concerns live in their own modules: reserve and settle in :mod:`._purse`, retries in
:mod:`._retries`, ledger lines and the run's totals in :mod:`._books`, paid tools in
:mod:`._paid`; this one is the order of one attempt.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from decimal import Decimal
from typing import TypeVar

import msgspec
import trio
from loguru import logger

from .._errors import ProviderError, ProviderOverrun
from .._protocol import (
    Answers,
    Completer,
    Completion,
    LLMRequest,
    PromptCounter,
    Usage,
    as_provider,
)
from .._util import reached
from ..money import AccountShare, Budget, LedgerLine, Outcome, Price, PriceBook, Reservation, money
from ._books import NO_USAGE, TOOL, TOOL_PROVIDER, Books, CallJournal, LedgerSink, round_ms
from ._bulk import Batcher, one_by_one, replayed_batch, taped_answers
from ._overrun import impossible_usage, overrun_cost, overrun_record
from ._paid import ToolCall, paid_tool
from ._plausible import plausible_usage
from ._purse import Held, Purse, held
from ._recording import BatchRecord
from ._retries import Retries
from ._said import first_line, refusal
from ._server_tokens import with_margin
from ._stats import GatewayStats
from ._tokens import prompt_upper_bound

_ZERO = Decimal(0)
T = TypeVar("T")


class Gateway:
    """Prices, budget-checks and ledgers every call of one run (see the module docstring).

    ``sink`` receives each :class:`~sopbus.bus.LedgerLine` as it is made (the run store writes
    ``costs.jsonl`` from it). ``clock`` gives the wall-clock ``t`` of ledger lines; latency
    is measured on trio's clock, so it follows ``autojump_clock`` in tests. ``max_backoff_s``
    bounds one wait: a server that asks for a longer pause fails the call instead. ``sleep``
    waits between attempts (``trio.sleep``; tests pass a recorder). ``counter`` bounds a
    request's prompt tokens by the server's count, where tighter than sopbus's own bound.
    """

    budget: Budget
    """The run's budget: what is spent, reserved and left of the cap, and whether a
    provider's overrun closed it (:attr:`~sopbus.bus.Budget.closed`)."""

    def __init__(
        self,
        provider: Completer,
        prices: PriceBook,
        budget: Budget,
        *,
        sink: LedgerSink | None = None,
        max_attempts: int = 3,
        backoff_s: float = 0.5,
        max_backoff_s: float = 60.0,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[None]] = trio.sleep,
        journal: CallJournal | None = None,
        pool: AccountShare | None = None,
        counter: PromptCounter | None = None,
    ):
        if max_attempts < 1:
            raise ValueError(f"max_attempts is at least 1, got {max_attempts}")
        self.provider = as_provider(provider)
        self.prices = prices
        self.budget = budget
        self._max_attempts = max_attempts
        self._retries = Retries(backoff_s=backoff_s, max_backoff_s=max_backoff_s, sleep=sleep)
        self._journal = journal
        self._purse = Purse(budget, pool)
        self._books = Books(
            prices, budget, name_for=self._provider_name, sink=sink, journal=journal, clock=clock
        )
        self._counter = counter
        # Replayed answers cost nothing, so a replay provider reserves nothing either.
        self._free = self.provider.free
        self._batcher = Batcher(self.provider, prices, self._purse, self._books, journal)

    async def complete(self, request: LLMRequest, *, round: int, attempt: int = 1) -> Completion:
        """The provider's answer to ``request``; raises :class:`~sopbus.bus.ConfigError` (no price),
        :class:`~sopbus.bus.BudgetExhausted` (refused, nothing sent) or the last
        :class:`~sopbus.bus.ProviderError` when the attempts are used up or it is not retryable.
        ``request.max_attempts`` (a role's own setting), when given, replaces the gateway's."""
        return await self._retries.run(
            lambda retry: self._attempt(request, round, attempt + retry),
            request.max_attempts or self._max_attempts,
        )

    async def complete_many(
        self,
        requests: Sequence[LLMRequest],
        *,
        round: int,
        crowd: str,
        agents: Sequence[int],
        concurrency: int = 4,
    ) -> Answers:
        """The answers to the first attempts of agents ``agents`` of the population ``crowd``
        (``requests[i]`` is agent ``agents[i]``'s, all on one model), as many as the cap
        covers: :class:`~sopbus.bus.Answers` says which were made and why the rest were not.
        A provider with a batch method answers them as one reserved, ledgered and recorded
        batch (:mod:`._bulk`) where the journal records batches; otherwise they go one by one through :meth:`complete`,
        ``concurrency`` in flight, each its own reservation and ledger line. Raises what
        :meth:`complete` raises but :class:`~sopbus.bus.BudgetExhausted`."""
        if not requests:
            return Answers([])
        if len({r.model for r in requests}) > 1:
            raise ValueError(f"a batch of {crowd}'s calls is on one model, got several")
        if self.provider.batches and (self._journal is None or self._journal.batches):
            return await self._batcher.complete(requests, agents, crowd=crowd, round=round)
        return await one_by_one(self.complete, requests, round=round, concurrency=concurrency)

    def stats(self) -> GatewayStats:
        """The run's totals so far, for its summary and for stop conditions that watch
        spend or tokens (see :class:`GatewayStats`)."""
        return self._books.stats()

    async def _attempt(self, request: LLMRequest, round: int, attempt: int) -> Completion:
        price = self.prices.price(request.model)
        bound, counted = await self._prompt_bound(request)
        worst = _ZERO if self._free else price.worst_case(bound, request.max_tokens)
        money_held = await held(
            self._purse,
            self._books,
            request,
            round,
            attempt,
            worst,
            lambda: refusal(request, price, bound, worst, self.budget),
        )
        call = 0
        if self._journal is not None:
            call = self._journal.reserved(request, round=round, attempt=attempt, amount=worst)
        sent = _Sent(request, round, attempt, call, money_held, trio.current_time())
        try:
            completion = await self.provider.complete(request)
        except BaseException as exc:
            # ProviderError, cancellation, or a bug: the call returned no usage.
            await self._failed(sent, exc)
            raise
        reached("llm:answered")  # answered (and billed), not yet written anywhere
        if completion.replayed:
            await self._answered(sent, _ZERO, completion, None)
            return completion
        cost = price.cost(completion.usage)
        why = impossible_usage(completion.usage, request, cost=cost, reserved=worst)
        if why is not None:
            raise await self._overran(sent, price, completion.usage, bound, why)
        corrected = None
        if worst:  # a call priced $0 (a person, a free model) has nothing to undercount
            usage, corrected = plausible_usage(
                completion.usage, request, completion.text, bound=bound, counted=counted
            )
            completion = msgspec.structs.replace(completion, usage=usage)
            cost = price.cost(usage)
        _warn_above(request, completion.usage, bound)
        await self._answered(sent, cost, completion, corrected)
        return completion

    async def _prompt_bound(self, request: LLMRequest) -> tuple[int, int | None]:
        """The prompt part of the reservation: sopbus's bound (with the prompt the provider
        adds unseen, such as Anthropic's for tools), or the server's count with its margin
        where that is less (both are upper bounds of what the server bills); and the
        server's count, when it gave one."""
        bound = prompt_upper_bound(request) + self.provider.prompt_overhead(request)
        if self._counter is None or self._free:
            return bound, None
        counted = await self._counter(request)
        if counted is None:
            return bound, None
        return min(bound, with_margin(counted)), counted

    async def _answered(
        self, sent: _Sent, cost: Decimal, completion: Completion, corrected: str | None
    ) -> None:
        await self._purse.settle(sent.held, cost)
        outcome: Outcome = "replayed" if completion.replayed else "ok"
        self._books.ledger(
            sent.request,
            sent.round,
            sent.attempt,
            outcome,
            completion.usage,
            cost,
            sent.latency_ms(),
            call=sent.call,
            completion=completion,
            estimated=corrected is not None,
            corrected=corrected,
        )

    async def _failed(self, sent: _Sent, exc: BaseException) -> None:
        billed = isinstance(exc, ProviderError) and exc.maybe_billed
        cost = sent.held.reservation.amount if billed else _ZERO
        await self._purse.settle(sent.held, cost)  # settling at $0 releases it
        status = exc.status if isinstance(exc, ProviderError) else None
        self._books.ledger(
            sent.request,
            sent.round,
            sent.attempt,
            "error",
            NO_USAGE,
            cost,
            sent.latency_ms(),
            call=sent.call,
            estimated=billed,
            status=status,
            error=first_line(exc),
        )

    async def _overran(
        self, sent: _Sent, price: Price, usage: Usage, bound: int, why: str
    ) -> ProviderOverrun:
        """Books a call whose reported usage cannot be true, closes the budget, and returns
        the error that says so (see docs/design/money.md)."""
        request, reserved = sent.request, sent.held.reservation.amount
        cost, estimated = overrun_cost(price, usage, reserved)
        await self._purse.settle(sent.held, cost)  # past the sweep's cap too, as it was billed
        overrun = overrun_record(
            request,
            usage,
            round=sent.round,
            provider=self.provider.name,
            why=why,
            prompt_bound=bound,
            reserved=reserved,
            cost=cost,
            estimated=estimated,
            spent=self.budget.spent,
            cap=self.budget.cap,
        )
        self._books.overrun = self._books.overrun or overrun
        counted = "its reservation, estimated" if estimated else "what that usage bills"
        message = (
            f"the {self.provider.name} provider reported usage that cannot be true for "
            f"{request.role}'s {request.action} call: {why}; ledgered at {money(cost)} "
            f"({counted}); no further call is made, since the cap cannot hold against "
            f"a provider whose usage is not true"
        )
        self.budget.close(message)
        self._books.ledger(
            request,
            sent.round,
            sent.attempt,
            "overrun",
            usage,
            cost,
            sent.latency_ms(),
            call=sent.call,
            estimated=estimated,
            error=why,
        )
        return ProviderOverrun(message, overrun=overrun)

    def _provider_name(self, request: LLMRequest) -> str:
        # A router (a person for some roles, a model for the rest) names who answers what.
        return self.provider.name_for(request)

    # -- paid tools ------------------------------------------------------------------------

    async def paid_tool(
        self,
        price: Decimal,
        run: Callable[[], Awaitable[T]],
        *,
        tool: str,
        role: str,
        action: str,
        round: int,
        record: Callable[[T | None, LedgerLine, int], None],
    ) -> T:
        """Runs the paid tool call ``run`` under a reservation of its ``price`` (the run's
        budget and a sweep's account, as a model call), or raises
        :class:`~sopbus.bus.BudgetExhausted` with nothing called. The call is settled at its
        price whatever it returned (a tool's error is billed too) and ledgered as its own
        line (provider ``tool``, model the tool's full name); ``record`` gets the result
        (``None``: it raised), the line and the reservation's call id (written to the journal
        before the call, so a run killed mid-call has it in flight: a resume ledgers it
        ``lost`` at its price and calls the tool again) before the ledger does."""
        call = ToolCall(tool=tool, role=role, action=action, round=round)
        return await paid_tool(self._purse, self._books, price, run, call, record)

    # -- continuing a run (sopbus resume, replay, fork) ----------------------------------

    def carry(self, lines: Sequence[LedgerLine], *, resume: int) -> None:
        """Continues the ledger ``lines`` of earlier executions of this run: their spend is
        spent, their calls and tokens count in :meth:`stats`, the next line's ``seq``
        follows theirs, and new lines say ``resume``. Call it before any call is made; the
        spend must fit under the cap (the resume checks that first)."""
        spent = sum((line.cost_usd for line in lines), _ZERO)
        self.budget.settle(self.budget.reserve(spent), spent)
        self._books.carry(lines, resume=resume)

    def record_lost(
        self,
        request: LLMRequest,
        *,
        round: int,
        attempt: int,
        amount: Decimal,
        call: int = 0,
        provider: str = "",
    ) -> LedgerLine:
        """Ledgers a call that was in flight when an earlier execution died, as ``lost`` at its
        reserved ``amount``: the provider may have billed it, so the reservation counts as
        spent (it fit under the cap when it was made, and the resume checks the cap again).
        ``call`` is its reservation's id, kept in the line (``lost_call``); a paid tool call's
        (``provider`` ``"tool"``) is a tool's line, not a model call."""
        self.budget.settle(self.budget.reserve(amount), amount)
        tool = TOOL if provider == TOOL_PROVIDER else {}
        return self._books.ledger(
            request, round, attempt, "lost", NO_USAGE, amount, 0.0, lost_call=call, **tool
        )

    def record_replay(
        self, request: LLMRequest, completion: Completion, *, round: int, attempt: int
    ) -> Completion:
        """``completion`` (recorded by an earlier run) as the answer to ``request``, without a
        provider call or a reservation: ledgered ``replayed`` at $0 and told to the journal."""
        completion = msgspec.structs.replace(completion, replayed=True)
        self._books.ledger(
            request,
            round,
            attempt,
            "replayed",
            completion.usage,
            _ZERO,
            0.0,
            completion=completion,
            provider="replay",
        )
        return completion

    def record_replay_batch(self, record: BatchRecord, *, round: int) -> list[Completion]:
        """The answers of a population's batch ``record`` (recorded by an earlier run),
        without a provider call or a reservation: ledgered ``replayed`` at $0 as one line
        and recorded again (as :meth:`record_replay` does for one call)."""
        line = record.ledger
        assert line is not None, "a batch is recorded with its ledger line"
        request = LLMRequest(messages=(), model=line.model, role=record.role, action=record.action)
        replayed_batch(self._books, record, request, round)
        return taped_answers(record, replayed=True)

    def record_remote(
        self,
        line: LedgerLine,
        request: LLMRequest,
        *,
        call: int = 0,
        completion: Completion | None = None,
        taped: Callable[[LedgerLine], None] | None = None,
    ) -> LedgerLine:
        """An attempt another process made for this run (a worker on NATS, :mod:`sopbus.bus.nats`),
        taken into this ledger: renumbered (``seq``, ``total_usd``, ``resume``), its cost spent
        here and counted in :meth:`stats`, then journaled (``call``, the journal's id for it)
        and sunk as this gateway's own lines are. The other process reserved it against the
        run's shared cap, so it is booked without a check here (it was already spent).
        ``taped`` (a paid tool call's) records the renumbered line before it is ledgered."""
        self.budget.settle(Reservation(_ZERO), line.cost_usd)
        line = self._books.renumbered(line)
        if taped is not None:
            taped(line)
        return self._books.book(line, request, call, completion)


def _warn_above(request: LLMRequest, usage: Usage, bound: int) -> None:
    """Says when a server counted more prompt tokens than sopbus's bound of them: the cost
    stayed within the reservation (the completion's share covered it), but the bound is
    what keeps the cap, so it is worth a look."""
    if usage.prompt_tokens > bound:
        logger.warning(
            "{} {} used {} prompt tokens, above the bound of {}; its cost "
            "stayed within the reservation",
            request.role,
            request.action,
            usage.prompt_tokens,
            bound,
        )


class _Sent:
    """An attempt on its way: what was asked, its call id and money, when it left."""

    __slots__ = ("attempt", "call", "held", "request", "round", "start")

    def __init__(
        self, request: LLMRequest, round: int, attempt: int, call: int, held: Held, start: float
    ):
        self.request, self.round, self.attempt = request, round, attempt
        self.call, self.held, self.start = call, held, start

    def latency_ms(self) -> float:
        return round_ms(trio.current_time() - self.start)
