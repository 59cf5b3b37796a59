"""The table ``sopbus run`` prints at the end of a run."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any


def print_summary(summary: dict[str, Any], run_dir: Path) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    spent, cap = Decimal(str(summary.get("total_usd", 0))), Decimal(str(summary.get("budget_usd", 0)))
    table = Table(title=f"run {summary['run_id']}", show_header=False)
    table.add_column(style="bold")
    table.add_column()
    rows = [
        ("scenario", summary.get("scenario", "")),
        ("status", f"{summary['status']} ({summary['end_reason']})"),
        ("verdict", verdict_text(summary.get("verdict"))),
        ("output", output_text(summary)),
        ("detail", summary.get("error") or summary.get("detail") or ""),
        ("rounds", f"{summary['rounds']} of {summary['max_rounds']}"),
        ("messages", f"{summary['messages']} ({summary['undelivered']} undelivered)"),
        ("LLM calls", str(summary.get("llm_calls", 0))),
        ("tokens", f"{summary.get('prompt_tokens', 0)} prompt, {summary.get('completion_tokens', 0)} completion"),
        ("spend", f"{money(spent)} of {money(cap)} ({_share(spent, cap)})"),
        ("overrun", _overrun(summary.get("overrun"))),
        ("duration", f"{summary.get('duration_s', 0):.2f} s"),
        ("run directory", str(run_dir)),
    ]
    styles = {"verdict": _verdict_style(summary.get("verdict")),
              "output": "yellow" if is_simulated(summary) else ""}
    for key, value in rows:
        if value:
            # Text, not markup: "[run].budget_usd" must print as written.
            table.add_row(key, Text(str(value), style=styles.get(key, "")))
    Console().print(table)


def verdict_text(verdict: Any) -> str:
    """``passed: <reason>``, ``FAILED: <reason>``, or "" when the SOP states no verdict."""
    if not isinstance(verdict, dict):
        return ""
    return f"{'passed' if verdict.get('passed') else 'FAILED'}: {verdict.get('reason', '')}"


def is_simulated(summary: dict[str, Any]) -> bool:
    """Whether the run's answers came from the simulator (not a model)."""
    return summary.get("provider") == "sim"


def output_text(summary: dict[str, Any]) -> str:
    """Who wrote the run's answers; the simulator's are flagged so nobody takes them for a
    model's work."""
    if is_simulated(summary):
        return f"SIMULATED by the sim provider, no model wrote it ({summary.get('model')} prices)"
    provider, model = summary.get("provider"), summary.get("model")
    return f"{provider} {model}" if provider else ""


def _verdict_style(verdict: Any) -> str:
    if not isinstance(verdict, dict):
        return ""
    return "green" if verdict.get("passed") else "bold red"


def money(amount: Decimal) -> str:
    """Dollars to the cent, or to four significant digits below a cent (a sim run costs
    fractions of a cent, and "$0.00" would hide it)."""
    if amount == 0 or abs(amount) >= Decimal("0.01"):
        return f"${amount:.2f}" if abs(amount) >= 1 or amount == 0 else f"${amount:.4f}"
    return f"${amount:.4g}" if "e" not in f"{amount:.4g}" else f"${amount:.8f}".rstrip("0")


def _share(spent: Decimal, cap: Decimal) -> str:
    return f"{spent / cap * 100:.1f}%" if cap else "no cap"


def _overrun(overrun: Any) -> str:
    """The provider's overrun in one line, or ``""`` when there was none."""
    if not isinstance(overrun, dict):
        return ""
    cost = money(Decimal(str(overrun.get("cost_usd", 0))))
    return (f"{overrun.get('provider')} billed {cost} for {overrun.get('role')}'s "
            f"{overrun.get('action')} in round {overrun.get('round')}: {overrun.get('reason')}")
