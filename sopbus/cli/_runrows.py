"""The rows of ``sopbus runs``: one typed :class:`RunRow` per run directory, from its
``summary.json``, or for a run without one (killed, or still going) from its logs."""

from __future__ import annotations

import time
from pathlib import Path

import msgspec

from sopbus.bus import EVENTS, RunSummary, Verdict, read_summary

from ._runref import first_event, started_at

KILLED, UNFINISHED = "killed?", "unfinished"


class RunRow(msgspec.Struct, kw_only=True):
    """One run as ``runs`` lists it (``--json`` prints these, in this order); money as
    decimal strings (``"0.00012"``)."""

    scenario: str
    status: str
    end_reason: str
    rounds: int
    verdict: Verdict | None
    provider: str
    simulated: bool
    total_usd: str
    budget_usd: str
    calls: int
    run_id: str = ""
    started_at: float = 0.0
    started: str = ""
    run_dir: str = ""


def run_row(run_dir: Path) -> RunRow:
    """One run as ``runs`` lists it: from its summary, or from its logs when it has none."""

    summary = read_summary(run_dir)
    row = _from_summary(summary) if summary is not None else _from_logs(run_dir)
    started = started_at(run_dir)
    row.run_id = run_dir.name
    row.started_at = started
    row.started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started))
    row.run_dir = str(run_dir)
    return row


def _from_summary(summary: RunSummary) -> RunRow:
    return RunRow(
        scenario=summary.scenario,
        status=summary.status,
        end_reason=summary.end_reason,
        rounds=summary.rounds,
        verdict=summary.verdict,
        provider=summary.provider,
        simulated=summary.simulated,
        total_usd=str(summary.total_usd),
        budget_usd=str(summary.budget_usd),
        calls=summary.llm_calls,
    )


def _from_logs(run_dir: Path) -> RunRow:
    """What a killed run's logs say: its scenario and budget from the first event, its
    spend and calls from the ledger, its last round from the event log."""
    from sopbus.bus.money import load_ledger

    first = first_event(run_dir) or {}
    ledger = load_ledger(run_dir)
    budget = first.get("settings", {}).get("budget_usd") or (
        ledger[-1].budget_usd if ledger else "0"
    )
    provider = first.get("settings", {}).get("provider", "")
    return RunRow(
        scenario=first.get("scenario", ""),
        status=KILLED,
        end_reason=UNFINISHED,
        rounds=_last_round(run_dir),
        verdict=None,
        provider=provider,
        simulated=provider == "sim",
        total_usd=str(ledger[-1].total_usd) if ledger else "0",
        budget_usd=str(budget),
        calls=sum(1 for line in ledger if line.outcome != "refused"),
    )


def _last_round(run_dir: Path) -> int:
    from sopbus.bus import read_jsonl

    last = 0
    for event in read_jsonl(run_dir / EVENTS, dict):
        if event.get("kind") in ("round_started", "round_ended"):  # round_started may be left out
            last = max(last, event["round"])
    return last
