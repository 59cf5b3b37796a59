"""The run loop: rounds (deterministic, MetaGPT's model) or events (react on arrival).

In ``rounds`` mode each round gives one turn to every role with news, all turns of a round
running concurrently in one nursery (their LLM calls overlap); what they publish is
delivered in the team's declared order once the round's turns are done, and read in the
next round. The log is therefore the same whatever order the calls finish in.

In ``events`` mode each role has its own task that wakes as soon as its inbox has news and
publishes at once. A message's round is then its causal depth (one more than the deepest
message that led to it), and ``max_rounds`` bounds that depth.

A run ends at the first of: idle (nobody has news), the round limit, a stop condition (a
role raised :class:`StopRun`, or the SOP's ``stop`` said so), the budget (a call was
refused, or a provider reported usage past a call's reservation and closed the budget), an
error (a role raised; the other turns are cancelled and the traceback is logged), or
cancellation. The end reason is logged and written to ``summary.json``.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import msgspec
import trio

from ._environment import Environment
from ._errors import BudgetExhausted, StopRun, exception_leaves
from ._events import RoundEnded, RunEnded, TurnFailed
from ._member import LLMGateway, Member, ToolService, Turn
from ._message import Message
from ._summary import RunSummary
from ._verdict import Judge, RunRecord, Verdict, judge_run
from .llm import GatewayStats
from .money import Budget
from .store import RunStore

_replace = msgspec.structs.replace

StopCondition = Callable[[Sequence[Message], int], "str | None"]
WriteArtifact = Callable[[str, "str | bytes"], Any]
"""Writes an artifact (a path under ``artifacts/``, its text or bytes) through the run's
record, as a role's turn does: what an SOP's ``finish`` is given."""
"""Looks at the messages a round (or a turn) published and returns why to stop, or None."""

# Rounds of one turn run without a nursery, and a turn that never waits never reaches a
# checkpoint: the rounds loop then makes one itself this often, so that other tasks (the
# progress display) run and a cancellation is noticed within it.
_PAUSE_S = 0.005

END_REASONS = ("idle", "max_rounds", "stop_condition", "budget_exhausted", "error", "cancelled")
STATUS = {
    "idle": "completed",
    "max_rounds": "completed",
    "stop_condition": "completed",
    "budget_exhausted": "budget_exhausted",
    "error": "failed",
    "cancelled": "cancelled",
}


class Injection(msgspec.Struct, frozen=True):
    """A message published at the start of ``round`` (a user's edit, a scheduled event)."""

    round: int
    message: Message


class RunGateway(LLMGateway, Protocol):
    """What the run loop needs of its gateway besides calls (:class:`sopbus.bus.Gateway`
    is one): the budget, which a provider's overrun closes (the run then ends
    ``budget_exhausted``), and the totals its summary reports."""

    @property
    def budget(self) -> Budget: ...

    def stats(self) -> GatewayStats: ...


class _End(Exception):
    """Internal: unwinds the loop with an end reason."""

    def __init__(self, reason: str, detail: str = ""):
        self.reason, self.detail = reason, detail


class Runner:
    """Runs one team to its end. Build it, then ``await runner.run()``."""

    def __init__(
        self,
        env: Environment,
        *,
        mode: str = "rounds",
        max_rounds: int = 10,
        seed: Sequence[Message] = (),
        injections: Sequence[Injection] = (),
        stop: StopCondition | None = None,
        gateway: RunGateway | None = None,
        store: RunStore | None = None,
        summary: Mapping[str, Any] | None = None,
        judge: Judge | None = None,
        finish: Callable[[WriteArtifact], None] | None = None,
        tools: ToolService | None = None,
    ):
        if mode not in ("rounds", "events"):
            raise ValueError(f"mode must be 'rounds' or 'events', not {mode!r}")
        self.env, self.mode, self.max_rounds = env, mode, max_rounds
        self._seed = list(seed)
        self._injections = sorted(injections, key=lambda i: i.round)
        self._stop, self._gateway, self._store = stop, gateway, store
        self._tools = tools  # the run's tools, lent to every turn
        self._summary_extra = dict(summary or {})
        self._judge = judge
        self._final_writes = finish
        self._messages: list[Message] = []  # every published message, for the verdict
        self._ending: _End | None = None  # set by a turn: budget or stop, finish in-flight work
        self._error: tuple[str, str] | None = None
        self._round = 0
        self._next_pause = 0.0
        self._at_work: dict[str, Turn] = {}  # the turns in progress, by role

    async def run(self) -> RunSummary:
        started = time.time()
        end = _End("idle")
        try:
            if self.mode == "rounds":
                end = await self._rounds()
            else:
                end = await self._events()
        except BaseException as exc:  # cancellation, Ctrl-C: record, then let it go on
            end = _End("cancelled", _what(exc))
            self._finish(end, started)
            raise
        return self._finish(end, started)

    # -- rounds -------------------------------------------------------------------------

    async def _rounds(self) -> _End:
        env, store = self.env, self._store
        self._publish_all(self._seed, 0, flush=True)
        for rnd in range(1, self.max_rounds + 1):
            self._round = env.round = rnd
            if self._injections:
                self._publish_all(self._due_injections(rnd), rnd, flush=True)
            turns = tuple(env.with_news())
            if not turns:
                if self._injections:
                    continue  # nothing to do until the next scheduled message
                return _End("idle")
            if store is not None:
                store.open_round(rnd, turns)
            if len(turns) == 1:
                # A lone turn is awaited directly: a nursery per round would cost more than
                # a cheap turn itself.
                news = env.take(turns[0])
                out = await self._turn(env.member(turns[0]), news, rnd, None)
                if self._pause_due():
                    await trio.lowlevel.checkpoint()
                published = self._publish_all(out, rnd, answering=news)
            else:
                published = await self._round_turns(
                    [(env.member(n), env.take(n)) for n in turns], rnd
                )
            # Written at once with the round's messages, before the next round's turns start
            # (see bus/store/_store.py).
            self._log(RoundEnded(round=rnd, published=len(published), turns=turns))
            self._check_end(published, rnd)
            if self._ending is not None:
                return self._ending
        if env.pending() or self._injections:
            return _End("max_rounds", f"stopped after round {self.max_rounds} with work left")
        return _End("idle")

    def _pause_due(self) -> bool:
        """Whether the rounds loop should yield now (see ``_PAUSE_S``)."""
        now = time.perf_counter()
        if now < self._next_pause:
            return False
        self._next_pause = now + _PAUSE_S
        return True

    async def _round_turns(
        self, turns: list[tuple[Member, list[Message]]], rnd: int
    ) -> list[Message]:
        """Runs a round's turns concurrently in a nursery, then publishes their outputs in
        the order of ``turns`` (the team's declared order), each message that names no
        parents answering what its turn read; returns what they published."""
        outputs: list[Sequence[Message]] = [()] * len(turns)
        async with trio.open_nursery() as nursery:
            for i, (member, news) in enumerate(turns):
                nursery.start_soon(
                    self._turn_into, outputs, i, member, news, rnd, nursery.cancel_scope
                )
        # One publish for the round (one log_all, one pass of the router's setup), however
        # many turns it had.
        return self._publish_all([m for out in outputs for m in out], rnd)

    async def _turn_into(
        self,
        outputs: list[Sequence[Message]],
        i: int,
        member: Member,
        news: list[Message],
        rnd: int,
        scope: trio.CancelScope,
    ) -> None:
        out = await self._turn(member, news, rnd, scope)
        if out:
            parents = tuple([m.id for m in news])
            outputs[i] = [m if m.parents else _replace(m, parents=parents) for m in out]

    # -- events -------------------------------------------------------------------------

    async def _events(self) -> _End:
        self._busy = 0
        self._limited = False
        self._done = trio.Event()
        async with trio.open_nursery() as nursery:

            def spawn(member: Member) -> None:
                nursery.start_soon(self._role_loop, member, nursery.cancel_scope)

            for member in self.env.members:
                spawn(member)
            self.env.on_join = spawn
            self._publish_all(self._seed, 0, flush=True)
            self._check_idle()
            await self._done.wait()
            nursery.cancel_scope.cancel()
        self.env.on_join = None
        if self._ending is not None:
            return self._ending
        if self._limited:
            return _End(
                "max_rounds", f"messages deeper than round {self.max_rounds} were not acted on"
            )
        return _End("idle")

    async def _role_loop(self, member: Member, scope: trio.CancelScope) -> None:
        while member.name in self.env:
            if not self.env.has_news(member.name):
                await self.env.wait_for_news(member.name)
                continue
            if self._ending is not None:
                return
            await self._react(member, self.env.take(member.name), scope)

    async def _react(self, member: Member, news: list[Message], scope: trio.CancelScope) -> None:
        """One events-mode turn. Its own function so that what it read and published is
        freed when it returns, not kept by a parked role loop until its next turn."""
        rnd = 1 + max(m.round for m in news)
        if rnd > self.max_rounds:
            self._limited = True
            self._check_idle()
            return
        self._busy += 1
        self._round = self.env.round = max(self._round, rnd)
        out = await self._turn(member, news, rnd, scope)
        published = self._publish_all(out, rnd, answering=news, flush=True)
        self._check_end(published, rnd)
        self._busy -= 1
        self._check_idle()

    def at_work(self) -> list[tuple[str, str]]:
        """The roles taking their turn now, each with the action it is on (``""`` until it
        says), in the order their turns began: what a progress display shows."""
        return [(name, turn.doing) for name, turn in self._at_work.items()]

    def _check_idle(self) -> None:
        if self._busy:
            return
        if self._ending is not None or self._error is not None:
            self._done.set()
        elif self.env.pending() == 0:
            if self._injections:
                nxt = self._injections[0].round
                self._publish_all(self._due_injections(nxt), nxt, flush=True)
                if self.env.pending():
                    return
            self._done.set()

    # -- shared -------------------------------------------------------------------------

    async def _turn(
        self, member: Member, news: list[Message], rnd: int, scope: trio.CancelScope | None
    ) -> Sequence[Message]:
        turn = Turn(
            run_id=self.env.run_id,
            round=rnd,
            role=member.name,
            gateway=self._gateway,
            services=self._store,
            tools=self._tools,
        )
        self._at_work[member.name] = turn
        try:
            out = await member.step(news, turn)
        except Exception as exc:
            ending = _ending_of(exc)
            if ending is not None:
                # Other turns' calls already in flight finish and are settled; no new turn starts.
                self._ending = self._ending or ending
                return ()
            tb = traceback.format_exc()
            self._log(TurnFailed(round=rnd, role=member.name, error=repr(exc), traceback=tb))
            if self._error is None:
                # str, not repr: the message of a ModelOutputError is multi-line prose for people
                cause = _first_error(exc)
                self._error = (
                    f"role {member.name!r} failed in round {rnd}: {type(cause).__name__}: {cause}",
                    tb,
                )
            if scope is not None:
                scope.cancel()  # the other turns are cancelled; the run ends with 'error'
            return ()
        finally:
            self._at_work.pop(member.name, None)
        return out

    def _publish_all(
        self,
        messages: Sequence[Message],
        rnd: int,
        *,
        answering: Sequence[Message] = (),
        flush: bool = False,
    ) -> list[Message]:
        """Publishes one batch; a message that names no parents gets the ids of ``answering``
        (what the turn that made it read). ``flush`` writes the batch's log records at once
        (else the next event that is not a message writes them, as ``round_ended`` does in
        ``rounds`` mode: see :class:`~sopbus.bus.RunStore`)."""
        if not messages:
            if flush and self._store is not None:
                self._store.flush()
            return []
        parents = (answering[0].id,) if len(answering) == 1 else tuple([m.id for m in answering])
        published = self.env.publish_all(messages, round=rnd, parents=parents)
        self._messages += published
        if flush and self._store is not None:
            self._store.flush()
        return published

    def _due_injections(self, rnd: int) -> list[Message]:
        due = [i.message for i in self._injections if i.round <= rnd]
        self._injections = [i for i in self._injections if i.round > rnd]
        return due

    def _check_end(self, published: Sequence[Message], rnd: int) -> None:
        if self._error is not None:
            self._ending = _End("error", self._error[0])
        elif self._ending is None and self._stop is not None:
            why = self._stop(published, rnd)
            if why:
                self._ending = _End("stop_condition", why)

    def _log(self, event: Any) -> None:
        if self._store is not None:
            self._store.log(event)

    def _finish(self, end: _End, started: float) -> RunSummary:
        """Ends the run: the SOP's last writes, the verdict, ``run_ended`` sealing the log,
        then ``summary.json``; returns the summary."""
        end = self._final_end(end)
        if self._final_writes is not None and self._store is not None:
            # The SOP's last writes (a book assembled from every board write) go through the
            # run's record like a role's, before the verdict reads them and before run_ended
            # seals the log: verify then finds each file as it was written.
            store = self._store
            self._final_writes(
                lambda name, data: store.write_artifact(
                    name, data, role="finish", round=self._round
                )
            )
        error, tb = self._error or (None, None)
        record = RunRecord(
            end_reason=end.reason,
            detail=end.detail,
            messages=tuple(self._messages),
            artifacts_dir=self._store.artifacts_dir if self._store else None,
        )
        # Judged before run_ended is logged, so that the verdict is sealed with the log and
        # summary.json's copy of it can be checked (sopbus verify).
        verdict = judge_run(self._judge, record)
        self._log(
            RunEnded(
                round=self._round,
                reason=end.reason,
                detail=end.detail,
                error=error,
                traceback=tb,
                verdict=verdict,
            )
        )
        summary = self._summary(end, started, error=error, verdict=verdict)
        if self._store is not None:
            self._store.write_summary(summary)
        return summary

    def _final_end(self, end: _End) -> _End:
        """How the run ended after all: a turn's error, or a budget that a provider's
        overrun closed, overrides the loop's own ending (not a cancellation)."""
        if self._error is not None:
            return _End("error", self._error[0])
        closed = self._gateway.budget.closed if self._gateway is not None else None
        if closed is not None and end.reason != "cancelled":
            # A provider overran its reservation: whatever a role made of that error, the
            # cap stopped holding there, and that is why the run ended.
            return _End("budget_exhausted", closed)
        return end

    def _summary(
        self, end: _End, started: float, *, error: str | None, verdict: Verdict | None
    ) -> RunSummary:
        totals = self._gateway.stats() if self._gateway is not None else GatewayStats()
        ended = time.time()
        summary = RunSummary(
            run_id=self.env.run_id,
            status=STATUS[end.reason],
            end_reason=end.reason,
            detail=end.detail,
            error=error,
            mode=self.mode,
            rounds=self._round,
            max_rounds=self.max_rounds,
            messages=self.env.published,
            undelivered=self.env.undelivered,
            verdict=verdict,
            total_usd=totals.total_usd,
            budget_usd=totals.budget_usd,
            llm_calls=totals.llm_calls,
            prompt_tokens=totals.prompt_tokens,
            completion_tokens=totals.completion_tokens,
            overrun=totals.overrun,
            taped_calls=totals.taped_calls,
            started_at=started,
            ended_at=ended,
            duration_s=round(ended - started, 6),
            populations={c.name: c.aggregates() for c in self.env.crowds} or None,
        )
        return _replace(summary, **self._summary_extra) if self._summary_extra else summary


def _ending_of(exc: Exception) -> _End | None:
    """The end a role's exception asks for: :class:`BudgetExhausted` or :class:`StopRun`,
    alone or as the only kinds in the exception group of a nursery inside the role (a
    role's concurrent calls can all be refused at once); ``None`` for anything else, which
    is an error. A group holding both ends on the budget: spending stopped it."""
    leaves = list(exception_leaves(exc))
    if not leaves or not all(isinstance(e, (BudgetExhausted, StopRun)) for e in leaves):
        return None
    budget = next((e for e in leaves if isinstance(e, BudgetExhausted)), None)
    if budget is not None:
        return _End("budget_exhausted", str(budget))
    stop = leaves[0]
    assert isinstance(stop, StopRun)
    return _End("stop_condition", stop.detail)


def _first_error(exc: BaseException) -> BaseException:
    """What to name for a failed turn: the exception, or in a nursery's group the first
    one that is neither a refusal nor a stop (the group's own text says nothing)."""
    leaves = [e for e in exception_leaves(exc) if not isinstance(e, (BudgetExhausted, StopRun))]
    return leaves[0] if isinstance(exc, BaseExceptionGroup) and leaves else exc


def _what(exc: BaseException) -> str:
    """``Cancelled`` or ``KeyboardInterrupt``, looking inside the groups trio's nurseries wrap
    them in (``BaseExceptionGroup`` alone would not say what stopped the run)."""
    if isinstance(exc, BaseExceptionGroup):
        return ", ".join(sorted({_what(e) for e in exc.exceptions}))
    return type(exc).__name__


async def run_team(env: Environment, **kwargs: Any) -> RunSummary:
    """Runs the team in ``env`` to its end; see :class:`Runner` for the keywords."""
    return await Runner(env, **kwargs).run()
