"""Reading a run's cost ledger back: totals by role, action and model, repricing, CSV.

Pure functions over :class:`~sopbus.bus.LedgerLine` lists; ``sopbus costs`` and ``sopbus runs``
call them and choose the output (a rich table, JSON, CSV).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import msgspec
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from .._jsonl import read_jsonl
from .._layout import COSTS as COSTS_FILE
from .._protocol import Usage
from ._format import money, share, usd
from ._ledger import LedgerLine
from ._prices import PriceBook

_GROUPS = (("by_role", "role"), ("by_action", "action"), ("by_model", "model"))


def load_ledger(run_dir: str | Path) -> list[LedgerLine]:
    """The ledger lines of the run in ``run_dir`` (``costs.jsonl``; a torn last line is dropped)."""
    path = Path(run_dir) / COSTS_FILE
    if not path.is_file():
        return []
    return list(read_jsonl(path, LedgerLine))


def cost_report(
    lines: Sequence[LedgerLine], *, budget: Decimal | None = None, run_id: str = ""
) -> dict[str, Any]:
    """Totals of ``lines``: ``run_id``, ``total_usd``, ``budget_usd`` (``budget``, else the
    ledger's), ``calls`` (attempts sent to a provider; refusals are not calls), ``outcomes``
    (lines per outcome), and ``by_role``, ``by_action``, ``by_model``, each
    ``{name: {calls, prompt_tokens, completion_tokens, cost_usd}}``. Money stays ``Decimal``;
    :func:`report_json` encodes it as strings."""
    if budget is None:
        budget = lines[-1].budget_usd if lines else Decimal(0)
    report: dict[str, Any] = {
        "run_id": run_id,
        "total_usd": sum((line.cost_usd for line in lines), Decimal(0)),
        "budget_usd": budget,
        "calls": sum(1 for line in lines if line.outcome != "refused"),
        "outcomes": {},
    }
    for line in lines:
        report["outcomes"][line.outcome] = report["outcomes"].get(line.outcome, 0) + 1
    for key, field in _GROUPS:
        report[key] = _group(lines, field)
    return report


def _group(lines: Sequence[LedgerLine], field: str) -> dict[str, dict[str, Any]]:
    groups: dict[str, dict[str, Any]] = {}
    for line in lines:
        entry = groups.setdefault(
            getattr(line, field),
            {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": Decimal(0)},
        )
        entry["calls"] += line.outcome != "refused"
        entry["prompt_tokens"] += line.prompt_tokens
        entry["completion_tokens"] += line.completion_tokens
        entry["cost_usd"] += line.cost_usd
    return groups


def report_json(report: dict[str, Any]) -> bytes:
    """``report`` as JSON, money as decimal strings."""
    return msgspec.json.encode(report)


def reprice(lines: Sequence[LedgerLine], model: str, prices: PriceBook) -> list[LedgerLine]:
    """What the same calls would have cost on ``model``: the same tokens at ``model``'s price,
    with ``model`` and the running ``total_usd`` rewritten. Replayed and refused lines stay
    at $0 (they cost nothing either way), and lines counted at their reservation (``lost``,
    ``estimated``) at that amount, so repricing on the run's own model changes nothing.
    An unknown ``model`` is a :class:`~sopbus.bus.ConfigError`."""
    price = prices.price(model)
    total = Decimal(0)
    out = []
    for line in lines:
        # An estimated or lost line was counted at its reservation, not from tokens: kept.
        kept = line.outcome in ("replayed", "refused", "lost") or line.estimated
        cost = (
            line.cost_usd
            if kept
            else price.cost(Usage(line.prompt_tokens, line.completion_tokens, line.cached_tokens))
        )
        total += cost
        out.append(msgspec.structs.replace(line, model=model, cost_usd=cost, total_usd=total))
    return out


def render_table(report: dict[str, Any]) -> RenderableType:
    """``report`` as rich tables: by role, by action, by model, and the total against the budget."""
    tables: list[RenderableType] = []
    for key, field in _GROUPS:
        table = Table(title=f"by {field}", title_justify="left")
        table.add_column(field)
        for column in ("calls", "prompt tokens", "completion tokens", "cost (USD)"):
            table.add_column(column, justify="right")
        for name, entry in sorted(report[key].items(), key=lambda item: -item[1]["cost_usd"]):
            table.add_row(
                name or "-",
                str(entry["calls"]),
                f"{entry['prompt_tokens']:,}",
                f"{entry['completion_tokens']:,}",
                usd(entry["cost_usd"]),
            )
        tables.append(table)
    total, budget = report["total_usd"], report["budget_usd"]
    of_cap = f" ({share(total, budget)} of the cap)" if budget > 0 else ""
    tables.append(
        Text(
            f"total {money(total)} of {money(budget)}{of_cap}, {report['calls']} calls",
            style="bold",
        )
    )
    return Group(*tables)


def ledger_csv(lines: Sequence[LedgerLine]) -> str:
    """The ledger as CSV with a header row of the :class:`~sopbus.bus.LedgerLine` field names."""
    fields = LedgerLine.__struct_fields__
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(fields)
    for line in lines:
        writer.writerow([getattr(line, name) for name in fields])
    return buffer.getvalue()
