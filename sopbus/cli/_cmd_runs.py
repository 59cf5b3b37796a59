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
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ._flags import JSON, RUNS_DIR, add
from ._runref import console, run_dirs

if TYPE_CHECKING:
    from ._runrows import RunRow

NAME = "runs"
HELP = "list the runs in a runs directory, newest first"


def configure(parser: argparse.ArgumentParser) -> None:
    add(parser, RUNS_DIR, JSON)


def run(args: argparse.Namespace) -> int:
    import msgspec

    from ._fit import print_listing
    from ._runrows import run_row

    rows = [run_row(d) for d in run_dirs(args.runs_dir)]
    print_listing(
        msgspec.to_builtins(rows),
        as_json=args.json,
        empty=f"no runs in {args.runs_dir}/",
        table=lambda: _print_table(rows, args.runs_dir),
    )
    return 0


# The table's columns: (header, cell of a row, essential). Essential columns are always
# shown; the others join, in this order, while the table still fits the terminal. At 80
# columns the essential ones fit whole (a run id is about 40 characters).
def _columns() -> list[tuple[str, Callable[[RunRow], str], bool]]:
    from decimal import Decimal

    from sopbus.bus.money import money

    return [
        ("run", lambda r: r.run_id, True),
        ("status", lambda r: r.status, True),
        ("verdict", _verdict_cell, True),
        ("spend", lambda r: f"{money(Decimal(r.total_usd))}", True),
        ("llm", lambda r: "sim" if r.simulated else r.provider or "?", True),
        ("ended by", lambda r: r.end_reason, False),
        ("calls", lambda r: str(r.calls), False),
        ("budget", lambda r: f"{money(Decimal(r.budget_usd))}", False),
        ("started", lambda r: r.started, False),
        ("scenario", lambda r: r.scenario, False),
    ]


def _verdict_cell(row: RunRow) -> str:
    if row.verdict is None:
        return "-"
    return "passed" if row.verdict.passed else "FAILED"


_RIGHT = ("spend", "calls", "budget")


def _print_table(rows: list[RunRow], runs_dir: Path) -> None:
    from rich.text import Text

    from ._fit import Field, print_fitted
    from ._runrows import KILLED

    styles = {"FAILED": "bold red", "passed": "green", "sim": "yellow", KILLED: "yellow"}

    out = console()
    out.print(Text(f"runs in {runs_dir}/", style="bold"))
    fields = [
        Field(header, [cell(row) for row in rows], essential, header in _RIGHT)
        for header, cell, essential in _columns()
    ]
    print_fitted(out, fields, styles)
    if any(row.simulated for row in rows):
        out.print(Text("llm sim: simulated output (the sim provider), not a model's", style="dim"))
