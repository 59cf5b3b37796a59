"""Reading a run's cost ledger back: totals by role, action and model, repricing, CSV.

Pure functions over :class:`~sopbus.bus.LedgerLine` lists; ``sopbus costs`` and ``sopbus runs``
call them and choose the output (a rich table, JSON, CSV).
"""

from __future__ import annotations

import csv
import io
from collections import Counter
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import msgspec
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from .._protocol import Usage
from .._util import COSTS as COSTS_FILE
from .._util import read_jsonl
from ._format import money, share, usd
from ._ledger import CallColumns, LedgerLine
from ._prices import PriceBook
from ._quote import Price

_GROUPS = (("by_role", "role"), ("by_action", "action"), ("by_model", "model"))


def load_ledger(run_dir: str | Path) -> list[LedgerLine]:
    """The ledger lines of the run in ``run_dir`` (``costs.jsonl``; a torn last line is dropped)."""
    path = Path(run_dir) / COSTS_FILE
    if not path.is_file():
        return []
    return list(read_jsonl(path, LedgerLine))


def cost_report(
    lines: Sequence[LedgerLine],
    *,
    budget: Decimal | None = None,
    run_id: str = "",
    crowds: Sequence[str] = (),
) -> dict[str, Any]:
    """Totals of ``lines``: ``run_id``, ``total_usd``, ``budget_usd`` (``budget``, else the
    ledger's), ``calls`` (attempts sent to a provider; refusals are not calls), ``outcomes``
    (lines per :attr:`~sopbus.bus.LedgerLine.shown_outcome`, in :data:`OUTCOMES` order), and
    ``by_role``, ``by_action``, ``by_model``, each ``{name: {calls, prompt_tokens,
    completion_tokens, cost_usd, outcomes}}``; an action whose lines name a ``subject`` also
    has ``subjects``, the same per subject; ``cache`` (only when a provider reported prompt
    cache use) ``{cached_tokens, cache_write_tokens}``: prompt tokens read from and written
    to the cache, each billed at its own price. Money stays ``Decimal``; :func:`report_json`
    encodes it as strings. ``crowds`` names the run's populations: the calls of their agents
    (``Player-17``) are one ``by_role`` entry per population, with ``agents``, the count of
    its agents that called."""
    if budget is None:
        budget = lines[-1].budget_usd if lines else Decimal(0)
    report: dict[str, Any] = {
        "run_id": run_id,
        "total_usd": sum((line.cost_usd for line in lines), Decimal(0)),
        "budget_usd": budget,
        "calls": _calls(lines),
        "outcomes": _outcomes(lines),
    }
    cache = {
        "cached_tokens": sum(line.cached_tokens for line in lines),
        "cache_write_tokens": sum(line.cache_write_tokens for line in lines),
    }
    if any(cache.values()):
        report["cache"] = cache
    for key, field in _GROUPS:
        report[key] = _group(lines, field)
    if crowds:
        report["by_role"] = _folded(lines, set(crowds))
    for name, entry in report["by_action"].items():
        mine = [line for line in lines if line.action == name and line.subject]
        if mine:
            entry["subjects"] = _group(mine, "subject")
    return report


OUTCOMES = ("ok", "replayed", "refused", "error", "estimated", "lost", "overrun")
"""The outcomes a report counts, in the order it shows them (``estimated``: an ``error``
counted at its reservation)."""


def _calls(lines: Sequence[LedgerLine]) -> int:
    """The attempts sent: a refusal is none, a batch line its calls."""
    return sum(line.calls for line in lines if line.outcome != "refused")


def _outcomes(lines: Sequence[LedgerLine]) -> dict[str, int]:
    counts = Counter(line.shown_outcome for line in lines)
    return {name: counts[name] for name in OUTCOMES if counts[name]}


def _folded(lines: Sequence[LedgerLine], crowds: set[str]) -> dict[str, dict[str, Any]]:
    """``by_role`` with each population's agents as one entry (``agents``: how many)."""
    folded: list[LedgerLine] = []
    agents: dict[str, set[int]] = {}  # each population's agents that called, by index
    for line in lines:
        if line.batch is not None and line.role in crowds:
            agents.setdefault(line.role, set()).update(line.batch.agents)
            folded.append(line)
            continue
        prefix, _, number = line.role.rpartition("-")
        if prefix in crowds and number.isdigit():
            agents.setdefault(prefix, set()).add(int(number))
            line = msgspec.structs.replace(line, role=prefix)
        folded.append(line)
    report = _group(folded, "role")
    for name, seen in agents.items():
        report[name]["agents"] = len(seen)
    return report


def _group(lines: Sequence[LedgerLine], field: str) -> dict[str, dict[str, Any]]:
    members: dict[str, list[LedgerLine]] = {}
    for line in lines:
        members.setdefault(getattr(line, field), []).append(line)
    return {
        name: {
            "calls": _calls(mine),
            "prompt_tokens": sum(line.prompt_tokens for line in mine),
            "completion_tokens": sum(line.completion_tokens for line in mine),
            "cost_usd": sum((line.cost_usd for line in mine), Decimal(0)),
            "outcomes": _outcomes(mine),
        }
        for name, mine in members.items()
    }


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
            else price.cost(
                Usage(
                    line.prompt_tokens,
                    line.completion_tokens,
                    line.cached_tokens,
                    line.cache_write_tokens,
                )
            )
        )
        batch = line.batch
        if batch is not None and not kept:  # each call at its own price (tiers see each)
            batch = _repriced(batch, price)
            cost = sum(batch.cost_usd, Decimal(0))
        total += cost
        out.append(
            msgspec.structs.replace(line, model=model, cost_usd=cost, total_usd=total, batch=batch)
        )
    return out


def _repriced(batch: CallColumns, price: Price) -> CallColumns:
    costs = [price.cost(Usage(p, c)) for p, c in zip(batch.prompt_tokens, batch.completion_tokens)]
    return msgspec.structs.replace(batch, cost_usd=costs)


def render_table(report: dict[str, Any]) -> RenderableType:
    """``report`` as rich tables: by role, by action (each action's subjects indented under
    it), by model; then the total against the budget, and the report's ``stopped`` and
    ``simulated`` notes when it has them (``sopbus costs`` adds them from the summary).
    Numbers never wrap; names and outcomes do, so the tables fit 80 columns."""
    tables: list[RenderableType] = []
    for key, field in _GROUPS:
        table = _table(field)
        for name, entry in _by_cost(report[key]):
            table.add_row(*_row(name or "-", entry))
            for subject, part in entry.get("subjects", {}).items():
                table.add_row(*_row(f"  {subject}", part), style="dim")
        tables.append(table)
    total, budget = report["total_usd"], report["budget_usd"]
    of_cap = f" ({share(total, budget)} of the cap)" if budget > 0 else ""
    tables.append(
        Text(f"total {money(total)} of {money(budget)}{of_cap}, {_counts(report)}", style="bold")
    )
    if report.get("cache"):
        cache = report["cache"]
        tables.append(
            Text(
                f"prompt cache: {cache['cached_tokens']:,} prompt tokens read from it (at the "
                f"cached-input price), {cache['cache_write_tokens']:,} written to it (at the "
                f"cache-write price)"
            )
        )
    if report.get("stopped"):
        tables.append(Text(report["stopped"]))
    if report.get("simulated"):
        prices = ", ".join(sorted(report["by_model"])) or "the model's"
        tables.append(
            Text(
                f"SIMULATED by the sim provider, no model wrote it: every amount is what "
                f"the calls would have cost at {prices} prices",
                style="yellow",
            )
        )
    return Group(*tables)


def _counts(report: dict[str, Any]) -> str:
    """``14 calls (14 ok), 1 refused (not sent)``: the outcomes in brackets add up to the
    calls, since a refused call was never sent and is not one."""
    sent = {name: n for name, n in report["outcomes"].items() if name != "refused"}
    refused = report["outcomes"].get("refused", 0)
    calls = report["calls"]
    text = f"{calls} call{'' if calls == 1 else 's'}"
    text += f" ({outcome_text(sent)})" if sent else ""
    return text + (f", {refused} refused (not sent)" if refused else "")


def outcome_text(outcomes: dict[str, int]) -> str:
    """``{"ok": 2, "refused": 1}`` as ``2 ok, 1 refused``."""
    return ", ".join(f"{n} {name}" for name, n in outcomes.items())


def _table(field: str) -> Table:
    table = Table(title=f"by {field}", title_justify="left")
    table.add_column(field, overflow="fold")
    for column in ("calls", "prompt", "completion", "USD"):
        table.add_column(column, justify="right", no_wrap=True)
    table.add_column("outcomes")
    return table


def _by_cost(groups: dict[str, dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    return sorted(groups.items(), key=lambda item: -item[1]["cost_usd"])


def _row(name: str, entry: dict[str, Any]) -> tuple[str, ...]:
    return (
        name,
        str(entry["calls"]),
        f"{entry['prompt_tokens']:,}",
        f"{entry['completion_tokens']:,}",
        usd(entry["cost_usd"]),
        outcome_text(entry["outcomes"]),
    )


def ledger_csv(lines: Sequence[LedgerLine]) -> str:
    """The ledger as CSV: a header row of the :class:`~sopbus.bus.LedgerLine` field names,
    then one row per line with each value as ``costs.jsonl`` spells it (``true``/``false``,
    exact decimals, numbers as in JSON); an unset field is an empty cell."""
    fields = LedgerLine.__struct_fields__
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(fields)
    for line in lines:
        writer.writerow([_cell(getattr(line, name)) for name in fields])
    return buffer.getvalue()


def _cell(value: object) -> str:
    if value is None:
        return ""
    plain = msgspec.to_builtins(value)  # a Decimal as its exact string
    return plain if isinstance(plain, str) else msgspec.json.encode(plain).decode()
