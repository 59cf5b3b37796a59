"""The table ``sopbus run`` prints at the end of a run."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any


def print_summary(summary: dict[str, Any], run_dir: Path) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    spent, cap = Decimal(str(summary.get("total_usd", 0))), Decimal(str(summary.get("budget_usd", 0)))
    table = Table(title=f"run {summary['run_id']}", show_header=False)
    table.add_column(style="bold")
    table.add_column()
    rows = [
        ("scenario", summary.get("scenario", "")),
        ("status", f"{summary['status']} ({summary['end_reason']})"),
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
    for key, value in rows:
        if value:
            table.add_row(key, escape(str(value)))  # "[run].budget_usd" is text, not markup
    Console().print(table)


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
