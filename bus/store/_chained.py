"""The executions of a resumed run, checked as one chain (part of ``sopbus verify``; what a
resume reads from them is :mod:`sopbus.bus.store._executions`).

Each resume keeps the log of the execution before it as ``events.<n>.jsonl`` and writes a
``resumed`` event near the start of its own log that names that file, how many executions
came before (``resume``), and the last seal (``previous_head``) and length of that log. So
the latest log says how many earlier logs there must be, and each log vouches for the one
before it: a log dropped, cut at a batch boundary (its own chain cannot see that), swapped
with another or renamed is found here. Logs resumed before ``previous_head`` was recorded
are checked by name and number only, and verify says so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .._chain import ChainReport
from .._util import EVENTS, SUMMARY
from ._crosscheck import Logs, Record, Report

RESUMED = "resumed"


def rotated_name(execution: int) -> str:
    """The file name of the log of a resumed run's ``execution``-th execution (from 1)."""
    return f"events.{execution}.jsonl"


def check_executions(
    logs: Logs,
    heads: dict[Path, ChainReport],
    summary: dict[str, Any] | None,
    report: Report,
    note: Report,
) -> None:
    """The run's event logs against the count and the chain the ``resumed`` events record."""
    run_dir = logs.run_dir
    latest = run_dir / EVENTS
    if latest not in logs.logs:
        return  # no current log: the ending check reports a finished run without one
    resumes = _resumed(logs.logs[latest])
    count = int(resumes[1].get("resume", 0)) if resumes else 0
    rotated = {p for p in logs.logs if p != latest}
    expected = {run_dir / rotated_name(k) for k in range(1, count + 1)}
    for path in sorted(rotated - expected):
        report(
            f"{path}: not a log of this run: {latest}"
            + (f":{resumes[0]}" if resumes else "")
            + f" records {count} earlier execution(s)"
            + (f" ({rotated_name(1)} to {rotated_name(count)})" if count else "")
        )
    for k in range(1, count + 2):
        path = latest if k == count + 1 else run_dir / rotated_name(k)
        if path not in logs.logs:
            report(
                f"{path}: missing: the log of execution {k} of {count + 1}, which "
                f"{_vouching(run_dir, k, count)} records"
            )
            continue
        _check_link(logs, heads, path, k, report, note)
    if summary is not None and (summary.get("resumes") or 0) != count:
        report(
            f"{run_dir / SUMMARY}: resumes is {summary.get('resumes')} but {latest}"
            + (f":{resumes[0]}" if resumes else "")
            + f" records {count}"
        )


def _vouching(run_dir: Path, k: int, count: int) -> str:
    later = run_dir / (EVENTS if k == count else rotated_name(k + 1))
    return f"{later} (its {RESUMED} event)"


def _resumed(events: list[Record]) -> Record | None:
    """The first ``resumed`` event of a log: (line, record)."""
    return next(((n, e.get("data") or {}) for n, e in events if e.get("kind") == RESUMED), None)


def _check_link(
    logs: Logs, heads: dict[Path, ChainReport], path: Path, k: int, report: Report, note: Report
) -> None:
    """Execution ``k``'s log at ``path``: its ``resumed`` event names execution ``k - 1``."""
    found = _resumed(logs.logs[path])
    if k == 1:
        if found is not None:
            report(
                f"{path}:{found[0]}: the log of the first execution records resume "
                f"{found[1].get('resume')}: logs were swapped or renamed"
            )
        return
    if found is None:
        report(f"{path}: records no {RESUMED} event, but it is the log of execution {k}")
        return
    line, data = found
    where = f"{path}:{line}"
    previous = logs.run_dir / rotated_name(k - 1)
    if data.get("resume") != k - 1 or data.get("previous_events") != previous.name:
        report(
            f"{where}: records resume {data.get('resume')} after "
            f"{data.get('previous_events')}, but this is the log of execution {k} (after "
            f"{previous.name}): logs were swapped or renamed"
        )
        return
    if "previous_head" not in data:
        note(
            f"{where}: resumed before sopbus chained each log to the one before, so whether "
            f"{previous.name} was cut or replaced is not checked"
        )
        return
    chain = heads.get(previous)
    if chain is None:
        return  # missing: reported by the caller
    head = chain.head.decode() if data["previous_head"] is not None else None
    if head != data["previous_head"] or chain.lines != data.get("previous_lines"):
        report(
            f"{previous}: ends with seal {head} after {chain.lines} lines, but {where} "
            f"records seal {data['previous_head']} after {data.get('previous_lines')} lines: "
            f"the log was cut, replaced or swapped"
        )
