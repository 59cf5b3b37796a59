"""``sopbus runs [--runs-dir DIR] [--json]``: the runs in a directory, newest first.

Each row comes from the run's ``summary.json``. A run without one was killed (or is still
going): it is listed as ``killed?`` / ``unfinished`` with what its ``events.jsonl`` and
``costs.jsonl`` say so far, since the run store flushes every line as it happens.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from .._layout import EVENTS
from ._runref import add_runs_dir, console, first_event, read_summary, run_dirs, started_at

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
    summary = read_summary(run_dir)
    row = _from_summary(summary) if summary is not None else _from_logs(run_dir)
    started = started_at(run_dir)
    row.update(run_id=run_dir.name, started_at=started,
               started=time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started)),
               run_dir=str(run_dir))
    return row


def _from_summary(summary: dict[str, Any]) -> dict[str, Any]:
    return {"scenario": summary.get("scenario", ""), "status": summary.get("status", "?"),
            "end_reason": summary.get("end_reason", "?"), "rounds": summary.get("rounds"),
            "total_usd": str(summary.get("total_usd", "0")),
            "budget_usd": str(summary.get("budget_usd", "0")),
            "calls": summary.get("llm_calls", 0)}


def _from_logs(run_dir: Path) -> dict[str, Any]:
    """What a killed run's logs say: its scenario and budget from the first event, its
    spend and calls from the ledger, its last round from the event log."""
    from bus.money._costs import load_ledger

    first = first_event(run_dir) or {}
    ledger = load_ledger(run_dir)
    budget = first.get("settings", {}).get("budget_usd") or (ledger[-1].budget_usd if ledger else "0")
    return {"scenario": first.get("scenario", ""), "status": KILLED, "end_reason": UNFINISHED,
            "rounds": _last_round(run_dir),
            "total_usd": str(ledger[-1].total_usd) if ledger else "0", "budget_usd": str(budget),
            "calls": sum(1 for line in ledger if line.outcome != "refused")}


def _last_round(run_dir: Path) -> int:
    from bus import read_jsonl

    last = 0
    for event in read_jsonl(run_dir / EVENTS, dict):
        if event.get("kind") in ("round_started", "round_ended"):  # round_started may be left out
            last = max(last, event["round"])
    return last


def _print_table(rows: list[dict[str, Any]], runs_dir: Path) -> None:
    from decimal import Decimal

    from rich.markup import escape
    from rich.table import Table

    from bus.money._budget import usd

    table = Table(title=escape(f"runs in {runs_dir}/"), title_justify="left")
    for column in ("run", "scenario", "status", "end reason", "spend / budget", "calls", "started"):
        table.add_column(column, justify="right" if column in ("spend / budget", "calls") else "left",
                         no_wrap=column == "run")
    for row in rows:
        spend = f"${usd(Decimal(row['total_usd']))} / ${usd(Decimal(row['budget_usd']))}"
        status = escape(row["status"]) if row["status"] != KILLED else f"[yellow]{escape(KILLED)}[/]"
        table.add_row(escape(row["run_id"]), escape(row["scenario"]), status, row["end_reason"], spend,
                      str(row["calls"]), row["started"])
    console().print(table)
