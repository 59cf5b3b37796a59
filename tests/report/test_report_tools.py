"""Tool calls in the report: a run with two real ``mcp-server-time`` calls (one an error
result, both paid) draws each as its own mark on the calls timeline, with a legend entry,
a tooltip and a panel, and its spend in the money section beside the model calls'."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from sopbus.bus import read_events, read_jsonl
from sopbus.bus.report import build_report, write_report
from support.chromium import SKIP_REASON, Browser, browser, chromium
from support.report_page import Page, marks, section
from support.tool_runs import PRICE, tool_run


@pytest.fixture(scope="module")
def chrome() -> Iterator[Browser]:
    if chromium() is None:
        pytest.skip(SKIP_REASON)
    with browser() as b:
        yield b


def _tool_events(run_dir: Path) -> list[dict[str, Any]]:
    return [e for e in read_events(run_dir / "events.jsonl") if e["kind"] == "tool_called"]


async def test_tool_calls_are_their_own_marks_and_their_spend_is_broken_out(
    tmp_path: Path,
) -> None:
    run_dir = await tool_run(tmp_path)
    html = build_report(run_dir)
    page = Page(html)
    called = _tool_events(run_dir)
    assert len(called) == 2
    rows = page.data("tools-data")
    assert [(r["name"], r["arguments"], r["error"]) for r in rows] == [
        (f"{e['data']['server']}.{e['data']['tool']}", e["data"]["arguments"], e["data"]["error"])
        for e in called
    ]
    assert sum(r["error"] is not None for r in rows) == 1  # Mars has no time zone
    calls = section(html, "calls")
    ledger = list(read_jsonl(run_dir / "costs.jsonl"))
    model_lines = [line for line in ledger if line["provider"] != "tool"]
    assert marks(calls, "tool_marks", "path") == 2 and marks(calls, "tool_bars", "path") == 2
    assert marks(calls, "call_bars", "path") == len(model_lines) == 2  # a tool line is no bar
    assert html.count('href="#tool-1"') == 2 and 'data-figure="tool_calls" data-value="2"' in calls
    # The money section: the tools' spend from the ledger, beside the model calls'.
    paid = sum(Decimal(line["cost_usd"]) for line in ledger if line["provider"] == "tool")
    assert paid == 2 * Decimal(PRICE)
    assert page.costs["tool"] == {"time.get_current_time": paid}
    assert Decimal(page.figures["tool_usd"]) == paid
    assert page.costs["model"]["time.get_current_time"] == paid


async def test_a_tool_mark_shows_its_call_on_hover_and_click(
    chrome: Browser, tmp_path: Path
) -> None:
    run_dir = await tool_run(tmp_path)
    loaded = chrome.load(write_report(run_dir))
    assert loaded.requests == [] and loaded.errors == []
    legend = chrome.evaluate(
        '[...document.querySelectorAll("#calls .role-legend-label text")].map(t => t.textContent)'
    )
    assert "tool" in legend and "tool error" in legend
    # Drawn in the tool colours, distinct from the model calls' bars.
    fills = chrome.evaluate(
        """[...document.querySelectorAll("#calls .tool_marks_marks path")]
             .map(p => getComputedStyle(p).fill)"""
    )
    bars = chrome.evaluate(
        """[...document.querySelectorAll("#calls .call_bars_marks path")]
             .map(p => getComputedStyle(p).fill)"""
    )
    assert len(fills) == 2 and len(set(fills)) == 2 and not set(fills) & set(bars)
    errored = next(r for r in Page(loaded.dom).data("tools-data") if r["error"])
    n = errored["n"]
    tip = chrome.evaluate(
        f"""(() => {{ const a = [...document.querySelectorAll("#calls a")]
               .find(a => (a.getAttribute("href") || a.getAttribute("xlink:href")) === "#tool-{n}");
             const r = a.getBoundingClientRect();
             a.firstElementChild.dispatchEvent(new MouseEvent("mouseover",
               {{bubbles: true, clientX: r.left, clientY: r.top}}));
             return true; }})()"""
    )
    shown = _settle(
        chrome,
        f'document.getElementById("tip").dataset.shown === "{n}" && !document.getElementById("tip").hidden'
        ' && document.getElementById("tip").textContent',
    )
    assert tip and isinstance(shown, str)
    assert "time.get_current_time" in shown and "Mars/Olympus_Mons" in shown
    assert f"duration: {errored['duration_ms']} ms" in shown
    assert f"result: {errored['result_chars']} characters" in shown
    assert "error: none" not in shown and f"cost: ${PRICE}" in shown
    chrome.evaluate(f'location.hash = "#tool-{n}"')
    panel = _settle(
        chrome,
        f'document.getElementById("detail").dataset.shown === "tool-{n}"'
        ' && document.getElementById("detail-body").textContent',
    )
    assert isinstance(panel, str) and f"tool call {n} (Clock, TellTime): error" in panel
    assert errored["call"] in panel


def _settle(b: Browser, expression: str, timeout: float = 20.0) -> object:
    import time

    deadline = time.monotonic() + timeout
    while True:
        value = b.evaluate(expression)
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.05)
