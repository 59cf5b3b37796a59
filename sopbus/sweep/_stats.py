"""What a sweep found, per variant: the figures ``sopbus sweep-show`` prints (and lays out).

Each run's numbers come from its ``summary.json`` (so a sweep still going shows the runs
that ended). Per variant: runs ended of the matrix's, runs skipped and unfinished, the
verdict pass rate over the runs whose SOP stated a verdict (``n/a`` when none did), spend
(mean, median, max), tokens, wall time and rounds (means), and the end reasons counted.
Money stays ``Decimal`` and is written as a decimal string in JSON and CSV.
"""

from __future__ import annotations

import csv
import io
import statistics
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

from sopbus.bus import RunSummary, read_summary

from ._record import SweepRecord

COLUMNS = (
    "variant",
    "settings",
    "runs",
    "ended",
    "skipped",
    "unfinished",
    "verdicts",
    "passed",
    "pass_rate",
    "spend_mean_usd",
    "spend_median_usd",
    "spend_max_usd",
    "spend_total_usd",
    "tokens_mean",
    "wall_s_mean",
    "rounds_mean",
    "end_reasons",
)


def variant_rows(record: SweepRecord) -> list[dict[str, Any]]:
    """One row per variant (keys: :data:`COLUMNS`)."""
    summaries: dict[str, list[RunSummary]] = {v.id: [] for v in record.variants}
    for entry in record.runs:
        summary = read_summary(Path(record.runs_dir) / entry.run_id)
        if summary is not None and summary.status != "cancelled":
            summaries[entry.variant].append(summary)
    return [_row(record, v.id, v.label, summaries[v.id]) for v in record.variants]


def _row(record: SweepRecord, vid: str, label: str, done: list[RunSummary]) -> dict[str, Any]:
    entries = [e for e in record.runs if e.variant == vid]
    spend = [s.total_usd for s in done]
    verdicts = [v for s in done if (v := s.passed) is not None]
    passed = sum(verdicts)
    return {
        "variant": vid,
        "settings": label,
        "runs": len(entries),
        "ended": len(done),
        "skipped": sum(e.state == "skipped" for e in entries),
        "unfinished": len(entries) - len(done) - sum(e.state == "skipped" for e in entries),
        "verdicts": len(verdicts),
        "passed": passed,
        "pass_rate": round(passed / len(verdicts), 4) if verdicts else None,
        "spend_mean_usd": _mean(spend),
        "spend_median_usd": statistics.median(spend) if spend else None,
        "spend_max_usd": max(spend) if spend else None,
        "spend_total_usd": sum(spend, Decimal(0)),
        "tokens_mean": _fmean([s.prompt_tokens + s.completion_tokens for s in done]),
        "wall_s_mean": _fmean([s.duration_s for s in done]),
        "rounds_mean": _fmean([s.rounds for s in done]),
        "end_reasons": dict(Counter(s.end_reason for s in done).most_common()),
    }


def _mean(values: list[Decimal]) -> Decimal | None:
    return sum(values, Decimal(0)) / len(values) if values else None


def _fmean(values: list[Any]) -> float | None:
    return round(statistics.fmean(values), 3) if values else None


def rows_csv(rows: list[dict[str, Any]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    for row in rows:
        cells = {**row, "end_reasons": " ".join(f"{k}:{n}" for k, n in row["end_reasons"].items())}
        writer.writerow(["" if cells[c] is None else cells[c] for c in COLUMNS])
    return out.getvalue()
