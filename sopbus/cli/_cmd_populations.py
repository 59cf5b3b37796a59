"""``sopbus populations RUN [--csv]``: a run's populations, round by round.

One row per population and round: how many agents woke, acted and failed, and the mean,
least, greatest and distribution (ten bins) of the numeric field the population sums
(``summary.json``'s ``populations``). ``--csv`` prints the same rows for a spreadsheet.
"""

from __future__ import annotations

import argparse
import csv
import io
from typing import Any

from ._flags import CSV, RUN_FLAGS, add
from ._runref import resolve_run

NAME = "populations"
HELP = "a run's populations round by round: agents acted, mean and distribution (table or CSV)"

COLUMNS = ("population", "round", "field", "woke", "acted", "failed", "mean", "min", "max")


def configure(parser: argparse.ArgumentParser) -> None:
    add(parser, *RUN_FLAGS, CSV.but(help="print the rows as CSV"))


def run(args: argparse.Namespace) -> int:
    from sopbus.bus import ConfigError, read_summary

    run_dir = resolve_run(args.run, args.runs_dir)
    summary = read_summary(run_dir)
    if summary is None or not summary.populations:
        raise ConfigError(
            f"{run_dir}: the run has no population sums (no [[populations]], or it has no "
            f"summary.json yet: `sopbus resume` finishes it)"
        )
    if args.csv:
        print(population_csv(summary.populations), end="")
    else:
        print_populations(summary.populations)
    return 0


def rows(populations: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """One flat row per population and round, the bins as ``bin_0`` ... ``bin_9``."""
    out = []
    for name, rounds in populations.items():
        for r in rounds:
            row = {"population": name, **{k: r.get(k) for k in COLUMNS[1:]}}
            bins = (r.get("bins") or {}).get("counts", [])
            row.update({f"bin_{j}": n for j, n in enumerate(bins)})
            out.append(row)
    return out


def population_csv(populations: dict[str, list[dict[str, Any]]]) -> str:
    table = rows(populations)
    buffer = io.StringIO()
    fields = list(COLUMNS) + sorted(
        {k for r in table for k in r if k.startswith("bin_")}, key=lambda k: int(k[4:])
    )
    writer = csv.DictWriter(buffer, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    writer.writerows(table)
    return buffer.getvalue()


def print_populations(populations: dict[str, list[dict[str, Any]]]) -> None:
    """The rows as a table, the distribution drawn as a bar of ten bins."""
    from rich.console import Console
    from rich.table import Table

    fields = sorted({r.get("field") or "" for rs in populations.values() for r in rs} - {""})
    of = f" (mean, least..most, spread of {', '.join(fields)})" if fields else ""
    table = Table(title=f"populations, round by round{of}")
    for column in ("population", "round", "woke", "acted", "failed", "mean", "min..max", "spread"):
        table.add_column(column, justify="left" if column in ("population", "spread") else "right")
    for r in rows(populations):
        bins = [r.get(f"bin_{j}", 0) or 0 for j in range(10)]
        spread = _bars(bins)
        span = f"{_n(r['min'])}..{_n(r['max'])}" if r.get("min") is not None else "-"
        mean = "-" if r.get("mean") is None else f"{r['mean']:.2f}"
        table.add_row(
            r["population"],
            str(r["round"]),
            f"{r['woke']:,}",
            f"{r['acted']:,}",
            f"{r['failed']:,}",
            mean,
            span,
            spread,
        )
    Console(soft_wrap=True).print(table)


def _n(x: float) -> str:
    return str(int(x)) if x == int(x) else f"{x:g}"


_BARS = " ▁▂▃▄▅▆▇█"


def _bars(bins: list[int]) -> str:
    top = max(bins) or 1
    return "".join(_BARS[round(n / top * (len(_BARS) - 1))] for n in bins)
