"""The report of a population run in a real browser: a section per population shows the
sums of ``summary.json`` (woke, acted, mean, min, max per round, the last round's bins), and
a run of more calls than the timeline draws one bar each is drawn as counts per round and
role, says so, and stays small."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from sopbus.bus.report import write_report
from support.chromium import SKIP_REASON, Browser, browser, chromium
from support.cli import sopbus
from support.populations import small_game
from support.report_page import Page, marks, section

pytestmark = pytest.mark.skipif(chromium() is None, reason=SKIP_REASON)


@pytest.fixture(scope="module")
def chrome() -> Iterator[Browser]:
    with browser() as b:
        yield b


def _run(tmp_path: Path, count: int, rounds: int) -> tuple[Path, dict[str, Any]]:
    done = sopbus(
        "run", small_game(tmp_path, count=count, rounds=rounds), "--quiet", "--report", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    summary: dict[str, Any] = msgspec.json.decode((run_dir / "summary.json").read_bytes())
    return run_dir, summary


def _cells(html: str) -> dict[int, dict[str, str]]:
    """The population table's cells: round -> field -> data-value."""
    out: dict[int, dict[str, str]] = {}
    for row in re.finditer(r'<tr data-round="(\d+)">(.*?)</tr>', html):
        cells = re.findall(r'<td data-field="(\w+)" data-value="([^"]*)"', row.group(2))
        out[int(row.group(1))] = dict(cells)
    return out


def _shown(x: Any) -> str:
    return "" if x is None else str(x)


def _assert_section_matches(dom: str, summary: dict[str, Any]) -> None:
    part = section(dom, "populations")
    assert 'data-population="Player"' in part
    rounds = summary["populations"]["Player"]
    cells = _cells(part)
    assert sorted(cells) == [r["round"] for r in rounds]
    for r in rounds:
        for key in ("woke", "acted", "failed", "mean", "min", "max"):
            assert cells[r["round"]][key] == _shown(r[key]), (r["round"], key)
    bins = [int(n) for n in re.findall(r'<td data-bin="\d+" data-value="(\d+)">', part)]
    assert bins == rounds[-1]["bins"]["counts"]
    assert marks(part, "bins", "path") == len(bins)  # one bar a bin, drawn


def test_a_small_population_runs_section_and_its_bars(chrome: Browser, tmp_path: Path) -> None:
    run_dir, summary = _run(tmp_path, count=20, rounds=2)
    loaded = chrome.load(run_dir / "report.html")
    assert loaded.requests == [] and loaded.errors == []
    _assert_section_matches(loaded.dom, summary)
    calls = section(loaded.dom, "calls")
    # Under the threshold every call is its own bar, on the population's one lane.
    assert marks(calls, "call_bars", "path") == summary["llm_calls"] == 40
    assert "calls_aggregated" not in calls
    assert len(Page(loaded.dom).data("calls-data")) == 40
    money = section(loaded.dom, "money")
    assert "Player-0" not in money and "Player" in money  # twenty agents, one role


def test_a_thousand_players_three_rounds_are_counted_not_drawn(
    chrome: Browser, tmp_path: Path
) -> None:
    run_dir, summary = _run(tmp_path, count=1000, rounds=3)
    assert summary["llm_calls"] == 3000
    loaded = chrome.load(run_dir / "report.html")
    assert loaded.requests == [] and loaded.errors == []
    _assert_section_matches(loaded.dom, summary)
    page = Page(loaded.dom)
    assert page.figures["calls_aggregated"] == "1000"
    calls = section(loaded.dom, "calls")
    assert "counts per round and role" in calls
    assert marks(calls, "call_bars", "path") == 0
    counted = re.findall(
        r'<tr data-round="(\d+)" data-lane="([^"]+)" data-outcome="(\w+)" data-value="(\d+)">',
        calls,
    )
    per_round: dict[int, int] = {}
    for r, lane, _, n in counted:
        assert lane == "Player"
        per_round[int(r)] = per_round.get(int(r), 0) + int(n)
    assert per_round == {r["round"]: r["acted"] for r in summary["populations"]["Player"]}
    assert marks(calls, "per_round_child", "path") == len(counted)
    # Bounded: the page carries no bar nor ledger line per ok call, so it stays small.
    assert page.data("calls-data") == []
    assert (run_dir / "report.html").stat().st_size < 1_000_000
    # The report is rebuilt the same from the same run.
    before = (run_dir / "report.html").read_text()
    write_report(run_dir)
    assert (run_dir / "report.html").read_text() == before


def test_a_hostile_population_name_in_the_summary_is_text(tmp_path: Path) -> None:
    # A summary.json edited by hand names a population with markup: the page shows it as
    # text, and no element of it is created.
    from sopbus.bus.report import build_report

    run_dir, summary = _run(tmp_path, count=5, rounds=1)
    hostile = '<img src=x onerror="alert(1)">'
    summary["populations"] = {hostile: summary["populations"]["Player"]}
    summary["populations"][hostile][0]["field"] = "<script>alert(2)</script>"
    (run_dir / "summary.json").write_bytes(msgspec.json.encode(summary))
    page = section(build_report(run_dir), "populations")
    assert "<img" not in page and "<script" not in page
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in page
