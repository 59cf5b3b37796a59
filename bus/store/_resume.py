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
or ``--budget`` raised; the budget must stay above what the run has spent.
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
from .._jsonl import JsonlWriter, read_jsonl
from .._layout import CALLS, COSTS, EVENTS, SCENARIO, SUMMARY
from .._protocol import Completion, LLMRequest
from ..llm._gateway import Gateway
from ..llm._tape import RELEASED, RESERVED, CallRecord, Tape, TapeGateway, read_calls
from ..money._ledger import LedgerLine
from ..scenario._load import load_scenario, scenario_with_overrides
from ..scenario._types import Scenario
from ._store import RunStore, drop_torn_tail, is_locked


@dataclass(frozen=True, kw_only=True)
class InFlight:
    """A call whose reservation was written but that neither answered nor was released."""

    call: int
    round: int
    role: str
    action: str
    model: str
    attempt: int
    amount: Decimal


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
        """Logs the start note, carries the earlier ledger over and ledgers the lost calls,
        then puts the tape in front of ``gateway``."""
        store.log(self.note)
        if self.carried or self.resume:
            gateway.carry(self.carried, resume=self.resume)
        for lost in self.lost:
            request = LLMRequest(messages=(), model=lost.model, role=lost.role, action=lost.action)
            gateway.record_lost(request, round=lost.round, attempt=lost.attempt, amount=lost.amount)
        return TapeGateway(
            gateway, self.tape, free=self.free, taped_through=self.taped_through, store=store
        )


class Unplugged:
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
    ledger = ledger_of(run_dir)
    calls = read_calls(run_dir)
    events: list[dict[str, Any]] = list(read_jsonl(run_dir / EVENTS, dict))
    known = {line.seq for line in ledger}
    recovered = sorted(
        (c.ledger for c in calls if c.ledger is not None and c.ledger.seq not in known),
        key=lambda line: line.seq,
    )
    carried = (*ledger, *recovered)
    lost = in_flight(events, calls)
    spent = sum((line.cost_usd for line in carried), Decimal(0)) + sum(
        (c.amount for c in lost), Decimal(0)
    )
    _check_budget(run_dir, scenario, spent, budget_usd)
    resume = 1 + len(_rotated(run_dir))
    head, lines = _log_head(run_dir / EVENTS)
    note = Note(
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
    ids = [c.call for c in calls] + [e["data"]["call"] for e in events if e.get("kind") == RESERVED]
    return scenario, Continuation(
        run_dir=run_dir,
        tape=Tape(calls, match="key"),
        free=False,
        taped_through=0,
        note=note,
        summary={"resumes": resume},
        carried=carried,
        lost=tuple(lost),
        resume=resume,
        first_call=max(ids, default=0),
        prepare=lambda: _prepare(run_dir, resume, recovered),
    )


def scenario_of(run_dir: Path) -> Scenario:
    """The scenario as the run in ``run_dir`` ran it, its relative paths resolved against the
    original scenario file's directory when that still exists."""
    if not (run_dir / EVENTS).is_file():
        raise ConfigError(f"{run_dir} is not a run directory (no {EVENTS} in it)")
    if not (run_dir / SCENARIO).is_file():
        raise ConfigError(
            f"run {run_dir.name} died before it wrote {SCENARIO}, so it cannot be "
            f"run again; start it anew with `sopbus run`"
        )
    origin = _origin(run_dir)
    if origin is None or not origin.is_file():
        return load_scenario(run_dir / SCENARIO)
    # The copy names the original's files (absolute, inside the original's folder), so it
    # is checked against that folder, as the original was.
    scenario = load_scenario(run_dir / SCENARIO, base_dir=origin.parent)
    return msgspec.structs.replace(scenario, path=origin)


def in_flight(events: list[dict[str, Any]], calls: list[CallRecord]) -> list[InFlight]:
    """The reservations in ``events`` that have neither an answer in ``calls`` nor a release."""
    closed = {c.call for c in calls} | {
        e["data"]["call"] for e in events if e.get("kind") == RELEASED
    }
    return [
        InFlight(
            call=d["call"],
            round=e["round"],
            role=e["role"],
            action=d["action"],
            model=d["model"],
            attempt=d["attempt"],
            amount=Decimal(d["amount"]),
        )
        for e in events
        if e.get("kind") == RESERVED and (d := e["data"])["call"] not in closed
    ]


def ledger_of(run_dir: Path) -> list[LedgerLine]:
    """The ledger lines of the run in ``run_dir`` (``costs.jsonl``)."""
    path = run_dir / COSTS
    return list(read_jsonl(path, LedgerLine)) if path.is_file() else []


def _origin(run_dir: Path) -> Path | None:
    event: dict[str, Any]
    for event in read_jsonl(run_dir / EVENTS, dict):
        if event.get("kind") == "run_started":
            origin = event.get("settings", {}).get("scenario_path")
            return Path(origin) if origin else None
    return None


def _log_head(path: Path) -> tuple[str | None, int]:
    """The ``_h`` of the last seal of the log at ``path`` and its complete lines, as they
    will be once its torn last line (if any) is cut off."""
    data = path.read_bytes()
    complete = data[: data.rfind(b"\n") + 1]
    found = open_tail(complete)
    return (found[0].decode() if found else None), complete.count(b"\n")


def _rotated(run_dir: Path) -> list[Path]:
    return [p for p in run_dir.glob("events.*.jsonl") if p.name.split(".")[1].isdigit()]


def _check_budget(run_dir: Path, scenario: Scenario, spent: Decimal, given: Decimal | None) -> None:
    cap = scenario.run.budget_usd
    if spent > cap:
        flag = f"--budget {given}" if given is not None else f"its budget ${cap}"
        raise ConfigError(
            f"run {run_dir.name} has already spent ${spent} (with the calls that "
            f"were in flight), more than {flag}; resume it with a --budget above ${spent}"
        )


def _prepare(run_dir: Path, resume: int, recovered: list[LedgerLine]) -> None:
    for name in (EVENTS, COSTS, CALLS):
        drop_torn_tail(run_dir / name)
    os.replace(run_dir / EVENTS, run_dir / f"events.{resume}.jsonl")
    (run_dir / SUMMARY).unlink(missing_ok=True)
    if recovered:
        with JsonlWriter(run_dir / COSTS) as ledger:
            for line in recovered:
                ledger.write(line)
