"""A paid tool call: reserved against the run's budget before it is made, settled at its
price, ledgered as its own line (provider ``tool``), refused with nothing called when the
price does not fit; recorded in calls.jsonl with its ledger line, and answered from the
recording on a resume without calling it again."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from sopbus.bus import Budget, BudgetExhausted, Gateway, LedgerLine, PriceBook, read_jsonl
from sopbus.bus._protocol import ToolCall, ToolOutput, ToolSpec
from sopbus.bus.llm import SimProvider
from sopbus.bus.llm._tape import Tape, read_recording
from sopbus.bus.llm._toolbox import ToolBox
from sopbus.bus.store._store import RunStore


class Search:
    """A tool source whose every call costs $0.002 and is counted."""

    name = "search"
    price_per_call: Decimal | None = Decimal("0.002")

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def specs(self) -> list[ToolSpec]:
        return [ToolSpec(name="find", parameters={"type": "object"})]

    async def call(self, tool: str, arguments: dict[str, Any]) -> ToolOutput:
        self.calls.append(arguments)
        return ToolOutput(text=f"found {arguments['q']}", chars=7)


def toolbox(tmp_path: Path, cap: str, source: Search, tape: Tape | None = None) -> Any:
    store = RunStore.create(tmp_path / "runs", "paid")
    gateway = Gateway(SimProvider(), PriceBook.load(), Budget(Decimal(cap)), sink=store.record_call)
    return ToolBox([source], gateway=gateway, store=store, tape=tape), gateway, store


def call(q: str) -> ToolCall:
    return ToolCall(id=f"c-{q}", name="search.find", arguments=f'{{"q": "{q}"}}')


async def test_paid_calls_are_reserved_ledgered_and_refused_past_the_cap(tmp_path: Path) -> None:
    source = Search()
    box, gateway, store = toolbox(tmp_path, "0.005", source)
    ask = {"offered": ["search.find"], "role": "Ann", "action": "Look", "round": 1}
    assert (await box.call(call("a"), **ask)).text == "found a"
    await box.call(call("b"), **ask)
    with pytest.raises(BudgetExhausted, match=r"search\.find.*0\.002.*budget_usd"):
        await box.call(call("c"), **ask)
    store.close()
    assert [c["q"] for c in source.calls] == ["a", "b"]  # the third was never called
    lines = list(read_jsonl(store.run_dir / "costs.jsonl", LedgerLine))
    assert [(line.provider, line.model, line.outcome) for line in lines] == [
        ("tool", "search.find", "ok"),
        ("tool", "search.find", "ok"),
        ("tool", "search.find", "refused"),
    ]
    assert gateway.budget.spent == Decimal("0.004") <= Decimal("0.005")
    assert gateway.stats().llm_calls == 0  # a tool call is not a model call
    recorded = read_recording(store.run_dir / "calls.jsonl").tools
    assert [r.ledger.seq for r in recorded if r.ledger] == [1, 2]


async def test_a_recorded_paid_call_is_not_made_again(tmp_path: Path) -> None:
    first = Search()
    box, _, store = toolbox(tmp_path / "a", "1", first)
    ask = {"offered": ["search.find"], "role": "Ann", "action": "Look", "round": 1}
    await box.call(call("a"), **ask)
    store.close()
    recording = read_recording(store.run_dir / "calls.jsonl")
    again = Search()
    tape = Tape(recording.calls, match="key", tools=recording.tools)
    box, gateway, store = toolbox(tmp_path / "b", "1", again, tape)
    assert (await box.call(call("a"), **ask)).text == "found a"
    await box.call(call("b"), **ask)  # not in the recording: live
    store.close()
    assert [c["q"] for c in again.calls] == ["b"]
    assert gateway.budget.spent == Decimal("0.002")
