"""The sweep's HTML page (``sopbus sweep-show ID --report``): the variant rows and every
run, handed to :func:`sopbus.bus.report.build_sweep_report`; each ended run's own report is
written first where it is missing, so the page's links lead somewhere."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from sopbus.bus import read_summary
from sopbus.bus.report import REPORT_FILE, build_sweep_report, write_report

from ._record import SweepDir, SweepRecord


def write_sweep_page(sdir: SweepDir, record: SweepRecord, variants: list[dict[str, Any]]) -> Path:
    """Writes ``report.html`` in the sweep directory and returns its path."""
    labels = {v.id: f"{v.id} {v.label}".strip() for v in record.variants}
    runs = [
        _run_row(
            sdir.path,
            Path(record.runs_dir) / e.run_id,
            e.run_id,
            labels[e.variant],
            e.seed,
            e.state,
        )
        for e in record.runs
    ]
    facts = {
        "sweep": record.sweep_id,
        "scenario": record.scenario,
        "state": record.state,
        "budget": record.budget_usd,
        "runs": len(record.runs),
        "spent": sum((r["total_usd"] for r in runs if r["total_usd"] is not None), 0.0),
    }
    page = build_sweep_report(
        f"sopbus sweep {record.sweep_id}",
        facts,
        [{**v, "variant": labels[v["variant"]]} for v in variants],
        runs,
    )
    target = sdir.path / REPORT_FILE
    target.write_text(page, encoding="utf-8")
    return target


def _run_row(
    sweep_dir: Path, run_dir: Path, run_id: str, variant: str, seed: int, state: str
) -> dict[str, Any]:
    summary = read_summary(run_dir)
    report = None
    if summary is not None and (run_dir / "events.jsonl").is_file():  # not a remote run's summary
        page = run_dir / REPORT_FILE
        if not page.is_file():
            write_report(run_dir)
        report = os.path.relpath(page, sweep_dir)
    return {
        "run_id": run_id,
        "variant": variant,
        "seed": seed,
        "state": state,
        "total_usd": float(summary.total_usd) if summary else None,
        "verdict": summary.passed if summary else None,
        "provider": summary.provider if summary else "",
        "report": report,
    }
