"""``sopbus populations RUN [--csv | --parquet FILE]``: a run's populations, round by round.

One row per population and round: how many agents woke, acted and failed, and the mean,
least, greatest and distribution (ten bins) of the numeric field the population sums
(``summary.json``'s ``populations``); for a population on a follower graph, the choices
(ignored, liked, reposted) and the agents reached and adopting so far (the adoption
curve). ``--csv`` prints the same rows for a spreadsheet, ``--parquet FILE`` writes them
as a Parquet table.
"""

from __future__ import annotations

import argparse
import csv
import io
from pathlib import Path
from typing import Any

from ._flags import CSV, PARQUET, RUN_FLAGS, add
from ._runref import resolve_run

NAME = "populations"
HELP = "a run's populations round by round: agents acted, mean and distribution (table or CSV)"

COLUMNS = ("population", "round", "field", "woke", "acted", "failed", "mean", "min", "max")
SPREAD_COLUMNS = ("ignored", "liked", "reposted", "reached", "adopters", "adoption")
"""The columns of a population on a follower graph (its rounds have no mean)."""


def configure(parser: argparse.ArgumentParser) -> None:
    add(parser, *RUN_FLAGS, CSV.but(help="print the rows as CSV"), PARQUET)


def run(args: argparse.Namespace) -> int:
    from sopbus.bus import ConfigError, read_summary

    run_dir = resolve_run(args.run, args.runs_dir)
    summary = read_summary(run_dir)
    if summary is None or not summary.populations:
        raise ConfigError(
            f"{run_dir}: the run has no population sums (no [[populations]], or it has no "
            f"summary.json yet: `sopbus resume` finishes it)"
        )
    if args.parquet is not None:
        count = write_parquet(summary.populations, args.parquet)
        print(f"wrote {count} rows ({len(summary.populations)} populations) to {args.parquet}")
    elif args.csv:
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
            if "adopters" in r:
                row.update({k: r.get(k) for k in SPREAD_COLUMNS})
            bins = (r.get("bins") or {}).get("counts", [])
            row.update({f"bin_{j}": n for j, n in enumerate(bins)})
            out.append(row)
    return out


def _fields(table: list[dict[str, Any]]) -> list[str]:
    spread = [k for k in SPREAD_COLUMNS if any(k in r for r in table)]
    bins = sorted({k for r in table for k in r if k.startswith("bin_")}, key=lambda k: int(k[4:]))
    return [*COLUMNS, *spread, *bins]


def population_csv(populations: dict[str, list[dict[str, Any]]]) -> str:
    table = rows(populations)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=_fields(table), lineterminator="\n", restval="")
    writer.writeheader()
    writer.writerows(table)
    return buffer.getvalue()


def write_parquet(populations: dict[str, list[dict[str, Any]]], path: Path) -> int:
    """The CSV's rows and columns as a Parquet table at ``path`` (a missing value is null);
    the number of rows. Written beside and moved into place, so a failed write leaves an
    existing file as it was."""
    from sopbus.bus import ConfigError
    from sopbus.bus.population import PARQUET_EXTRA

    try:
        import pyarrow as pa  # type: ignore[import-not-found,unused-ignore]
        import pyarrow.parquet as pq  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        raise ConfigError(
            f"--parquet {path}: writing Parquet needs pyarrow; install it with pip install "
            f"'sopbus[{PARQUET_EXTRA}]', or use --csv"
        ) from None
    table = rows(populations)
    fields = _fields(table)
    columns = {k: [r.get(k) for r in table] for k in fields}
    part = path.with_name(f".{path.name}.part")
    try:
        pq.write_table(pa.table(columns), part)
        part.replace(path)
    except OSError as exc:
        part.unlink(missing_ok=True)
        raise ConfigError(
            f"--parquet {path}: cannot write it ({exc.strerror}); pick a writable path"
        ) from None
    return len(table)


def print_populations(populations: dict[str, list[dict[str, Any]]]) -> None:
    """The rows as a table, the distribution drawn as a bar of ten bins; a population on
    a follower graph as a table of its spread."""
    spreads = {n: rs for n, rs in populations.items() if any("adopters" in r for r in rs)}
    if spreads:
        _print_spreads(spreads)
    populations = {n: rs for n, rs in populations.items() if n not in spreads}
    if not populations:
        return
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


def _print_spreads(populations: dict[str, list[dict[str, Any]]]) -> None:
    from rich import box
    from rich.console import Console
    from rich.table import Table

    # A light box and no "woke" column (it is in the CSV): the table fits 80 columns.
    table = Table(
        title="populations on a follower graph, round by round",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    heads = ("population", "round", "acted", "ignored", "liked", "reposted", "reached")
    for column in (*heads, "adopted", "share"):
        table.add_column(
            column, justify="left" if column == "population" else "right", min_width=len(column)
        )
    for r in rows(populations):
        acted = f"{r.get('acted') or 0:,}" + (
            f" ({r['failed']:,} failed)" if r.get("failed") else ""
        )
        counts = [f"{r.get(k) or 0:,}" for k in (*heads[3:], "adopters")]
        share = f"{r.get('adoption') or 0.0:.1%}"
        table.add_row(r["population"], str(r["round"]), acted, *counts, share)
    Console(soft_wrap=True).print(table)
    print("reached: agents the post has reached so far; adopted: liked or reposted it so far")


def _n(x: float) -> str:
    return str(int(x)) if x == int(x) else f"{x:g}"


_BARS = " ▁▂▃▄▅▆▇█"


def _bars(bins: list[int]) -> str:
    top = max(bins) or 1
    return "".join(_BARS[round(n / top * (len(_BARS) - 1))] for n in bins)
