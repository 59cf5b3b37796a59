"""The eval's HTML page (``sopbus eval-show EVAL --report``), drawn by the report's sweep
page (:func:`sopbus.bus.report.build_sweep_report`): each scenario a point of pass@1
against dollars per task, each task's run a row linked to its own report (written first
where missing). A simulated eval carries the report's SIMULATED mark."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sopbus.bus.report import REPORT_FILE, build_sweep_report, write_report

from ._outcome import TaskResult
from ._record import EvalDir, EvalRecord


def write_eval_page(edir: EvalDir, record: EvalRecord, rows: Sequence[dict[str, Any]]) -> Path:
    """Writes ``report.html`` in the eval directory and returns its path."""
    variants = [
        {
            "variant": ("* " if r["front"] else "") + r["scenario"],
            "runs": r["runs"],
            "ended": r["covered"],
            "skipped": r["kinds"]["not_run"] + r["kinds"]["refused"],
            "pass_rate": r["pass_at_1"],
            "spend_mean_usd": r["usd_per_task"],
            "tokens_mean": r["tokens_per_task"],
            "wall_s_mean": r["wall_s_per_task"],
        }
        for r in rows
    ]
    labels = {r["scenario"]: v["variant"] for r, v in zip(rows, variants, strict=True)}
    runs = [_run_row(edir, r, labels[r.scenario]) for r in edir.results()]
    facts = {
        "eval": record.eval_id,
        "dataset": record.dataset,
        "tasks": len(record.task_ids),
        "epochs": record.epochs,
        "state": record.state,
        "budget": record.budget_usd,
        "simulated": "yes: these scores measure nothing" if record.simulated else "no",
    }
    page = build_sweep_report(f"sopbus eval {record.eval_id}", facts, variants, runs)
    target = edir.path / REPORT_FILE
    target.write_text(page, encoding="utf-8")
    return target


def _run_row(edir: EvalDir, result: TaskResult, label: str) -> dict[str, Any]:
    report = None
    if result.run_id is not None:
        run_dir = edir.runs_dir / result.run_id
        if (run_dir / "events.jsonl").is_file():
            if not (run_dir / REPORT_FILE).is_file():
                write_report(run_dir)
            report = os.path.relpath(run_dir / REPORT_FILE, edir.path)
    return {
        "run_id": result.run_id or f"{result.task_id} (not run)",
        "variant": label,
        "seed": result.epoch,
        "state": f"{result.task_id}: {result.kind.replace('_', ' ')}",
        "total_usd": float(result.usd),
        "verdict": result.passed if result.scored else None,
        "provider": "sim" if result.simulated else "",
        "report": report,
    }
