"""The gateway's ledger lines: each attempt's :class:`~sopbus.bus.LedgerLine`, numbered,
counted in the run's totals (:class:`GatewayStats`) and written to the call journal, the
run's ledger (the ``sink``) and the log, in that order."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any, Literal, Protocol

import msgspec

from .._protocol import Completion, LLMRequest, Usage
from .._util import reached
from ..money import TOOL_PROVIDER, Budget, CallColumns, LedgerLine, Outcome, PriceBook, PriceSource
from ._said import log_line
from ._stats import GatewayStats

LedgerSink = Callable[[LedgerLine], None]
NO_USAGE = Usage(prompt_tokens=0, completion_tokens=0)
# A tool is priced by its [mcp.NAME] price_per_call: the scenario.
TOOL: dict[str, Any] = {"provider": TOOL_PROVIDER, "source": "scenario", "counted": False}


class CallJournal(Protocol):
    """Hears of every attempt the gateway sends (see :class:`sopbus.bus.llm._tape.CallLog`).

    ``batches`` says whether it records a population's batch as one (``calls`` > 0 and
    ``texts``); the gateway sends a journal that cannot the batch's calls one by one."""

    batches: bool

    def reserved(
        self,
        request: LLMRequest,
        *,
        round: int,
        attempt: int,
        amount: Decimal,
        provider: str = "",
        calls: int = 0,
    ) -> int:
        """The attempt's reservation is held and it is about to be sent; returns its call id.
        ``provider`` is ``"tool"`` for a paid tool call (``request.model`` is the tool);
        ``calls`` is the number of calls of a population's batch (``request.role`` the
        population), 0 for one call."""
        ...

    def closed(
        self,
        call: int,
        request: LLMRequest,
        completion: Completion | None,
        line: LedgerLine,
        *,
        texts: list[str] | None = None,
        finish: dict[int, str] | None = None,
        key: str = "",
    ) -> None:
        """The attempt ``call`` ended with ``completion`` (``None``: it failed or was
        cancelled, and its reservation was released); ``line`` is about to be ledgered.
        A batch's (``line.batch``) gives each call's answer in ``texts``, each finish
        reason other than ``stop`` in ``finish`` (by index) and the batch's fingerprint
        in ``key``."""
        ...


class Books:
    """Numbers, counts and writes the ledger lines of one run's gateway.

    ``name_for`` names who answered a request (a router answers some roles by a person);
    ``resume`` is which execution of the run this is (:meth:`carry`)."""

    def __init__(
        self,
        prices: PriceBook,
        budget: Budget,
        *,
        name_for: Callable[[LLMRequest], str],
        sink: LedgerSink | None,
        journal: CallJournal | None,
        clock: Callable[[], float],
    ):
        self.prices, self.budget, self.journal = prices, budget, journal
        self._name_for, self._sink, self._clock = name_for, sink, clock
        self.resume = 0
        self._seq = 0
        self._calls = 0
        self._prompt_tokens = 0
        self._completion_tokens = 0
        self.overrun: dict[str, Any] | None = None  # the first, for the summary

    def stats(self) -> GatewayStats:
        """The totals so far (see :class:`GatewayStats`)."""
        return GatewayStats(
            total_usd=self.budget.spent,
            budget_usd=self.budget.cap,
            llm_calls=self._calls,
            prompt_tokens=self._prompt_tokens,
            completion_tokens=self._completion_tokens,
            overrun=self.overrun,
        )

    def _count(self, outcome: Outcome, usage: Usage, *, call: bool, calls: int = 1) -> None:
        """Counts a line's tokens, and the line as its ``calls`` model calls (a batch's
        many) when it was one (``call``: not a paid tool's) and was sent (a refusal is not
        a call)."""
        self._calls += calls if call and outcome != "refused" else 0
        self._prompt_tokens += usage.prompt_tokens
        self._completion_tokens += usage.completion_tokens

    def ledger(
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
        """The next ledger line (:meth:`line`, ``fields`` its keywords), booked."""
        line = self.line(
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
        return self.book(line, request, call, completion)

    def refused(
        self, request: LLMRequest, round: int, attempt: int, amount: Decimal, **fields: Any
    ) -> LedgerLine:
        """Ledgers an attempt the budget or a sweep's account refused: nothing was sent."""
        return self.ledger(
            request, round, attempt, "refused", NO_USAGE, Decimal(0), 0.0, reserved=amount, **fields
        )

    def line(
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
        batch: CallColumns | None = None,
    ) -> LedgerLine:
        """The next ledger line, counted in the totals (a tool's line is not a model call;
        a ``batch`` line is its calls)."""
        self._seq += 1
        self._count(outcome, usage, call=counted, calls=1 if batch is None else len(batch))
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
            provider=provider or self._name_for(request),
            model=request.model,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            cached_tokens=usage.cached_tokens,
            cache_write_tokens=usage.cache_write_tokens,
            cost_usd=cost,
            total_usd=self.budget.spent,
            budget_usd=self.budget.cap,
            attempt=attempt,
            outcome=outcome,
            price_source=source,
            resume=self.resume,
            estimated=estimated,
            status=status,
            error=error,
            reserved_usd=reserved,
            lost_call=lost_call,
            corrected=corrected,
            finish_reason=completion.finish_reason if completion is not None else None,
            batch=batch,
            latency_ms=latency_ms,
            t=self._clock(),
        )

    def book(
        self,
        line: LedgerLine,
        request: LLMRequest,
        call: int,
        completion: Completion | None,
        **batch: Any,
    ) -> LedgerLine:
        """Writes a finished ledger line: journal, sink, log. The journal first: a run
        killed between the two writes keeps the answer, and `sopbus resume` restores the
        ledger line from it (see bus.store._resume). ``batch`` is a batch's ``texts``,
        ``finish`` and ``key`` for the journal (:meth:`CallJournal.closed`)."""
        if self.journal is not None and (call or completion is not None):
            self.journal.closed(call, request, completion, line, **batch)
            reached("llm:journaled")  # in calls.jsonl, not yet in the ledger
        if self._sink is not None:
            self._sink(line)
        log_line(line)
        return line

    def carry(self, lines: Sequence[LedgerLine], *, resume: int) -> None:
        """Counts the ledger ``lines`` of earlier executions (their spend is the caller's
        to settle): the next line's ``seq`` follows theirs, and new lines say ``resume``."""
        self._seq = max((line.seq for line in lines), default=self._seq)
        for line in lines:
            self._count(
                line.outcome, _usage(line), call=line.provider != TOOL_PROVIDER, calls=line.calls
            )
        self.resume = resume

    def renumbered(self, line: LedgerLine) -> LedgerLine:
        """Another process's ``line`` for this run, counted and numbered as this ledger's
        next (its cost already spent on the budget by the caller)."""
        self._seq += 1
        self._count(
            line.outcome, _usage(line), call=line.provider != TOOL_PROVIDER, calls=line.calls
        )
        return msgspec.structs.replace(
            line,
            seq=self._seq,
            total_usd=self.budget.spent,
            budget_usd=self.budget.cap,
            resume=self.resume,
        )


def round_ms(seconds: float) -> float:
    """A latency in milliseconds as ledger lines keep it."""
    return round(seconds * 1000, 3)


def _usage(line: LedgerLine) -> Usage:
    return Usage(prompt_tokens=line.prompt_tokens, completion_tokens=line.completion_tokens)
