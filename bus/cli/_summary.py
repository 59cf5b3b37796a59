"""The table ``sopbus run`` prints at the end of a run."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any


def print_summary(summary: dict[str, Any], run_dir: Path) -> None:
    from rich.console import Console
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
        ("spend", f"${spent:.4f} of ${cap:.2f} ({_share(spent, cap)})"),
        ("duration", f"{summary.get('duration_s', 0):.2f} s"),
        ("run directory", str(run_dir)),
    ]
    for key, value in rows:
        if value:
            table.add_row(key, str(value))
    Console().print(table)


def _share(spent: Decimal, cap: Decimal) -> str:
    return f"{spent / cap * 100:.1f}%" if cap else "no cap"
