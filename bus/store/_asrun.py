"""A run's record is this directory's, and whole: part of ``sopbus verify``.

A chain proves a file's lines follow each other, not whose run they are, so a record copied
in from another run of the same scenario verifies line by line. Every event log opens with
``run_started``, which names its run (the run directory's name, whatever execution wrote
it) and what it ran; ``scenario.toml`` is written from the same scenario just after it.
So: each log's ``run_id`` must be the directory's, ``scenario.toml`` must be the file its
``run_started`` hashed (``scenario_sha256``; older runs have their settings compared
instead), and a finished run, one whose log holds ``run_ended``, must still have the
files every run writes before it ends: a missing ``summary.json`` or ``scenario.toml``
is not an unfinished run, it is a record with a part taken away.
"""

from __future__ import annotations

import hashlib
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import msgspec

from .._util import CALLS, COSTS, EVENTS, SCENARIO, SUMMARY
from ._crosscheck import Logs, Report

RUN_STARTED = "run_started"
SCENARIO_HASH = "scenario_sha256"


def check_record(logs: Logs, report: Report, note: Report) -> bool:
    """The run's event logs, ``summary.json`` and ``scenario.toml`` against the directory
    and each other (module docstring); whether ``scenario.toml`` is the one the run wrote."""
    run_dir = logs.run_dir
    if run_dir / EVENTS not in logs.logs:
        _without_log(run_dir, report)
        return False
    summary = _summary(run_dir)
    if summary.get("run_id", run_dir.name) != run_dir.name:
        report(
            f"{run_dir / SUMMARY}: names run {_show(summary.get('run_id'))}, not "
            f"{run_dir.name} (the directory): the summary was copied from another run"
        )
    if logs.finished and not (run_dir / SUMMARY).is_file():
        report(
            f"{run_dir / SUMMARY}: missing, but {run_dir / EVENTS} holds run_ended: the run "
            f"finished, so its summary was removed (a resume killed before it rotated the "
            f"log leaves this too; `sopbus resume` completes it)"
        )
    started = _started(logs.logs[run_dir / EVENTS])
    # The engine run on its own (run_team with a RunStore) logs no run_started and has no
    # scenario; a run sopbus assembled says what it ran in its scenario.toml and summary.
    assembled = (run_dir / SCENARIO).is_file() or any(
        summary.get(k) for k in ("scenario", "provider", "model")
    )
    if started is None and not assembled:
        return True
    for path, events in logs.logs.items():
        _check_run_id(run_dir, path, events, report)
    problems: list[str] = []
    _check_scenario(run_dir, started, logs.finished, problems.append, note)
    for problem in problems:
        report(problem)
    return not problems


def _without_log(run_dir: Path, report: Report) -> None:
    """No ``events.jsonl``: a run killed before its first line has nothing else either."""
    others = [n for n in (COSTS, CALLS, SUMMARY, SCENARIO) if (run_dir / n).is_file()]
    others += [p.name for p in run_dir.glob("events.*.jsonl")]
    if others:
        report(
            f"{run_dir / EVENTS}: missing, but the run wrote {', '.join(sorted(others))}: "
            f"the log was removed"
        )


def _summary(run_dir: Path) -> dict[str, Any]:
    try:
        data = msgspec.json.decode((run_dir / SUMMARY).read_bytes())
    except (OSError, msgspec.DecodeError):
        return {}  # absent or damaged: the summary check says which
    return data if isinstance(data, dict) else {}


def _started(events: list[tuple[int, dict[str, Any]]]) -> dict[str, Any] | None:
    return next((e for _, e in events if e.get("kind") == RUN_STARTED), None)


def _check_run_id(
    run_dir: Path, path: Path, events: list[tuple[int, dict[str, Any]]], report: Report
) -> None:
    found = next(((n, e) for n, e in events if e.get("kind") == RUN_STARTED), None)
    if found is None:
        if events:
            report(f"{path}:1: the log does not start with run_started")
        return
    number, started = found
    if started.get("run_id") != run_dir.name:
        report(
            f"{path}:{number}: run_started names run {_show(started.get('run_id'))}, not "
            f"{run_dir.name} (the directory): the record was copied from another run"
        )


def _check_scenario(
    run_dir: Path, started: dict[str, Any] | None, finished: bool, report: Report, note: Report
) -> None:
    path = run_dir / SCENARIO
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        if finished:  # written right after run_started, long before run_ended
            report(f"{path}: missing, but the run finished: the scenario it ran was removed")
        return
    except OSError as error:
        report(f"{path}: cannot be read ({error.strerror})")
        return
    settings = (started or {}).get("settings") or {}
    digest = settings.get(SCENARIO_HASH)
    if digest is not None:
        if hashlib.sha256(data).hexdigest() != digest:
            report(
                f"{path}: changed since the run wrote it (run_started in {run_dir / EVENTS} "
                f"records SHA-256 {str(digest)[:12]})"
            )
        return
    _check_settings(path, data, started, report, note)


def _check_settings(
    path: Path, data: bytes, started: dict[str, Any] | None, report: Report, note: Report
) -> None:
    """A run from before ``run_started`` hashed its scenario: what the log records of it."""
    try:
        doc = msgspec.toml.decode(data)
    except msgspec.DecodeError as error:
        report(f"{path}: not TOML ({error}), so it is not the scenario the run wrote")
        return
    if started is None:
        return
    settings = started.get("settings") or {}
    tables = {k: v if isinstance(v, dict) else {} for k, v in doc.items()}
    scenario, run, llm = (tables.get(t, {}) for t in ("scenario", "run", "llm"))
    pairs = {
        "scenario.name": (scenario.get("name"), started.get("scenario")),
        "scenario.sop": (scenario.get("sop"), settings.get("sop", scenario.get("sop"))),
        "run.budget_usd": (_money(run.get("budget_usd")), _money(settings.get("budget_usd"))),
        "run.seed": (run.get("seed"), started.get("seed")),
        "run.mode": (run.get("mode"), started.get("mode")),
        "run.max_rounds": (run.get("max_rounds"), started.get("max_rounds")),
        "llm.provider": (llm.get("provider"), settings.get("provider")),
        "llm.model": (llm.get("model"), settings.get("model")),
    }
    for key, (have, want) in pairs.items():
        if have != want:
            report(f"{path}: {key} is {_show(have)} but run_started says {_show(want)}")
            return
    note(
        f"{path}: the run was made before sopbus hashed its scenario in run_started, so only "
        f"its name, SOP, budget, seed, mode, round limit, provider and model are checked"
    )


def _money(value: Any) -> Decimal | None:
    try:
        return Decimal(str(value)) if value is not None else None
    except InvalidOperation:
        return None


def _show(value: Any) -> str:
    return f'"{value}"' if isinstance(value, str) else msgspec.json.encode(value).decode()
