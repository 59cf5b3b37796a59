"""The tool calls in the money section: what each tool cost beside what the model calls
cost, and how often it was called, failed and how long it took. Costs come from the
ledger (a paid tool's lines, provider ``tool``), so they are the ledger's decimals; the
counts, times and errors from the ``tool_called`` events, which free tools have too.
"""

from __future__ import annotations

from decimal import Decimal
from html import escape

from ..money import money
from ._data import TOOL_PROVIDER, RunData


def tool_spend_html(data: RunData) -> str:
    """The split of the spend (model calls, tools) and a table by tool; empty without tools."""
    if not data.tools and not any(c.line.provider == TOOL_PROVIDER for c in data.calls):
        return ""
    paid: dict[str, Decimal] = {}
    for call in data.calls:
        if call.line.provider == TOOL_PROVIDER:
            paid[call.line.model] = paid.get(call.line.model, Decimal(0)) + call.line.cost_usd
    tools = sum(paid.values(), Decimal(0))
    models = sum((c.line.cost_usd for c in data.llm_calls), Decimal(0))
    rows = "".join(_row(name, data, paid.get(name, Decimal(0))) for name in _names(data, paid))
    return (
        f'<p class=note data-figure="tool_usd" data-value="{tools}">spent on model calls '
        f"{money(models)}, on tool calls {money(tools)}</p>"
        f'<table class="costs" data-group="tool"><caption>by tool</caption><tr><th>tool</th>'
        f"<th>calls</th><th>errors</th><th>time</th><th>result</th><th>cost</th></tr>{rows}</table>"
    )


def _names(data: RunData, paid: dict[str, Decimal]) -> list[str]:
    """The tools by cost, then by how often they were called."""
    counted: dict[str, int] = {}
    for mark in data.tools:
        counted[mark.name] = counted.get(mark.name, 0) + 1
    return sorted({*counted, *paid}, key=lambda n: (-paid.get(n, 0), -counted.get(n, 0), n))


def _row(name: str, data: RunData, cost: Decimal) -> str:
    mine = [t for t in data.tools if t.name == name]
    errors = sum(bool(t.data.get("error")) for t in mine)
    seconds = sum(float(t.data.get("duration_ms") or 0) for t in mine) / 1000
    chars = sum(int(t.data.get("result_chars") or 0) for t in mine)
    return (
        f'<tr data-tool="{escape(name)}"><td>{escape(name)}</td><td>{len(mine)}</td>'
        f"<td>{errors}</td><td>{seconds:.3f} s</td><td>{chars:,} chars</td>"
        f'<td data-value="{cost}">{money(cost)}</td></tr>'
    )
