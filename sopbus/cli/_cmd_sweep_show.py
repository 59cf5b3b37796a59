"""``sopbus sweep-show ID [--json|--csv|--report]``: what a sweep found, per variant.

Runs (ended of planned, skipped, unfinished), verdict pass rate (``n/a`` when the SOP
states no verdict), spend (mean, median, max), tokens, wall time, rounds and end reasons,
from each run's ``summary.json``. ``ID`` is a sweep id (or a unique prefix), ``last``, or a
sweep directory. See :mod:`sopbus.sweep._stats`.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ._flags import CSV, JSON, REPORT, SWEEPS_DIR, Flag, add

if TYPE_CHECKING:
    from decimal import Decimal

    from sopbus.sweep import SweepRecord

NAME = "sweep-show"
HELP = "compare a sweep's variants: pass rate, spend, tokens, time, rounds, end reasons"


SWEEP = Flag("sweep", metavar="ID", help="a sweep id, a sweep directory, or 'last'")


def configure(parser: argparse.ArgumentParser) -> None:
    add(parser, SWEEP, SWEEPS_DIR)
    page = REPORT.but(
        help="write the sweep's page (spend against pass rate per variant, spend per run, a "
        "link to each run's report, which is written if missing) to report.html in the sweep "
        "directory"
    )
    add(parser.add_mutually_exclusive_group(), JSON.but(help="print the rows as JSON"), CSV, page)


def run(args: argparse.Namespace) -> int:
    import sys

    from sopbus.bus import encode_json
    from sopbus.sweep import resolve_sweep, rows_csv, variant_rows

    from ._runref import console

    sdir = resolve_sweep(args.sweep, args.sweeps_dir)
    record = sdir.read()
    rows = variant_rows(record)
    if args.json:
        print(
            encode_json(
                {
                    "sweep_id": record.sweep_id,
                    "scenario": record.scenario,
                    "budget_usd": record.budget_usd,
                    "state": record.state,
                    "variants": rows,
                }
            ).decode()
        )
    elif args.csv:
        sys.stdout.write(rows_csv(rows))
    elif args.report:
        from sopbus.sweep import write_sweep_page

        print(write_sweep_page(sdir, record, rows))
    else:
        from sopbus.bus.money import FileAccount

        spent = FileAccount(sdir.account_path).read().spent if sdir.account_path.is_file() else None
        print_variants(console(), record, rows, spent)
    return 0


def print_variants(
    out: Any, record: SweepRecord, rows: list[dict[str, Any]], spent: Decimal | None
) -> None:
    """The sweep's header, then a row per variant: its settings, runs, pass rate and spend
    (whole: the digits are what tells two variants apart), tokens and end reasons; wall
    time and rounds while they fit. Stacked on a terminal too narrow (see ``_fit``)."""
    from rich.text import Text

    from sopbus.bus.money import money

    from ._fit import Field, print_fitted

    spend = f"{money(spent)} of " if spent is not None else ""
    out.print(
        Text(
            f"sweep {record.sweep_id}: {record.scenario}, {len(record.variants)} variant(s) x "
            f"{len(record.seeds)} seed(s), {spend}{money(record.budget_usd)}",
            style="bold",
        )
    )
    reasons = [", ".join(f"{k} x{n}" for k, n in r["end_reasons"].items()) or "-" for r in rows]
    print_fitted(
        out,
        [
            Field("variant", [r["variant"] for r in rows]),
            Field("settings", [r["settings"] for r in rows]),
            Field("runs", [_runs_cell(r) for r in rows]),
            Field("verdict pass", [_pass_cell(r) for r in rows], right=True),
            Field("spend mean / median / max", [_spend_cell(r) for r in rows], right=True),
            Field("tokens", [_num(r["tokens_mean"], 0) for r in rows], right=True),
            Field("wall s", [_num(r["wall_s_mean"], 2) for r in rows], False, True),
            Field("rounds", [_num(r["rounds_mean"], 1) for r in rows], False, True),
            Field("end reasons", reasons),
        ],
        key=2,
    )


def _runs_cell(row: dict[str, Any]) -> str:
    text = f"{row['ended']}/{row['runs']}"
    extra = [f"{row['skipped']} skipped"] if row["skipped"] else []
    extra += [f"{row['unfinished']} unfinished"] if row["unfinished"] else []
    return text + (f" ({', '.join(extra)})" if extra else "")


def _pass_cell(row: dict[str, Any]) -> str:
    if row["pass_rate"] is None:
        return "n/a"
    return f"{row['pass_rate']:.0%} ({row['passed']}/{row['verdicts']})"


def _spend_cell(row: dict[str, Any]) -> str:
    from decimal import Decimal

    from sopbus.bus.money import money

    if row["spend_mean_usd"] is None:
        return "-"
    return " / ".join(
        f"{money(row[k].quantize(Decimal('0.000001')))}"
        for k in ("spend_mean_usd", "spend_median_usd", "spend_max_usd")
    )


def _num(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"
