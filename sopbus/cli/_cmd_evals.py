"""``sopbus evals [--evals-dir DIR] [--json]``: the evals in a directory, newest first."""

from __future__ import annotations

import argparse
import time
from typing import Any

from ._flags import EVALS_DIR, JSON, add

NAME = "evals"
HELP = "list the evals in an evals directory, newest first"


def configure(parser: argparse.ArgumentParser) -> None:
    add(parser, EVALS_DIR, JSON)


def run(args: argparse.Namespace) -> int:
    from sopbus.eval import eval_dirs

    from ._fit import print_listing

    rows = [eval_row(d) for d in eval_dirs(args.evals_dir)]
    print_listing(
        rows,
        as_json=args.json,
        empty=f"no evals in {args.evals_dir}/",
        table=lambda: _print_table(rows, str(args.evals_dir)),
    )
    return 0


def eval_row(edir: Any) -> dict[str, Any]:
    """One eval as ``evals`` lists it; money as decimal strings."""
    from sopbus.bus.money import FileAccount

    record = edir.read()
    spent = FileAccount(edir.account_path).read().spent if edir.account_path.is_file() else 0
    cells = len(record.scenarios) * len(record.task_ids) * record.epochs
    return {
        "eval_id": record.eval_id,
        "scenarios": [s.label for s in record.scenarios],
        "dataset": record.dataset,
        "runs": cells,
        "ended": len(edir.results()),
        "spent_usd": str(spent),
        "budget_usd": str(record.budget_usd),
        "state": record.state,
        "simulated": record.simulated,
        "started": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(record.created_at)),
        "eval_dir": str(edir.path),
    }


def _print_table(rows: list[dict[str, Any]], where: str) -> None:
    from decimal import Decimal

    from rich.text import Text

    from sopbus.bus.money import money

    from ._fit import Field, print_fitted
    from ._runref import console

    def spend(row: dict[str, Any]) -> str:
        return f"{money(Decimal(row['spent_usd']))} / {money(Decimal(row['budget_usd']))}"

    out = console()
    out.print(Text(f"evals in {where}/", style="bold"))
    print_fitted(
        out,
        [
            Field("eval", [r["eval_id"] for r in rows]),
            Field("ended", [f"{r['ended']}/{r['runs']}" for r in rows]),
            Field("spend / budget", [spend(r) for r in rows], right=True),
            Field("state", [r["state"] + (" (simulated)" if r["simulated"] else "") for r in rows]),
            Field("scenarios", [", ".join(r["scenarios"]) for r in rows], False),
            Field("started", [r["started"] for r in rows], False),
        ],
        {"budget_exhausted": "yellow", "interrupted": "yellow", "running": "yellow"},
    )
