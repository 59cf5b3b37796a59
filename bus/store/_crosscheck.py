"""The cross-checks of :func:`sopbus.bus.store._verify.verify_run`: the files of a run against each
other, once each file's own chain has verified.

A chain alone cannot see a line cut from the end of a file, nor a line rewritten with every
hash after it recomputed. So the ledger (``costs.jsonl``) is held against everything else
that records the same calls:

- the event logs: every ``llm_called`` event carries its ledger line. Calls are paired by
  their ledger ``seq``, not by position: a resumed run logs the calls it answers from its
  recording in the order they complete, which is not the order of the ledger. A resumed
  run's earlier event logs (``events.<n>.jsonl``) count too: a call an execution made before
  it was killed is logged there, not in the new log.
- ``calls.jsonl``: every answered call (``ok``, ``replayed``) has its answer there, with the
  same ledger line and the usage the ledger charged;
- the ledger itself: ``seq`` counts lines from 1, and ``total_usd`` never falls nor is less
  than the sum of ``cost_usd`` so far;
- ``summary.json``: its totals are the ledger's, its end, message counts and verdict the
  log's ``run_ended`` and message events, its run, scenario, seed, provider and model the
  log's ``run_started``, its ``overrun`` the ledger's ``overrun`` line.

The one gap a killed run may honestly leave: the writes of one call go journal
(``calls.jsonl``), ledger, event log, each flushed, so an execution killed between two of
them leaves its last call in the first files only. That is a note, not tampering, when it is
the last call of an execution whose log has no ``run_ended``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import msgspec

from .._chain import unseal
from .._events import MESSAGE_KINDS
from .._util import CALLS, COSTS, EVENTS, SUMMARY
from ..money import TOOL_PROVIDER

Report = Callable[[str], None]
Record = tuple[int, dict[str, Any]]
_ROTATED = re.compile(r"events\.(\d+)\.jsonl")
_ANSWERED = ("ok", "replayed")
# bus._run.STATUS, restated: the run loop sits above the store and may not be imported here.
_STATUS = {
    "idle": "completed",
    "max_rounds": "completed",
    "stop_condition": "completed",
    "budget_exhausted": "budget_exhausted",
    "error": "failed",
    "cancelled": "cancelled",
}


def event_logs(run_dir: Path) -> list[Path]:
    """The run's event logs, oldest first: ``events.1.jsonl`` (the first execution of a
    resumed run), ``events.2.jsonl``, ..., then ``events.jsonl`` (the latest)."""
    rotated = sorted(
        (int(m.group(1)), p)
        for p in run_dir.glob("events.*.jsonl")
        if (m := _ROTATED.fullmatch(p.name))
    )
    current = [run_dir / EVENTS] if (run_dir / EVENTS).is_file() else []
    return [p for _, p in rotated] + current


def records(path: Path) -> list[Record]:
    """(line number, record) of the complete lines of a verified file."""
    if not path.is_file():
        return []
    out = []
    for number, line in enumerate(path.read_bytes().split(b"\n")[:-1], 1):
        body = unseal(line)
        out.append((number, msgspec.json.decode(body if body is not None else line)))
    return out


@dataclass
class Logs:
    """What the cross-checks read: the ledger, the answers and every event log."""

    run_dir: Path
    ledger: list[Record]
    calls: list[Record]
    logs: dict[Path, list[Record]]

    @classmethod
    def read(cls, run_dir: Path) -> Logs:
        return cls(
            run_dir,
            records(run_dir / COSTS),
            records(run_dir / CALLS),
            {path: records(path) for path in event_logs(run_dir)},
        )

    @property
    def reserves(self) -> bool:
        """Whether the run logs its reservations, as every run that keeps ``calls.jsonl`` does
        (a run from before sopbus kept its answers has neither)."""
        return any(
            e.get("kind") == "llm_reserved" for events in self.logs.values() for _, e in events
        )

    def where(self, name: str, line: int) -> str:
        return f"{self.run_dir / name}:{line}"

    def execution_log(self, resume: int) -> Path:
        """The event log of the run's ``resume``-th execution (0: the first)."""
        rotated = self.run_dir / f"events.{resume + 1}.jsonl"
        return rotated if rotated in self.logs else self.run_dir / EVENTS

    @property
    def finished(self) -> bool:
        """Whether the latest log holds ``run_ended``: the run finished, whatever files are
        missing now (a resume starts a new log, so an earlier execution's end does not count)."""
        events = self.logs.get(self.run_dir / EVENTS, [])
        return any(e.get("kind") == "run_ended" for _, e in events)

    def ended(self, log: Path) -> bool:
        events = self.logs.get(log, [])
        return bool(events) and events[-1][1].get("kind") == "run_ended"


def check_ledger(logs: Logs, report: Report, note: Report) -> None:
    """The ledger's own arithmetic, then the ledger against the event logs and the answers."""
    _check_arithmetic(logs, report)
    by_seq = {line.get("seq"): (number, line) for number, line in logs.ledger}
    logged = _check_events(logs, by_seq, report)
    answered = _check_answers(logs, by_seq, report, note)
    for number, line in logs.ledger:
        if line.get("seq") not in logged:
            _unlogged(logs, number, line, report, note)
    unanswered = [
        n
        for n, line in logs.ledger
        if line.get("outcome") in _ANSWERED and line.get("seq") not in answered
    ]
    if not unanswered:
        return
    if (logs.run_dir / CALLS).is_file() or logs.reserves:
        # The answer is written before its ledger line, so no kill explains a missing one.
        report(
            f"{logs.where(COSTS, unanswered[0])}: an answered call whose answer is not in "
            f"{CALLS} ({len(unanswered)} such lines)"
        )
    else:
        note(
            f"{logs.run_dir / CALLS}: absent: the run was made before sopbus kept its answers, "
            f"so they are not checked"
        )


def _check_arithmetic(logs: Logs, report: Report) -> None:
    # total_usd is the spend when the line was written: never less than the lines so far
    # (each was settled before it was written) and never falling. It may be more: in a sweep
    # a call settles, then waits for the sweep's account, while another call is ledgered.
    total, last = Decimal(0), Decimal(0)
    for index, (number, line) in enumerate(logs.ledger, 1):
        where = logs.where(COSTS, number)
        if line.get("seq") != index:
            report(
                f"{where}: seq {line.get('seq')} where {index} comes next: a line was "
                f"dropped, moved or renumbered"
            )
            return
        try:
            total += Decimal(line["cost_usd"])
            claimed = Decimal(line["total_usd"])
        except (KeyError, TypeError, InvalidOperation):
            report(f"{where}: no valid cost_usd and total_usd")
            return
        columns = _batch_problem(line)
        if columns is not None:
            report(f"{where}: {columns}")
            return
        if claimed < total or claimed < last:
            report(
                f"{where}: total_usd {claimed} but the costs up to this line sum to {total}"
                + (f" and the line before says {last}" if claimed < last else "")
            )
            return
        last = claimed


def _batch_problem(line: dict[str, Any]) -> str | None:
    """Why a batch line's columns are not its calls (their sums its totals), or ``None``."""
    batch = line.get("batch")
    if batch is None:
        return None
    try:
        columns = [batch[k] for k in ("agents", "prompt_tokens", "completion_tokens", "cost_usd")]
        if len({len(c) for c in columns}) != 1:
            return "the batch's columns differ in length"
        sums = (
            sum(int(n) for n in columns[1]),
            sum(int(n) for n in columns[2]),
            sum((Decimal(c) for c in columns[3]), Decimal(0)),
        )
    except (KeyError, TypeError, ValueError, InvalidOperation):
        return "the batch's columns are not agents, tokens and costs"
    line_sums = (
        line.get("prompt_tokens"),
        line.get("completion_tokens"),
        Decimal(line["cost_usd"]),
    )
    if sums != line_sums:
        return (
            f"the batch's calls sum to {sums[0]} prompt and {sums[1]} completion tokens and "
            f"${sums[2]}, but the line says {line_sums[0]}, {line_sums[1]} and ${line_sums[2]}"
        )
    return None


def _check_events(logs: Logs, by_seq: dict[Any, Record], report: Report) -> set[Any]:
    """Every ``llm_called`` event against the ledger line of its seq; returns the seqs seen."""
    seen: set[Any] = set()
    for log, events in logs.logs.items():
        in_this: set[Any] = set()
        for number, event in events:
            if event.get("kind") != "llm_called":
                continue
            call = event.get("call") or {}
            seq = call.get("seq")
            where = f"{log}:{number}"
            if seq in in_this:
                report(f"{where}: ledger line {seq} is logged twice in {log.name}")
            elif seq not in by_seq:
                report(
                    f"{logs.where(COSTS, len(logs.ledger) + 1)}: missing: {where} logs a call "
                    f"with seq {seq}, which the ledger ({len(logs.ledger)} lines) does not have"
                )
            elif by_seq[seq][1] != call:
                report(
                    f"{logs.where(COSTS, by_seq[seq][0])}: differs from the call logged at "
                    f"{where} (seq {seq})"
                )
            in_this.add(seq)
        seen |= in_this
    return seen


def _check_answers(logs: Logs, by_seq: dict[Any, Record], report: Report, note: Report) -> set[Any]:
    """Every answer of ``calls.jsonl`` against the ledger line of its seq; returns the seqs."""
    seen: set[Any] = set()
    for index, (number, record) in enumerate(logs.calls):
        line = record.get("ledger")
        if line is None:
            continue
        seq = line.get("seq")
        where = logs.where(CALLS, number)
        if seq in seen:
            report(f"{where}: a second answer for ledger line {seq}")
        elif seq not in by_seq:
            last = index == len(logs.calls) - 1 and seq == len(logs.ledger) + 1
            if last and not logs.ended(logs.execution_log(line.get("resume", 0))):
                note(
                    f"{where}: the answer to call {seq} has no ledger line yet: the run was "
                    f"killed between the two writes (sopbus resume restores it)"
                )
            else:
                report(
                    f"{logs.where(COSTS, len(logs.ledger) + 1)}: missing: {where} answers "
                    f"ledger line {seq}, which the ledger does not have"
                )
        elif by_seq[seq][1] != line:
            report(
                f"{where}: its ledger line differs from {logs.where(COSTS, by_seq[seq][0])} "
                f"(seq {seq})"
            )
        elif record.get("kind") != "tool" and _usage(record) != (
            line.get("prompt_tokens"),
            line.get("completion_tokens"),
        ):
            report(
                f"{where}: the answer's usage {_usage(record)} is not what ledger line {seq} "
                f"charged ({line.get('prompt_tokens')}, {line.get('completion_tokens')})"
            )
        seen.add(seq)
    return seen


def _usage(record: dict[str, Any]) -> tuple[Any, Any]:
    usage = (record.get("completion") or {}).get("usage") or {}
    return usage.get("prompt_tokens"), usage.get("completion_tokens")


def _unlogged(logs: Logs, number: int, line: dict[str, Any], report: Report, note: Report) -> None:
    """A ledger line some other file lacks: a note when its execution was killed right after
    writing it (see the module docstring), else a problem."""
    resume = line.get("resume", 0)
    later = [n for n, other in logs.ledger if n > number and other.get("resume", 0) == resume]
    log = logs.execution_log(resume)
    where = logs.where(COSTS, number)
    if not later and not logs.ended(log):
        note(
            f"{where}: no llm_called event records it: the execution that wrote it was "
            f"killed right after"
        )
    else:
        report(
            f"{where}: no llm_called event in {', '.join(p.name for p in logs.logs) or EVENTS} "
            f"records this call (seq {line.get('seq')})"
        )


def check_summary(logs: Logs, report: Report, note: Report | None = None) -> None:
    """``summary.json`` against the ledger (totals) and the latest log (start, end and the
    verdict its ``run_ended`` seals)."""
    path = logs.run_dir / SUMMARY
    if not path.is_file():
        return
    # Raw JSON, not a RunSummary: verify checks the file as it is on disk, where a type
    # would fill a missing total with its default or refuse a wrong one outright.
    try:
        summary = msgspec.json.decode(path.read_bytes())
    except msgspec.DecodeError as error:
        report(f"{path}: not JSON ({error})")
        return
    if not isinstance(summary, dict):
        report(f"{path}: not a JSON object")
        return
    totals_optional = not logs.ledger  # a team that never asked a model has no totals to show
    for key, want in _expected(logs).items():
        if key in _TOTALS and key not in summary and totals_optional:
            continue
        have = summary.get(key)
        if not _same(have, want):
            report(f"{path}: {key} is {_show(have)} but {_source(key)} says {_show(want)}")
    _check_overrun(logs, path, summary.get("overrun"), report)
    events = logs.logs.get(logs.run_dir / EVENTS, [])
    ended = events[-1][1] if events and events[-1][1].get("kind") == "run_ended" else None
    if ended is not None and "verdict" not in ended and note is not None:
        note(
            f"{path}: the run was made before sopbus sealed its verdict in run_ended, so "
            f"the verdict ({_show(summary.get('verdict'))}) is not checked"
        )


_TOTALS = ("total_usd", "llm_calls", "prompt_tokens", "completion_tokens")


def _expected(logs: Logs) -> dict[str, Any]:
    lines = [line for _, line in logs.ledger]
    want: dict[str, Any] = {
        "total_usd": sum((Decimal(line["cost_usd"]) for line in lines), Decimal(0)),
        # A paid tool call's line (provider "tool") is spend, not a model call.
        "llm_calls": sum(
            _calls(line)
            for line in lines
            if line.get("outcome") != "refused" and line.get("provider") != TOOL_PROVIDER
        ),
        "prompt_tokens": sum(int(line.get("prompt_tokens", 0)) for line in lines),
        "completion_tokens": sum(int(line.get("completion_tokens", 0)) for line in lines),
    }
    events = logs.logs.get(logs.run_dir / EVENTS, [])
    started = next((e for _, e in events if e.get("kind") == "run_started"), None)
    if started is not None:
        want.update(_started_fields(started))
    ended = events[-1][1] if events and events[-1][1].get("kind") == "run_ended" else None
    if ended is not None:
        want.update(
            end_reason=ended.get("reason"),
            rounds=ended.get("round"),
            status=_STATUS.get(str(ended.get("reason")), ended.get("reason")),
            error=ended.get("error"),
        )
        if "verdict" in ended:
            want["verdict"] = ended["verdict"]
        kinds = [e.get("kind") for _, e in events]
        want["messages"] = sum(k in MESSAGE_KINDS for k in kinds)
        want["undelivered"] = kinds.count("message_undelivered")
    return want


def _calls(line: dict[str, Any]) -> int:
    """The model calls a ledger line stands for: a population's batch its agents', else one."""
    batch = line.get("batch")
    agents = batch.get("agents") if isinstance(batch, dict) else None
    return len(agents) if isinstance(agents, list) else 1


_SETTINGS = ("provider", "model", "sop", "scenario_path")


def _started_fields(started: dict[str, Any]) -> dict[str, Any]:
    """What ``summary.json`` restates of the run's ``run_started`` (settings a log from an
    older version lacks are not compared)."""
    settings = started.get("settings") or {}
    want: dict[str, Any] = {"run_id": started.get("run_id")}
    for key in ("scenario", "seed"):
        if key in started:
            want[key] = started[key]
    for key in _SETTINGS:
        if key in settings:
            want[key] = settings[key]
    if settings.get("budget_usd") is not None:
        want["budget_usd"] = Decimal(settings["budget_usd"])
    return want


# What summary.json's overrun restates of the ledger line of the call that overran.
_OVERRUN_KEYS = ("provider", "round", "role", "action", "model")


def _check_overrun(logs: Logs, path: Path, have: Any, report: Report) -> None:
    """``summary.json``'s ``overrun`` is the first ``overrun`` line the latest execution
    ledgered (an earlier execution's overrun ended that execution, not this one), or null."""
    execution = _execution(logs)
    line = next(
        (
            (n, line)
            for n, line in logs.ledger
            if line.get("outcome") == "overrun" and line.get("resume", 0) == execution
        ),
        None,
    )
    if line is None:
        if have is not None:
            report(
                f"{path}: overrun is {_show(have)} but no call of the run's last execution "
                f"is ledgered overrun in {COSTS}"
            )
        return
    number, want = line
    if not isinstance(have, dict) or any(have.get(k) != want.get(k) for k in _OVERRUN_KEYS):
        report(
            f"{path}: overrun is {_show(have)} but {logs.where(COSTS, number)} ledgers "
            f"the overrun of {want.get('role')}'s {want.get('action')} call "
            f"(round {want.get('round')})"
        )


def _execution(logs: Logs) -> int:
    """How many executions came before the latest (its ``resumed`` event says; 0 if none)."""
    for _, event in logs.logs.get(logs.run_dir / EVENTS, []):
        if event.get("kind") == "resumed":
            return int((event.get("data") or {}).get("resume", 0))
    return 0


def _same(have: Any, want: Any) -> bool:
    if isinstance(want, Decimal):
        try:
            return (
                isinstance(have, (str, int, float))
                and not isinstance(have, bool)
                and Decimal(str(have)) == want
            )
        except InvalidOperation:
            return False
    if isinstance(want, int) and not isinstance(want, bool):
        return isinstance(have, int) and not isinstance(have, bool) and have == want
    return bool(have == want)


def _show(value: Any) -> str:
    if isinstance(value, (dict, list)) or value is None:
        return msgspec.json.encode(value).decode()
    return f'"{value}"' if isinstance(value, (str, Decimal)) else str(value)


def _source(key: str) -> str:
    if key in _TOTALS:
        return f"the ledger ({COSTS})"
    if key in ("messages", "undelivered"):
        return f"the message events of {EVENTS}"
    if key in ("run_id", "budget_usd", "scenario", "seed", *_SETTINGS):
        return f"run_started in {EVENTS}"
    return f"run_ended in {EVENTS}"
