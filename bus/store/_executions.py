"""A run's executions, read together: its first run and every ``sopbus resume`` of it.

Each execution has its own event log (``events.<n>.jsonl`` for the earlier ones, oldest
first, ``events.jsonl`` for the latest), so what a resume must know is read from all of
them: the original scenario's path, the call ids in use, and the reservations that no
answer, release or ``lost`` line closed. A resume killed in its own first steps leaves
traces that a plain reading of ``events.jsonl`` would misread; :func:`next_execution`
says how the next resume redoes them (see docs/runs.md, "Killed while resuming").
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

from .._util import EVENTS, read_jsonl
from ..llm import RELEASED, RESERVED, CallRecord, ToolRecord
from ..money import LedgerLine
from ._crosscheck import event_logs

Rotation = Literal["rotate", "finish", "reuse"]


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
    subject: str = ""
    provider: str = ""  # "tool": a paid tool call's reservation


@dataclass(frozen=True)
class Executions:
    """Every event log of a run, oldest first, each read whole."""

    logs: dict[Path, list[dict[str, Any]]]

    @classmethod
    def read(cls, run_dir: Path) -> Executions:
        logs = event_logs(run_dir)
        if len(logs) > 1 and os.path.samefile(logs[-2], logs[-1]):
            logs.pop()  # a rotation cut half-way: one log under two names (next_execution)
        return cls({path: list(read_jsonl(path, dict)) for path in logs})

    def events(self) -> Iterable[dict[str, Any]]:
        return (event for events in self.logs.values() for event in events)

    def origin(self) -> Path | None:
        """The scenario file the run was started from, as the latest ``run_started`` says."""
        for events in reversed(self.logs.values()):
            for event in events:
                if event.get("kind") == "run_started":
                    origin = event.get("settings", {}).get("scenario_path")
                    return Path(origin) if origin else None
        return None

    def last_call(self, calls: Sequence[CallRecord | ToolRecord]) -> int:
        """The highest call id any execution used (new ones follow it)."""
        reserved = (e["data"]["call"] for e in self.events() if e.get("kind") == RESERVED)
        ids = (c.call if isinstance(c, CallRecord) else c.reservation for c in calls)
        return max((*ids, *reserved), default=0)

    def in_flight(
        self, calls: list[CallRecord], ledger: list[LedgerLine], tools: Sequence[ToolRecord] = ()
    ) -> list[InFlight]:
        """The reservations of every execution that no answer in ``calls``, no paid tool
        result in ``tools``, no release and no ``lost`` line of ``ledger`` (an earlier
        resume's) closed."""
        closed = (
            {c.call for c in calls}
            | {t.reservation for t in tools if t.reservation}
            | {e["data"]["call"] for e in self.events() if e.get("kind") == RELEASED}
        )
        closed |= {line.lost_call for line in ledger if line.outcome == "lost" and line.lost_call}
        # A lost line written before lost lines named their call closes the reservation that
        # matches it in everything but the id.
        unnamed = Counter(
            _key(line) for line in ledger if line.outcome == "lost" and not line.lost_call
        )
        open_ = []
        for event in self.events():
            if event.get("kind") != RESERVED or (d := event["data"])["call"] in closed:
                continue
            flight = InFlight(
                call=d["call"],
                round=event["round"],
                role=event["role"],
                action=d["action"],
                model=d["model"],
                attempt=d["attempt"],
                amount=Decimal(d["amount"]),
                subject=d.get("subject", ""),
                provider=d.get("provider", ""),
            )
            key = (flight.round, flight.role, flight.action, flight.attempt, flight.amount)
            if unnamed[key]:
                unnamed[key] -= 1
                continue
            open_.append(flight)
        return open_


def _key(line: LedgerLine) -> tuple[int, str, str, int, Decimal]:
    return (line.round, line.role, line.action, line.attempt, line.cost_usd)


def rotated(run_dir: Path) -> list[Path]:
    """The event logs of the earlier executions, oldest first."""
    return [p for p in event_logs(run_dir) if p.name != EVENTS]


def next_execution(run_dir: Path) -> tuple[int, Rotation]:
    """Which resume comes next, and what becomes of ``events.jsonl``:

    * ``rotate``: it is the log of a whole execution, kept as ``events.<n>.jsonl``;
    * ``finish``: a resume was killed half-way through that rotation (the old log has its
      new name and still stands as ``events.jsonl``): the resume is redone as the same n;
    * ``reuse``: a resume was killed before it logged its ``resumed`` note, which comes
      right after its ``run_started`` and before any call (its log holds nothing
      else): it is redone as the same n, in the same file.
    """
    earlier = rotated(run_dir)
    current = run_dir / EVENTS
    if earlier and current.is_file() and os.path.samefile(earlier[-1], current):
        return len(earlier), "finish"
    if earlier and not (
        current.is_file()
        and any(event.get("kind") == "resumed" for event in read_jsonl(current, dict))
    ):
        return len(earlier), "reuse"
    return len(earlier) + 1, "rotate"
