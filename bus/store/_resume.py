"""``sopbus resume``: a killed or stopped run goes on where it was, without paying twice.

The state of a run (inboxes, role memories, the round, artifacts) is not saved as such: it
is rebuilt by running the run's scenario (``runs/<id>/scenario.toml``) again, from round 1,
into the same directory. ``rounds`` mode is deterministic, so the re-execution asks the
same calls in the same rounds; every call the run already had answered is answered from
its own ``calls.jsonl`` (:mod:`sopbus.bus.llm._tape`): no provider call, no new cost. The first call
without a recorded answer is where the run really continues, live. The same holds in
``events`` mode as far as the roles' turns are deterministic in it.

What the files do on a resume (the n-th resume of a run):

* ``events.jsonl`` is rewritten from scratch by the re-execution; the old one is kept as
  ``events.<n>.jsonl``. So the new log is a whole run: ``sopbus show`` prints the same
  messages as an uninterrupted run, and replayed calls appear as ``llm_called`` events with
  their original ledger lines. After ``run_started`` comes a ``resumed`` event that says what
  was carried over, and chains the new log to the old one: it names ``events.<n>.jsonl``,
  its last seal (``previous_head``) and its length, so ``sopbus verify`` finds an earlier
  log dropped, cut, swapped or renamed. (Continuing the old file after the replayed prefix would need the
  re-execution's events to line up one by one with the killed one's, which concurrent turns
  do not promise.)
* ``costs.jsonl`` continues: its lines stand, their spend is the starting spend, ``seq``
  goes on, and new lines carry ``resume = n``. A call that was in flight when the run died
  (a reservation with neither an answer nor a release) may have been billed: it is ledgered
  ``lost`` at its reserved amount, and made again. A ledger line the journal has but
  ``costs.jsonl`` lacks (the run died between the two writes) is restored first.
* ``calls.jsonl`` continues with the new live answers.
* ``artifacts/`` are written again by the re-execution, identically; ``summary.json`` is
  removed at the start (the run is unfinished again) and written at the end.
* A torn last line of any of the three files is cut off before anything is appended.

A run stopped by its round limit or its budget resumes the same way, with ``--max-rounds``
or ``--budget`` raised; the budget must stay above what the run has spent. A run that
completed is not resumed (:func:`finished`) unless the command line forces it.

Every step above can be cut by a kill and is redone or skipped by the next resume: the
rotation never leaves the run without an ``events.jsonl``, and what a resume needs is read
from every execution's log (:mod:`sopbus.bus.store._executions`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import msgspec

from .._chain import open_tail
from .._errors import ConfigError
from .._events import Note
from .._protocol import Completion, LLMRequest, ProviderBase
from .._summary import read_summary
from .._util import CALLS, COSTS, EVENTS, SCENARIO, SUMMARY, JsonlWriter, reached, read_jsonl
from ..llm import CallRecord, Gateway, Tape, TapeGateway, ToolRecord, read_recording
from ..money import LedgerLine
from ..scenario import Scenario, load_scenario, scenario_with_overrides
from ._chained import rotated_name
from ._executions import Executions, InFlight, Rotation, next_execution
from ._store import RunStore, drop_torn_tail, is_locked


@dataclass(frozen=True, kw_only=True)
class Continuation:
    """How :func:`sopbus._assemble._execute.execute` continues (resume) or re-runs (replay, fork) an
    earlier run: where it writes, which answers it takes from a tape, what it carries over.
    Built by :func:`plan_resume`, :func:`sopbus.bus.store._fork.plan_replay` or :func:`sopbus.bus.store._fork.plan_fork`.
    """

    run_dir: Path
    tape: Tape
    free: (
        bool  # taped answers ledgered as replayed at $0 (replay, fork), else the run's own (resume)
    )
    taped_through: int  # rounds up to this one make no provider call
    note: Note  # the event logged after run_started
    summary: dict[str, Any] = field(default_factory=dict)
    carried: tuple[LedgerLine, ...] = ()
    lost: tuple[InFlight, ...] = ()
    resume: int = 0
    first_call: int = 0
    live: bool = True  # False: no provider at all (replay)
    prepare: Callable[[], None] | None = None  # changes to the directory, made when it opens

    def open_store(self) -> RunStore:
        if self.run_dir.is_dir() and is_locked(self.run_dir):
            raise ConfigError(
                f"run {self.run_dir.name} is still executing in another process "
                f"({self.run_dir}); wait for it to end, or stop it first"
            )
        if self.prepare is not None:
            self.prepare()
        store = RunStore.open(self.run_dir)
        store.lock()
        return store

    def wrap(self, gateway: Gateway, store: RunStore) -> TapeGateway:
        """Logs the start note and carries the earlier ledger over, then puts the tape in
        front of ``gateway``. The lost calls follow (:meth:`ledger_lost`)."""
        store.log(self.note)
        reached("resume:noted")
        if self.carried or self.resume:
            gateway.carry(self.carried, resume=self.resume)
        return TapeGateway(
            gateway, self.tape, free=self.free, taped_through=self.taped_through, store=store
        )

    def ledger_lost(self, gateway: Gateway, answered: tuple[InFlight, ...] = ()) -> None:
        """Ledgers each call that was in flight when the run died as ``lost``, but those whose
        answer was found after all (``answered``: on a NATS run's stream), before any turn."""
        for lost in self.lost:
            if lost in answered:
                continue
            request = LLMRequest(
                messages=(),
                model=lost.model,
                role=lost.role,
                action=lost.action,
                subject=lost.subject,
            )
            gateway.record_lost(
                request,
                round=lost.round,
                attempt=lost.attempt,
                amount=lost.amount,
                call=lost.call,
                provider=lost.provider,
            )
            reached("resume:lost")


class Unplugged(ProviderBase):
    """The provider of a replay: every answer must come from the tape."""

    name = "replay"

    async def complete(self, request: LLMRequest) -> Completion:
        raise ConfigError(
            f"a replay makes no live call, but {request.role!r} asked for "
            f"{request.action!r} and the recording has no answer for it"
        )


def plan_resume(
    run_dir: Path, *, budget_usd: Decimal | None = None, max_rounds: int | None = None
) -> tuple[Scenario, Continuation]:
    """The scenario and continuation that resume the run in ``run_dir`` (see the module
    docstring). Reads only; the directory changes when the continuation's store opens."""
    scenario = scenario_with_overrides(
        scenario_of(run_dir), budget_usd=budget_usd, max_rounds=max_rounds
    )
    recording = read_recording(run_dir / CALLS)
    calls = recording.calls
    executions = Executions.read(run_dir)
    carried, recovered = _carried(ledger_of(run_dir), recording.calls, recording.tools)
    lost = executions.in_flight(calls, [*carried], recording.tools)
    spent = sum((line.cost_usd for line in carried), Decimal(0)) + sum(
        (c.amount for c in lost), Decimal(0)
    )
    _check_budget(run_dir, scenario, spent, budget_usd)
    resume, rotation = next_execution(run_dir)
    note = _resumed_note(run_dir, resume, rotation, scenario, carried, recovered, lost, spent)
    return scenario, Continuation(
        run_dir=run_dir,
        tape=Tape(calls, match="key", tools=recording.tools, lists=recording.lists),
        free=False,
        taped_through=0,
        note=note,
        summary={"resumes": resume},
        carried=carried,
        lost=tuple(lost),
        resume=resume,
        first_call=executions.last_call([*calls, *recording.tools]),
        prepare=lambda: _prepare(run_dir, resume, rotation, recovered),
    )


def _carried(
    ledger: list[LedgerLine], calls: list[CallRecord], tools: list[ToolRecord]
) -> tuple[tuple[LedgerLine, ...], list[LedgerLine]]:
    """The ledger the resume carries over: ``costs.jsonl``, then the lines of answers (a
    paid tool call's too) recorded but killed before their ledger line was written; and
    those recovered lines, in ``seq`` order."""
    known = {line.seq for line in ledger}
    answered: list[CallRecord | ToolRecord] = [*calls, *tools]
    recovered = sorted(
        (c.ledger for c in answered if c.ledger is not None and c.ledger.seq not in known),
        key=lambda line: line.seq,
    )
    return (*ledger, *recovered), recovered


def _resumed_note(
    run_dir: Path,
    resume: int,
    rotation: Rotation,
    scenario: Scenario,
    carried: tuple[LedgerLine, ...],
    recovered: list[LedgerLine],
    lost: list[InFlight],
    spent: Decimal,
) -> Note:
    """The ``resumed`` note the resume logs after ``run_started``."""
    # The log of the execution before this one: events.jsonl, unless a resume killed
    # after rotating it is being redone (then it already has its new name).
    head, lines = _log_head(run_dir / (EVENTS if rotation != "reuse" else rotated_name(resume)))
    return Note(
        kind="resumed",
        round=0,
        role="",
        data={
            "resume": resume,
            "previous_events": f"events.{resume}.jsonl",
            # The last seal of the previous execution's log, which chains this log to it:
            # verify finds that log dropped, cut, swapped or renamed (None: no seal in it).
            "previous_head": head,
            "previous_lines": lines,
            "carried_lines": len(carried),
            "recovered_lines": len(recovered),
            "carried_usd": spent,
            "lost_calls": [c.call for c in lost],
            "budget_usd": scenario.run.budget_usd,
            "max_rounds": scenario.run.max_rounds,
        },
    )


def finished(run_dir: Path, *, max_rounds: int | None = None) -> str | None:
    """What says the run in ``run_dir`` is complete, so that a resume has nothing to do:
    its summary says it completed, and not at a round limit that ``max_rounds`` raises.
    ``None`` for a run that can go on (killed, failed, stopped by its budget)."""
    summary = read_summary(run_dir)
    if summary is None or summary.status != "completed":
        return None
    if summary.end_reason == "max_rounds" and max_rounds is not None:
        if max_rounds > summary.max_rounds:
            return None
    return f"it completed ({summary.end_reason} after {summary.rounds} rounds)"


def scenario_of(run_dir: Path) -> Scenario:
    """The scenario as the run in ``run_dir`` ran it, its relative paths resolved against the
    original scenario file's directory when that still exists."""
    if not (run_dir / EVENTS).is_file():
        raise ConfigError(f"{run_dir} is not a run directory (no {EVENTS} in it)")
    if not (run_dir / SCENARIO).is_file():
        raise ConfigError(
            f"run {run_dir.name} ({run_dir}) died before it wrote {SCENARIO}, so it cannot "
            f"be resumed: nothing says what it ran; start it anew with `sopbus run SCENARIO`"
        )
    origin = Executions.read(run_dir).origin()
    if origin is None or not origin.is_file():
        return load_scenario(run_dir / SCENARIO)
    # The copy names the original's files (absolute, inside the original's folder), so it
    # is checked against that folder, as the original was.
    scenario = load_scenario(run_dir / SCENARIO, base_dir=origin.parent)
    return msgspec.structs.replace(scenario, path=origin)


def in_flight(run_dir: Path) -> list[InFlight]:
    """The reservations of every execution of the run in ``run_dir`` that neither answered,
    nor were released, nor were ledgered ``lost`` by an earlier resume."""
    recording = read_recording(run_dir / CALLS)
    return Executions.read(run_dir).in_flight(recording.calls, ledger_of(run_dir), recording.tools)


def ledger_of(run_dir: Path) -> list[LedgerLine]:
    """The ledger lines of the run in ``run_dir`` (``costs.jsonl``)."""
    path = run_dir / COSTS
    return list(read_jsonl(path, LedgerLine)) if path.is_file() else []


def _log_head(path: Path) -> tuple[str | None, int]:
    """The ``_h`` of the last seal of the log at ``path`` and its complete lines, as they
    will be once its torn last line (if any) is cut off."""
    data = path.read_bytes()
    complete = data[: data.rfind(b"\n") + 1]
    found = open_tail(complete)
    return (found[0].decode() if found else None), complete.count(b"\n")


def _check_budget(run_dir: Path, scenario: Scenario, spent: Decimal, given: Decimal | None) -> None:
    cap = scenario.run.budget_usd
    if spent > cap:
        flag = f"--budget {given}" if given is not None else f"its budget ${cap}"
        raise ConfigError(
            f"run {run_dir.name} has already spent ${spent} (with the calls that "
            f"were in flight), more than {flag}; resume it with a --budget above ${spent}"
        )


def _prepare(run_dir: Path, resume: int, rotation: Rotation, recovered: list[LedgerLine]) -> None:
    """The resume's changes to the directory, each one redone or skipped by the next resume
    if this one is killed after it (see :func:`sopbus.bus.store._executions.next_execution`)."""
    # First: a run killed after this reads as unfinished, which it is from now on.
    (run_dir / SUMMARY).unlink(missing_ok=True)
    for name in (EVENTS, COSTS, CALLS):
        drop_torn_tail(run_dir / name)
    current, kept = run_dir / EVENTS, run_dir / f"events.{resume}.jsonl"
    if rotation == "rotate":
        os.link(current, kept)  # the old log under its new name, while events.jsonl stays
        reached("resume:linked")
    fresh = run_dir / f"{EVENTS}.new"
    fresh.write_bytes(b"")
    os.replace(fresh, current)  # never a moment without an events.jsonl
    reached("resume:rotated")
    if recovered:
        with JsonlWriter(run_dir / COSTS) as ledger:
            for line in recovered:
                ledger.write(line)
        reached("resume:recovered")
