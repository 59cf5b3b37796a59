"""``sopbus sweep-show ID [--json|--csv|--report]``: what a sweep found, per variant.

Runs (ended of planned, skipped, unfinished), verdict pass rate (``n/a`` when the SOP
states no verdict), spend (mean, median, max), tokens, wall time, rounds and end reasons,
from each run's ``summary.json``. ``ID`` is a sweep id (or a unique prefix), ``last``, or a
sweep directory. See :mod:`sopbus.sweep._stats`.
"""

from __future__ import annotations

import argparse

from ._args import path_arg

NAME = "sweep-show"
HELP = "compare a sweep's variants: pass rate, spend, tokens, time, rounds, end reasons"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("sweep", metavar="ID", help="a sweep id, a sweep directory, or 'last'")
    parser.add_argument(
        "--sweeps-dir",
        metavar="DIR",
        type=path_arg,
        default=path_arg("sweeps"),
        help="where sweep directories are (default: sweeps)",
    )
    form = parser.add_mutually_exclusive_group()
    form.add_argument("--json", action="store_true", help="print the rows as JSON")
    form.add_argument("--csv", action="store_true", help="print the rows as CSV")
    form.add_argument(
        "--report",
        action="store_true",
        help="write the sweep's page (spend against pass rate per variant, spend "
        "per run, a link to each run's report, which is written if missing) "
        "to report.html in the sweep directory",
    )


def run(args: argparse.Namespace) -> int:
    import sys

    from sopbus.bus._jsonl import encode_json
    from sopbus.sweep._record import resolve_sweep
    from sopbus.sweep._stats import render, rows_csv, variant_rows

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
        from sopbus.sweep._page import write_sweep_page

        print(write_sweep_page(sdir, record, rows))
    else:
        from sopbus.bus.money._file_account import FileAccount

        spent = FileAccount(sdir.account_path).read().spent if sdir.account_path.is_file() else None
        console().print(render(record, rows, spent))
    return 0
