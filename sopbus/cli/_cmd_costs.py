"""``sopbus costs RUN [--json | --csv] [--reprice MODEL]``: what a run spent, from its ledger.

The table groups the ledger (``costs.jsonl``) by role, by action (and under each action
the files, headings or samples its calls were for) and by model, with each group's
outcomes, the total against the run's budget, why the run stopped spending (its
``summary.json``), and a SIMULATED mark for a run on the sim provider. ``--json`` prints
the same report (money as decimal strings); ``--csv`` prints the ledger itself, one row per
line, with JSON's spelling of values. ``--reprice MODEL`` prices
the same tokens at ``MODEL``'s price (the packaged price book plus the run's own
``[prices]``), for "what would this have cost on gpt-4o?".
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._flags import CSV, JSON, RUN_FLAGS, Flag, add
from ._runref import console, first_event, resolve_run

if TYPE_CHECKING:
    from decimal import Decimal

    from sopbus.bus import LedgerLine, RunSummary

NAME = "costs"
HELP = "what a run spent: by role, action and model against its budget (table, JSON or CSV)"

# The keys of `--json`, in order; `--reprice` adds REPRICE_KEYS.
JSON_KEYS = (
    "run_id",
    "simulated",
    "status",
    "end_reason",
    "stopped",
    "total_usd",
    "budget_usd",
    "calls",
    "outcomes",
    "by_role",
    "by_action",
    "by_model",
)
REPRICE_KEYS = ("repriced_to", "actual_total_usd")


REPRICE = Flag("--reprice", metavar="MODEL", help="what the same calls would have cost on MODEL")


def configure(parser: argparse.ArgumentParser) -> None:
    add(parser, *RUN_FLAGS)
    add(
        parser.add_mutually_exclusive_group(),
        JSON.but(help="print the report as JSON"),
        CSV.but(help="print the ledger as CSV"),
    )
    add(parser, REPRICE)


def run(args: argparse.Namespace) -> int:
    from sopbus.bus import load_ledger

    run_dir = resolve_run(args.run, args.runs_dir)
    actual = load_ledger(run_dir)
    lines = actual if args.reprice is None else repriced(actual, args.reprice, run_dir)
    if args.csv:
        from sopbus.bus import ledger_csv

        print(ledger_csv(lines), end="")
        return 0
    report = report_for(run_dir, lines)
    if args.reprice is not None:
        report.update(repriced_to=args.reprice, actual_total_usd=_total(actual))
    if args.json:
        from sopbus.bus import report_json

        keys = JSON_KEYS + (REPRICE_KEYS if args.reprice is not None else ())
        keys += ("cache",) if "cache" in report else ()  # only for a run that used a cache
        print(report_json({key: report[key] for key in keys}).decode())
        return 0
    _print_report(report, run_dir, actual)
    return 0


def report_for(run_dir: Path, lines: list[LedgerLine]) -> dict[str, Any]:
    """The cost report of ``lines`` against the run's budget (the summary's, else the
    ledger's, else the one the run started with), with what the summary says of the run:
    ``simulated``, ``status`` and ``end_reason`` (``None`` while it has no summary) and the
    ``stopped`` sentence."""
    from sopbus.bus import cost_report, read_summary

    summary = read_summary(run_dir)
    report = cost_report(
        lines,
        budget=_budget(run_dir, summary, lines),
        run_id=summary.run_id if summary is not None else run_dir.name,
        crowds=tuple((summary.populations or {}) if summary is not None else ()),
    )
    report.update(
        simulated=summary.simulated if summary else any(ln.provider == "sim" for ln in lines),
        status=summary.status if summary else None,
        end_reason=summary.end_reason if summary else None,
        stopped=stopped(summary, lines, run_dir.name),
    )
    return report


def stopped(summary: RunSummary | None, lines: list[LedgerLine], run: str) -> str:
    """Why the run stopped spending, in one line: how it ended and, when the budget ended
    it, the call it refused (or the overrun that closed it) with that call's worst case."""
    from sopbus.bus.money import money

    if summary is None:
        return (
            f"run not ended: no summary.json yet (still running, or killed: "
            f"`sopbus resume {run}` finishes it)"
        )
    ended = summary.status
    if summary.end_reason != summary.status:
        ended += f" ({summary.end_reason})"
    last = {line.outcome: line for line in lines}
    if summary.end_reason == "budget_exhausted" and "overrun" in last:
        line = last["overrun"]
        return (
            f"run ended {ended}: {line.role} {line.what} came back with usage that cannot be "
            f"true ({line.error}), counted at {money(line.cost_usd)}; no call was made after it"
        )
    if summary.end_reason == "budget_exhausted" and "refused" in last:
        line = last["refused"]
        worst = f" {money(line.reserved_usd)}" if line.reserved_usd is not None else ""
        return (
            f"run ended {ended}: {line.role} {line.what} was refused, not sent: its worst "
            f"case{worst} did not fit the budget ({money(line.total_usd)} of "
            f"{money(line.budget_usd)} spent)"
        )
    why = summary.error or summary.detail
    return f"run ended {ended}" + (f": {why}" if why else "")


def _budget(run_dir: Path, summary: RunSummary | None, lines: list[LedgerLine]) -> Decimal:
    from decimal import Decimal

    if summary is not None:
        return summary.budget_usd
    if lines:
        return lines[-1].budget_usd
    started = (first_event(run_dir) or {}).get("settings", {})
    return Decimal(str(started.get("budget_usd", "0")))


def repriced(lines: list[LedgerLine], model: str, run_dir: Path) -> list[LedgerLine]:
    """``lines`` priced on ``model``; an unpriced model is a ConfigError naming the fix."""
    from sopbus.bus import ConfigError, PriceBook, reprice

    try:
        return reprice(lines, model, PriceBook.load(run_prices(run_dir)))
    except ConfigError as exc:
        raise ConfigError(
            f"--reprice: {exc} (the run's prices are in {run_dir / 'scenario.toml'})"
        ) from None


def run_prices(run_dir: Path) -> dict[str, Any]:
    """The ``[prices]`` table of the scenario as run (``scenario.toml`` in the run dir).
    Read as plain TOML, not loaded as a scenario: files it names may have moved since."""
    import tomllib

    path = run_dir / "scenario.toml"
    if not path.is_file():
        return {}
    prices = tomllib.loads(path.read_text(encoding="utf-8")).get("prices", {})
    return prices if isinstance(prices, dict) else {}


def _total(lines: list[LedgerLine]) -> Decimal:
    from decimal import Decimal

    return sum((line.cost_usd for line in lines), Decimal(0))


def _print_report(report: dict[str, Any], run_dir: Path, actual: list[LedgerLine]) -> None:
    from rich.markup import escape

    from sopbus.bus import render_table
    from sopbus.bus.money import money

    out = console()
    out.print(
        f"[bold]costs of run {escape(report['run_id'])}[/] ({escape(str(run_dir))})",
        highlight=False,
    )
    if "repriced_to" in report:
        models = ", ".join(sorted({line.model for line in actual})) or "-"
        out.print(
            f"repriced on {report['repriced_to']}: the same tokens would have cost "
            f"{money(report['total_usd'])} (actual {money(report['actual_total_usd'])} on {models})",
            highlight=False,
            markup=False,
        )
    out.print(render_table(report))
