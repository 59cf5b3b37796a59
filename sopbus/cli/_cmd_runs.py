"""``sopbus runs [--runs-dir DIR] [--json]``: the runs in a directory, newest first.

Each row comes from the run's ``summary.json``. A run without one was killed (or is still
going): it is listed as ``killed?`` / ``unfinished`` with what its ``events.jsonl`` and
``costs.jsonl`` say so far, since the run store flushes every line as it happens.

The table shows what matters first and whole: the run id, its status, its verdict, its
spend and whether its output was simulated (``llm sim``); the end reason, calls, budget,
start time and scenario join while the terminal is wide enough. On a terminal too narrow
for a run id beside the rest, each run takes two lines.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sopbus.bus import EVENTS

from ._runref import add_runs_dir, console, first_event, run_dirs, started_at

if TYPE_CHECKING:
    from sopbus.bus import RunSummary

NAME = "runs"
HELP = "list the runs in a runs directory, newest first"

KILLED, UNFINISHED = "killed?", "unfinished"


def configure(parser: argparse.ArgumentParser) -> None:
    add_runs_dir(parser)
    parser.add_argument("--json", action="store_true", help="print a JSON array instead of a table")


def run(args: argparse.Namespace) -> int:
    rows = [run_row(d) for d in run_dirs(args.runs_dir)]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print(f"no runs in {args.runs_dir}/")
        return 0
    _print_table(rows, args.runs_dir)
    return 0


def run_row(run_dir: Path) -> dict[str, Any]:
    """One run as ``runs`` lists it; money as decimal strings (``"0.00012"``)."""
    from sopbus.bus import read_summary

    summary = read_summary(run_dir)
    row = _from_summary(summary) if summary is not None else _from_logs(run_dir)
    started = started_at(run_dir)
    row.update(
        run_id=run_dir.name,
        started_at=started,
        started=time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started)),
        run_dir=str(run_dir),
    )
    return row


def _from_summary(summary: RunSummary) -> dict[str, Any]:
    import msgspec

    return {
        "scenario": summary.scenario,
        "status": summary.status,
        "end_reason": summary.end_reason,
        "rounds": summary.rounds,
        "verdict": msgspec.to_builtins(summary.verdict),
        "provider": summary.provider,
        "simulated": summary.simulated,
        "total_usd": str(summary.total_usd),
        "budget_usd": str(summary.budget_usd),
        "calls": summary.llm_calls,
    }


def _from_logs(run_dir: Path) -> dict[str, Any]:
    """What a killed run's logs say: its scenario and budget from the first event, its
    spend and calls from the ledger, its last round from the event log."""
    from sopbus.bus.money import load_ledger

    first = first_event(run_dir) or {}
    ledger = load_ledger(run_dir)
    budget = first.get("settings", {}).get("budget_usd") or (
        ledger[-1].budget_usd if ledger else "0"
    )
    provider = first.get("settings", {}).get("provider", "")
    return {
        "scenario": first.get("scenario", ""),
        "status": KILLED,
        "end_reason": UNFINISHED,
        "rounds": _last_round(run_dir),
        "verdict": None,
        "provider": provider,
        "simulated": provider == "sim",
        "total_usd": str(ledger[-1].total_usd) if ledger else "0",
        "budget_usd": str(budget),
        "calls": sum(1 for line in ledger if line.outcome != "refused"),
    }


def _last_round(run_dir: Path) -> int:
    from sopbus.bus import read_jsonl

    last = 0
    for event in read_jsonl(run_dir / EVENTS, dict):
        if event.get("kind") in ("round_started", "round_ended"):  # round_started may be left out
            last = max(last, event["round"])
    return last


# The table's columns: (header, cell of a row, essential). Essential columns are always
# shown; the others join, in this order, while the table still fits the terminal. At 80
# columns the essential ones fit whole (a run id is about 40 characters).
def _columns() -> list[tuple[str, Callable[[dict[str, Any]], str], bool]]:
    from decimal import Decimal

    from sopbus.bus.money import money

    return [
        ("run", lambda r: r["run_id"], True),
        ("status", lambda r: r["status"], True),
        ("verdict", _verdict_cell, True),
        ("spend", lambda r: f"{money(Decimal(r['total_usd']))}", True),
        ("llm", lambda r: "sim" if r.get("simulated") else str(r.get("provider") or "?"), True),
        ("ended by", lambda r: r["end_reason"], False),
        ("calls", lambda r: str(r["calls"]), False),
        ("budget", lambda r: f"{money(Decimal(r['budget_usd']))}", False),
        ("started", lambda r: r["started"], False),
        ("scenario", lambda r: r["scenario"], False),
    ]


def _verdict_cell(row: dict[str, Any]) -> str:
    verdict = row.get("verdict")
    if not isinstance(verdict, dict):
        return "-"
    return "passed" if verdict.get("passed") else "FAILED"


_STYLES = {"FAILED": "bold red", "passed": "green", "sim": "yellow", KILLED: "yellow"}
_RIGHT = ("spend", "calls", "budget")


def _print_table(rows: list[dict[str, Any]], runs_dir: Path) -> None:
    from rich.text import Text

    from ._fit import Field, print_fitted

    out = console()
    out.print(Text(f"runs in {runs_dir}/", style="bold"))
    fields = [
        Field(header, [cell(row) for row in rows], essential, header in _RIGHT)
        for header, cell, essential in _columns()
    ]
    print_fitted(out, fields, _STYLES)
    if any(row.get("simulated") for row in rows):
        out.print(Text("llm sim: simulated output (the sim provider), not a model's", style="dim"))
