"""``sopbus sweeps [--sweeps-dir DIR] [--json]``: the sweeps in a directory, newest first.

Each row comes from the sweep's ``sweep.json`` and its shared account: the matrix, how
many runs ended, were skipped or are left, spend against the sweep's budget, and its state.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from ._flags import JSON, SWEEPS_DIR, add

NAME = "sweeps"
HELP = "list the sweeps in a sweeps directory, newest first"


def configure(parser: argparse.ArgumentParser) -> None:
    add(parser, SWEEPS_DIR, JSON)


def run(args: argparse.Namespace) -> int:
    from sopbus.sweep import sweep_dirs

    from ._fit import print_listing

    rows = [sweep_row(d) for d in sweep_dirs(args.sweeps_dir)]
    empty = f"no sweeps in {args.sweeps_dir}/"
    print_listing(
        rows, as_json=args.json, empty=empty, table=lambda: _print_table(rows, str(args.sweeps_dir))
    )
    return 0


def sweep_row(sdir: Any) -> dict[str, Any]:
    """One sweep as ``sweeps`` lists it; money as decimal strings."""
    from sopbus.bus.money import FileAccount

    record = sdir.read()
    spent = FileAccount(sdir.account_path).read().spent if sdir.account_path.is_file() else 0
    count = {
        state: sum(e.state == state for e in record.runs)
        for state in ("done", "skipped", "crashed")
    }
    return {
        "sweep_id": record.sweep_id,
        "scenario": record.scenario,
        "variants": len(record.variants),
        "seeds": len(record.seeds),
        "runs": len(record.runs),
        "ended": count["done"],
        "skipped": count["skipped"],
        "crashed": count["crashed"],
        "spent_usd": str(spent),
        "budget_usd": str(record.budget_usd),
        "state": record.state,
        "resumes": record.resumes,
        "started": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(record.created_at)),
        "sweep_dir": str(sdir.path),
    }


def _print_table(rows: list[dict[str, Any]], where: str) -> None:
    """The id, its runs, spend and state always (whole); matrix, scenario and start time
    while they fit; a sweep a line, or stacked on a narrow terminal (see ``_fit``)."""
    from decimal import Decimal

    from rich.text import Text

    from sopbus.bus.money import money

    from ._fit import Field, print_fitted
    from ._runref import console

    def ended(row: dict[str, Any]) -> str:
        skipped = f" ({row['skipped']} skipped)" if row["skipped"] else ""
        return f"{row['ended']}/{row['runs']}{skipped}"

    def spend(row: dict[str, Any]) -> str:
        return f"{money(Decimal(row['spent_usd']))} / {money(Decimal(row['budget_usd']))}"

    out = console()
    out.print(Text(f"sweeps in {where}/", style="bold"))
    print_fitted(
        out,
        [
            Field("sweep", [r["sweep_id"] for r in rows]),
            Field("ended", [ended(r) for r in rows]),
            Field("spend / budget", [spend(r) for r in rows], right=True),
            Field("state", [r["state"] for r in rows]),
            Field("matrix", [f"{r['variants']} x {r['seeds']} seeds" for r in rows], False),
            Field("scenario", [r["scenario"] for r in rows], False),
            Field("started", [r["started"] for r in rows], False),
        ],
        {"budget_exhausted": "yellow", "interrupted": "yellow", "running": "yellow"},
    )
