"""An eval's figures as rows (``eval.json``'s ``figures``, ``eval-show --json``) and as the
lines a terminal shows, 80 columns or wider."""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

from sopbus.bus.money import money

from ._figures import front, scenario_figures
from ._outcome import FAILURES, TaskResult
from ._record import EvalRecord

SIMULATED_NOTE = (
    "SIMULATED: the answers came from sopbus's simulator, not a model; these scores measure "
    "nothing but the setup"
)


def eval_rows(record: EvalRecord, results: Sequence[TaskResult]) -> list[dict[str, Any]]:
    """One row of figures per scenario, ``front`` marking those on the score/cost front."""
    rows = []
    for s in record.scenarios:
        mine = [r for r in results if r.scenario == s.label]
        figures = scenario_figures(mine, len(record.task_ids), record.epochs)
        rows.append({"scenario": s.label, **figures})
    best = front(rows)
    for row in rows:
        row["front"] = row["scenario"] in best
    return rows


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def _usd(value: Decimal | None) -> str:
    return "n/a" if value is None else money(value)


def row_lines(row: dict[str, Any]) -> list[str]:
    """A scenario's figures as short lines (each under 80 columns)."""
    mark = " *front*" if row["front"] else ""
    sim = " [SIMULATED]" if row["simulated"] else ""
    lines = [
        f"{row['scenario']}{mark}{sim}",
        f"  pass@1 {_pct(row['pass_at_1'])} (95% CI {_pct(row['pass_at_1_low'])} to "
        f"{_pct(row['pass_at_1_high'])}), covers {row['covered']} of {row['tasks']} tasks",
    ]
    ks = [k for k in row if k.startswith("pass_at_") and k[8:].isdigit() and k != "pass_at_1"]
    if ks:
        lines.append("  " + ", ".join(f"pass@{k[8:]} {_pct(row[k])}" for k in ks))
    tokens = "n/a" if row["tokens_per_task"] is None else f"{row['tokens_per_task']:,.0f}"
    wall = "n/a" if row["wall_s_per_task"] is None else f"{row['wall_s_per_task']:.1f} s"
    lines += [
        f"  {_usd(row['usd'])} in all, {_usd(row['usd_per_task'])} per task, "
        f"{_usd(row['usd_per_solved'])} per solved task",
        f"  {tokens} tokens per task, {wall} per task",
    ]
    failed = [f"{k.replace('_', ' ')} {row['kinds'][k]}" for k in FAILURES if row["kinds"][k]]
    lines.append("  failures: " + (", ".join(failed) if failed else "none"))
    return lines


def table_lines(record: EvalRecord, rows: Sequence[dict[str, Any]]) -> list[str]:
    """The eval as a terminal shows it: a header, each scenario's figures, the notes."""
    lines = [
        f"eval {record.eval_id}",
        # A file's name only: the table reads the same wherever the eval's folder is.
        f"  {Path(record.dataset).name}: {len(record.task_ids)} task(s) x {record.epochs} "
        f"epoch(s), "
        f"cap {money(record.budget_usd)}, state {record.state}",
    ]
    for row in rows:
        lines += row_lines(row)
    if len(rows) > 1:
        lines.append("*front*: no other scenario scores higher for less per task")
    if record.simulated:
        lines.append(SIMULATED_NOTE)
    return lines
