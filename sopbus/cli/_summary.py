"""The table ``sopbus run`` prints at the end of a run, and the words ``show`` ends with."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sopbus.bus.money import money, share

if TYPE_CHECKING:
    from sopbus.bus import RunSummary, Verdict


def print_summary(summary: RunSummary, run_dir: Path) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    spent, cap = summary.total_usd, summary.budget_usd
    table = Table(title=f"run {summary.run_id}", show_header=False)
    table.add_column(style="bold")
    table.add_column()
    rows = [
        ("scenario", summary.scenario),
        ("status", status_text(summary)),
        ("verdict", verdict_text(summary.verdict)),
        ("output", output_text(summary)),
        ("detail", summary.error or summary.detail),
        ("rounds", f"{summary.rounds} of {summary.max_rounds}"),
        ("messages", f"{summary.messages} ({summary.undelivered} undelivered)"),
        ("LLM calls", str(summary.llm_calls)),
        ("tokens", f"{summary.prompt_tokens} prompt, {summary.completion_tokens} completion"),
        ("spend", f"{money(spent)} of {money(cap)} ({share(spent, cap)} of the cap)"),
        ("overrun", _overrun(summary.overrun)),
        ("duration", f"{summary.duration_s:.2f} s"),
        ("run directory", str(run_dir)),
    ]
    styles = {
        "verdict": _verdict_style(summary.verdict),
        "output": "yellow" if summary.simulated else "",
    }
    for key, value in rows:
        if value:
            # Text, not markup: "[run].budget_usd" must print as written.
            table.add_row(key, Text(str(value), style=styles.get(key, "")))
    Console().print(table)


def status_text(summary: RunSummary) -> str:
    """``completed (idle)``: the status and why it ended, the why only when it says more
    (a budget-exhausted run's reason is its status)."""
    reason = summary.end_reason
    return f"{summary.status} ({reason})" if reason and reason != summary.status else summary.status


def verdict_text(verdict: Verdict | None) -> str:
    """``passed: <reason>``, ``FAILED: <reason>``, or "" when the SOP states no verdict."""
    if verdict is None:
        return ""
    return f"{'passed' if verdict.passed else 'FAILED'}: {verdict.reason}"


def output_text(summary: RunSummary) -> str:
    """Who wrote the run's answers; the simulator's are flagged so nobody takes them for a
    model's work."""
    if summary.simulated:
        return f"SIMULATED by the sim provider, no model wrote it ({summary.model} prices)"
    return f"{summary.provider} {summary.model}" if summary.provider else ""


def _verdict_style(verdict: Verdict | None) -> str:
    if verdict is None:
        return ""
    return "green" if verdict.passed else "bold red"


def _overrun(overrun: dict[str, Any] | None) -> str:
    """The provider's overrun in one line, or ``""`` when there was none."""
    if overrun is None:
        return ""
    cost = money(Decimal(str(overrun.get("cost_usd", 0))))
    return (
        f"{overrun.get('provider')} billed {cost} for {overrun.get('role')}'s "
        f"{overrun.get('action')} in round {overrun.get('round')}: {overrun.get('reason')}"
    )
