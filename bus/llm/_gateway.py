"""The LLM gateway: the one door through which every call of a run goes.

For each attempt of a call: look up the price, reserve the worst case in the
:class:`~sopbus.bus.Budget` (or ledger ``refused`` and raise
:class:`~sopbus.bus.BudgetExhausted`), call the provider, settle the usage, write one
:class:`~sopbus.bus.LedgerLine`. Retries, the cost of failed attempts, overruns, the call
journal and a sweep's shared ``pool`` are described in docs/design/money.md.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from decimal import Decimal
from typing import Any, Literal, Protocol, TypeVar

import msgspec
import trio
from loguru import logger

from .._errors import BudgetExhausted, ProviderError, ProviderOverrun
from .._protocol import Completion, LLMRequest, Provider, Usage
from .._util import reached
from ..money import (
    AccountShare,
    Budget,
    Hold,
    LedgerLine,
    Outcome,
    Price,
    PriceBook,
    PriceSource,
    Reservation,
    money,
)
from ._overrun import impossible_usage, overrun_cost, overrun_record
from ._plausible import plausible_usage
from ._said import first_line, log_line, refusal
from ._server_tokens import with_margin
from ._tokens import prompt_upper_bound

LedgerSink = Callable[[LedgerLine], None]
PromptCounter = Callable[[LLMRequest], Awaitable[int | None]]
"""The server's own count of a request's prompt tokens, or ``None`` where it cannot say
(:meth:`sopbus.bus.llm.OpenAIProvider.prompt_tokens`)."""


class CallJournal(Protocol):
    """Hears of every attempt the gateway sends (see the module docstring)."""

    def reserved(
        self,
        request: LLMRequest,
        *,
        round: int,
        attempt: int,
        amount: Decimal,
        provider: str = "",
    ) -> int:
        """The attempt's reservation is held and it is about to be sent; returns its call id.
        ``provider`` is ``"tool"`` for a paid tool call (``request.model`` is the tool)."""
        ...

    def closed(
        self, call: int, request: LLMRequest, completion: Completion | None, line: LedgerLine
    ) -> None:
        """The attempt ``call`` ended with ``completion`` (``None``: it failed or was
        cancelled, and its reservation was released); ``line`` is about to be ledgered."""
        ...


_NO_USAGE = Usage(prompt_tokens=0, completion_tokens=0)
_ZERO = Decimal(0)
TOOL_PROVIDER = "tool"
"""The ``provider`` of a paid tool call's ledger line."""
# A tool is priced by its [mcp.NAME] price_per_call: the scenario.
_TOOL: dict[str, Any] = {"provider": TOOL_PROVIDER, "source": "scenario", "counted": False}
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

    def __init__(
        self,
        provider: Provider,
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
        self._pool = pool
        self._counter = counter
        self._resume = 0  # which execution of the run this is (see carry)
        # Replayed answers cost nothing, so a replay provider reserves nothing either.
        self._free = bool(getattr(provider, "free", False))
        self._seq = 0
        self._calls = 0
        self._prompt_tokens = 0
        self._completion_tokens = 0
        self._overrun: dict[str, Any] | None = None  # the first, for the summary

    async def complete(self, request: LLMRequest, *, round: int, attempt: int = 1) -> Completion:
        """The provider's answer to ``request``; raises :class:`~sopbus.bus.ConfigError` (no price),
        :class:`~sopbus.bus.BudgetExhausted` (refused, nothing sent) or the last
        :class:`~sopbus.bus.ProviderError` when the attempts are used up or it is not retryable.
        ``request.max_attempts`` (a role's own setting), when given, replaces the gateway's."""
        attempts = request.max_attempts or self._max_attempts
        for retry in range(attempts):
            try:
                return await self._attempt(request, round, attempt + retry)
            except ProviderError as error:
                if not error.retryable or retry + 1 == attempts:
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
        bound, counted = await self._prompt_bound(request)
        worst = _ZERO if self._free else price.worst_case(bound, request.max_tokens)
        hold, reservation = await self._held(
            request,
            round,
            attempt,
            worst,
            lambda: refusal(request, price, bound, worst, self.budget),
        )
        call = 0
        if self._journal is not None:
            call = self._journal.reserved(request, round=round, attempt=attempt, amount=worst)
        sent = _Sent(request, round, attempt, call, reservation, hold, trio.current_time())
        try:
            completion = await self.provider.complete(request)
        except BaseException as exc:
            # ProviderError, cancellation, or a bug: the call returned no usage.
            await self._failed(sent, exc)
            raise
        reached("llm:answered")  # answered (and billed), not yet written anywhere
        cost = _ZERO if completion.replayed else price.cost(completion.usage)
        corrected = None
        if not completion.replayed:
            why = impossible_usage(completion.usage, request, cost=cost, reserved=worst)
            if why is not None:
                raise await self._overran(sent, price, completion.usage, bound, why)
            if worst:  # a call priced $0 (a person, a free model) has nothing to undercount
                usage, corrected = plausible_usage(
                    completion.usage, request, completion.text, bound=bound, counted=counted
                )
                completion = msgspec.structs.replace(completion, usage=usage)
                cost = price.cost(usage)
            if completion.usage.prompt_tokens > bound:
                logger.warning(
                    "{} {} used {} prompt tokens, above the bound of {}; its cost "
                    "stayed within the reservation",
                    request.role,
                    request.action,
                    completion.usage.prompt_tokens,
                    bound,
                )
        await self._answered(sent, cost, completion, corrected)
        return completion

    async def _prompt_bound(self, request: LLMRequest) -> tuple[int, int | None]:
        """The prompt part of the reservation: sopbus's bound, or the server's count with
        its margin where that is less (both are upper bounds of what the server bills);
        and the server's count, when it gave one."""
        bound = prompt_upper_bound(request)
        if self._counter is None or self._free:
            return bound, None
        counted = await self._counter(request)
        if counted is None:
            return bound, None
        return min(bound, with_margin(counted)), counted

    async def _held(
        self,
        request: LLMRequest,
        round: int,
        attempt: int,
        amount: Decimal,
        why: Callable[[], str],
        **fields: Any,
    ) -> tuple[Hold | None, Reservation]:
        """``amount`` held on a sweep's account and reserved on the run's budget (a model
        call's worst case, a paid tool's price), or the refusal ledgered (with ``fields``)
        and raised: the shared account's in its own words, the budget's as ``why()`` says."""
        try:
            hold = await self._hold(amount)
        except BudgetExhausted:  # the shared account's refusal, in its own words
            self._ledger(
                request, round, attempt, "refused", _NO_USAGE, _ZERO, 0.0, reserved=amount, **fields
            )
            raise
        try:
            return hold, self.budget.reserve(amount)
        except BudgetExhausted:
            await self._unhold(hold, _ZERO)
            self._ledger(
                request, round, attempt, "refused", _NO_USAGE, _ZERO, 0.0, reserved=amount, **fields
            )
            if self.budget.closed is not None:
                raise  # closed after an overrun: its own reason, not the cap's arithmetic
            raise BudgetExhausted(why()) from None

    async def _hold(self, amount: Decimal) -> Hold | None:
        """The sweep's hold for an attempt (none outside a sweep, or for a free call)."""
        if self._pool is None or not amount:
            return None
        return await self._pool.reserve(amount)

    async def _unhold(self, hold: Hold | None, actual: Decimal) -> None:
        if hold is None or self._pool is None:
            return
        # Shielded: a cancelled call must still give its hold back to the sweep.
        with trio.CancelScope(shield=True):
            await self._pool.settle(hold, actual)

    async def _answered(
        self, sent: _Sent, cost: Decimal, completion: Completion, corrected: str | None
    ) -> None:
        self.budget.settle(sent.reservation, cost)
        await self._unhold(sent.hold, cost)
        outcome: Outcome = "replayed" if completion.replayed else "ok"
        self._ledger(
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
        cost = sent.reservation.amount if billed else _ZERO
        self.budget.settle(sent.reservation, cost)  # settling at $0 releases it
        await self._unhold(sent.hold, cost)
        status = exc.status if isinstance(exc, ProviderError) else None
        self._ledger(
            sent.request,
            sent.round,
            sent.attempt,
            "error",
            _NO_USAGE,
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
        request, reserved = sent.request, sent.reservation.amount
        cost, estimated = overrun_cost(price, usage, reserved)
        self.budget.settle(sent.reservation, cost)
        await self._unhold(sent.hold, cost)  # past the sweep's cap too, as it was billed
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
        self._overrun = self._overrun or overrun
        counted = "its reservation, estimated" if estimated else "what that usage bills"
        message = (
            f"the {self.provider.name} provider reported usage that cannot be true for "
            f"{request.role}'s {request.action} call: {why}; ledgered at {money(cost)} "
            f"({counted}); no further call is made, since the cap cannot hold against "
            f"a provider whose usage is not true"
        )
        self.budget.close(message)
        self._ledger(
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

    def _ledger(
        self,
        request: LLMRequest,
        round: int,
        attempt: int,
        outcome: Outcome,
        usage: Usage,
        cost: Decimal,
        latency_ms: float,
        *,
        call: int = 0,
        completion: Completion | None = None,
        **fields: Any,
    ) -> LedgerLine:
        """The next ledger line (:meth:`_line`, ``fields`` its keywords), booked."""
        line = self._line(
            request,
            round,
            attempt,
            outcome,
            usage,
            cost,
            latency_ms,
            completion=completion,
            **fields,
        )
        return self._book(line, request, call, completion)

    def _line(
        self,
        request: LLMRequest,
        round: int,
        attempt: int,
        outcome: Outcome,
        usage: Usage,
        cost: Decimal,
        latency_ms: float,
        *,
        completion: Completion | None = None,
        provider: str | None = None,
        estimated: bool = False,
        status: int | None = None,
        error: str | None = None,
        reserved: Decimal | None = None,
        lost_call: int = 0,
        corrected: str | None = None,
        source: PriceSource | Literal[""] | None = None,
        counted: bool = True,
    ) -> LedgerLine:
        """The next ledger line, counted in the totals (a tool's line is not a model call)."""
        self._seq += 1
        if outcome != "refused" and counted:
            self._calls += 1
        self._prompt_tokens += usage.prompt_tokens
        self._completion_tokens += usage.completion_tokens
        budget = self.budget
        # The price's source, except for a replayed answer: it costs $0 whatever the price.
        if source is None:
            source = "" if outcome == "replayed" else self.prices.quote(request.model).source
        return LedgerLine(
            seq=self._seq,
            round=round,
            role=request.role,
            action=request.action,
            subject=request.subject,
            step=request.step,
            provider=provider or self._provider_name(request),
            model=request.model,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            cached_tokens=usage.cached_tokens,
            cost_usd=cost,
            total_usd=budget.spent,
            budget_usd=budget.cap,
            attempt=attempt,
            outcome=outcome,
            price_source=source,
            resume=self._resume,
            estimated=estimated,
            status=status,
            error=error,
            reserved_usd=reserved,
            lost_call=lost_call,
            corrected=corrected,
            finish_reason=completion.finish_reason if completion is not None else None,
            latency_ms=latency_ms,
            t=self._clock(),
        )

    def _book(
        self, line: LedgerLine, request: LLMRequest, call: int, completion: Completion | None
    ) -> LedgerLine:
        """Writes a finished ledger line: journal, sink, log. The journal first: a run
        killed between the two writes keeps the answer, and `sopbus resume` restores the
        ledger line from it (see bus.store._resume)."""
        if self._journal is not None and (call or completion is not None):
            self._journal.closed(call, request, completion, line)
            reached("llm:journaled")  # in calls.jsonl, not yet in the ledger
        if self._sink is not None:
            self._sink(line)
        log_line(line)
        return line

    def _provider_name(self, request: LLMRequest) -> str:
        # A router (a person for some roles, a model for the rest) names who answers what.
        name_for = getattr(self.provider, "name_for", None)
        return str(name_for(request)) if callable(name_for) else self.provider.name

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
        request = LLMRequest(messages=(), model=tool, role=role, action=action)
        hold, reservation = await self._held(
            request,
            round,
            1,
            price,
            lambda: (
                f"the tool call {tool} of {role}'s {action} costs {money(price)}; "
                f"{money(self.budget.left)} left of the budget {money(self.budget.cap)}: "
                f"not called. Raise [run].budget_usd, or lower the tool's price_per_call"
            ),
            **_TOOL,
        )
        call = 0
        if self._journal is not None:
            call = self._journal.reserved(
                request, round=round, attempt=1, amount=price, provider=TOOL_PROVIDER
            )
        start = trio.current_time()
        result: T | None = None
        try:
            reached("tool:reserved")  # its price held and journaled, the tool not yet called
            result = await run()
        finally:
            self.budget.settle(reservation, price)
            await self._unhold(hold, price)
            outcome: Outcome = "ok" if result is not None else "error"
            latency = round_ms(trio.current_time() - start)
            line = self._line(request, round, 1, outcome, _NO_USAGE, price, latency, **_TOOL)
            record(result, line, call)
            # An answered call is closed by its record; a failed one by the journal's release.
            self._book(line, request, call if result is None else 0, None)
        return result

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
            self._calls += int(line.outcome != "refused" and line.provider != TOOL_PROVIDER)
            self._prompt_tokens += line.prompt_tokens
            self._completion_tokens += line.completion_tokens
        self._resume = resume

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
        tool = _TOOL if provider == TOOL_PROVIDER else {}
        return self._ledger(
            request, round, attempt, "lost", _NO_USAGE, amount, 0.0, lost_call=call, **tool
        )

    def record_replay(
        self, request: LLMRequest, completion: Completion, *, round: int, attempt: int
    ) -> Completion:
        """``completion`` (recorded by an earlier run) as the answer to ``request``, without a
        provider call or a reservation: ledgered ``replayed`` at $0 and told to the journal."""
        completion = msgspec.structs.replace(completion, replayed=True)
        self._ledger(
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
        self._seq += 1
        if line.outcome != "refused" and line.provider != TOOL_PROVIDER:
            self._calls += 1
        self._prompt_tokens += line.prompt_tokens
        self._completion_tokens += line.completion_tokens
        line = msgspec.structs.replace(
            line,
            seq=self._seq,
            total_usd=self.budget.spent,
            budget_usd=self.budget.cap,
            resume=self._resume,
        )
        if taped is not None:
            taped(line)
        return self._book(line, request, call, completion)

    def stats(self) -> dict[str, Any]:
        """Totals for the run summary: ``total_usd`` and ``budget_usd`` (Decimal),
        ``llm_calls`` (attempts sent to the provider; refusals are not calls),
        ``prompt_tokens``, ``completion_tokens``, and ``overrun``: the first call whose
        usage could not be true (:func:`sopbus.bus.llm._overrun.overrun_record`), or ``None``."""
        return {
            "total_usd": self.budget.spent,
            "budget_usd": self.budget.cap,
            "llm_calls": self._calls,
            "prompt_tokens": self._prompt_tokens,
            "completion_tokens": self._completion_tokens,
            "overrun": self._overrun,
        }


class _Sent:
    """An attempt on its way: what was asked, its call id and reservation, when it left."""

    __slots__ = ("attempt", "call", "hold", "request", "reservation", "round", "start")

    def __init__(
        self,
        request: LLMRequest,
        round: int,
        attempt: int,
        call: int,
        reservation: Reservation,
        hold: Hold | None,
        start: float,
    ):
        self.request, self.round, self.attempt = request, round, attempt
        self.call, self.reservation, self.hold, self.start = call, reservation, hold, start

    def latency_ms(self) -> float:
        return round_ms(trio.current_time() - self.start)


def round_ms(seconds: float) -> float:
    return round(seconds * 1000, 3)
