"""The eval's HTML page (``sopbus eval-show EVAL --report``), drawn by the report's eval
page (:func:`sopbus.bus.report.build_eval_report`): pass@1 per scenario with its 95%
interval, pass@k per scenario when there were epochs, pass@1 against dollars per task with the front marked, failures by kind, and
each task's run as a row linked to its own report (written first where missing). A
simulated eval says so on the page and on every chart."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sopbus.bus.report import REPORT_FILE, build_eval_report, write_report

from ._outcome import TaskResult
from ._record import EvalDir, EvalRecord
from ._table import SIMULATED_NOTE


def write_eval_page(edir: EvalDir, record: EvalRecord, rows: Sequence[dict[str, Any]]) -> Path:
    """Writes ``report.html`` in the eval directory and returns its path."""
    facts = {
        "eval": record.eval_id,
        "dataset": Path(record.dataset).name,
        "tasks": len(record.task_ids),
        "epochs": record.epochs,
        "state": record.state,
        "budget": record.budget_usd,
        "simulated": "yes: these scores measure nothing" if record.simulated else "no",
    }
    tasks = [_task_row(edir, r) for r in edir.results()]
    page = build_eval_report(
        f"sopbus eval {record.eval_id}",
        facts,
        rows,
        tasks,
        simulated=SIMULATED_NOTE if record.simulated else "",
    )
    target = edir.path / REPORT_FILE
    target.write_text(page, encoding="utf-8")
    return target


def _task_row(edir: EvalDir, result: TaskResult) -> dict[str, Any]:
    report = None
    if result.run_id is not None:
        run_dir = edir.runs_dir / result.run_id
        if (run_dir / "events.jsonl").is_file():
            if not (run_dir / REPORT_FILE).is_file():
                write_report(run_dir)
            report = os.path.relpath(run_dir / REPORT_FILE, edir.path)
    return {
        "task": result.task_id,
        "scenario": result.scenario,
        "epoch": result.epoch,
        "outcome": result.kind.replace("_", " "),
        "usd": result.usd,
        "tokens": result.prompt_tokens + result.completion_tokens,
        "seconds": result.wall_s,
        "report": report,
    }
