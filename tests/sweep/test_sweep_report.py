"""The sweep's page (`sopbus sweep-show ID --report`): spend against pass rate per variant,
the spend of each run, and links to every run's report; checked against `sweep-show --json`
and opened in headless chromium (no request, no error, every link's report exists)."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pytest

from support.chromium import SKIP_REASON, Browser, browser, chromium
from support.cli import sopbus
from support.report_page import marks, section

pytestmark = pytest.mark.slow


def _sopbus(*args: Any) -> subprocess.CompletedProcess[str]:
    return sopbus(*args, timeout=600)


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("sweep")
    done = _sopbus(
        "sweep",
        "scenarios/software_company.toml",
        "--seeds",
        1,
        "--set",
        "llm.model=gpt-4o-mini,gpt-4o",
        "--set",
        "sop.review=true,false",  # four variants, two pairs of close spends
        "--jobs",
        2,
        "--runs-dir",
        tmp / "runs",
        "--sweeps-dir",
        tmp / "sweeps",
    )
    assert done.returncode == 0, done.stderr
    shown = _sopbus("sweep-show", "last", "--sweeps-dir", tmp / "sweeps", "--json")
    page = _sopbus("sweep-show", "last", "--sweeps-dir", tmp / "sweeps", "--report")
    assert page.returncode == 0, page.stderr
    return Path(page.stdout.strip()), json.loads(shown.stdout)


def test_the_page_shows_each_variant_as_sweep_show_counts_it(
    swept: tuple[Path, dict[str, Any]],
) -> None:
    path, shown = swept
    html = path.read_text()
    assert marks(section(html, "tradeoff"), "layer_0", "path") == len(shown["variants"])
    rows = section(html, "variants").split("<tr>")[2:]  # after the heading row
    assert len(rows) == len(shown["variants"])
    for row, variant in zip(rows, shown["variants"]):
        for col in ("pass_rate", "spend_mean_usd", "spend_max_usd", "runs", "ended"):
            cell = re.search(rf'<td data-col="{col}" data-value="([^"]*)">', row)
            assert cell is not None and float(cell.group(1)) == pytest.approx(
                float(variant[col]), rel=1e-3
            )


def test_every_run_links_to_its_own_report(swept: tuple[Path, dict[str, Any]]) -> None:
    path, _ = swept
    runs = section(path.read_text(), "runs")
    links = [part.split('"')[0] for part in runs.split('class="run-report" href="')[1:]]
    assert len(links) == 4
    for link in links:
        target = (path.parent / link).resolve()
        assert target.name == "report.html" and target.is_file()
        assert "sopbus report" in target.read_text()[:2000]


@pytest.fixture(scope="module")
def chrome() -> Iterator[Browser]:
    if chromium() is None:
        pytest.skip(SKIP_REASON)
    with browser() as b:
        yield b


def test_the_page_opens_offline_in_a_browser(
    swept: tuple[Path, dict[str, Any]], chrome: Browser
) -> None:
    path, shown = swept
    loaded = chrome.load(path)
    assert loaded.requests == [] and loaded.errors == []
    assert f'data-figure="runs" data-value="{len(shown["variants"])}"' in loaded.dom
    hrefs = chrome.evaluate("[...document.querySelectorAll('a.run-report')].map(a => a.href)")
    assert len(hrefs) == 4
    assert all(Path(unquote(urlparse(h).path)).is_file() for h in hrefs)


def test_the_page_reads_as_the_run_report_does(
    swept: tuple[Path, dict[str, Any]], chrome: Browser
) -> None:
    """Issue 30: labels overprinted on one line, no SIMULATED mark, `1.864e+04` tokens and a
    pass rate of `1`."""
    path, shown = swept
    chrome.load(path)
    assert chrome.evaluate("document.querySelector('[data-figure=simulated]').textContent")
    text = chrome.evaluate("document.body.innerText")
    assert not re.search(r"\de[+-]\d", text)
    cells = chrome.evaluate(
        "Object.fromEntries(['pass_rate', 'tokens_mean', 'spend_mean_usd'].map(c =>"
        " [c, document.querySelector(`td[data-col=${c}]`).textContent]))"
    )
    first = shown["variants"][0]
    assert cells["pass_rate"] == f"{first['pass_rate']:.0%}"
    assert cells["tokens_mean"] == f"{round(first['tokens_mean']):,} tokens"
    assert cells["spend_mean_usd"].startswith("$")
    boxes = chrome.evaluate(
        """[...document.querySelectorAll("#tradeoff .labels_marks text")].map(t => {
             const r = t.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; })"""
    )
    assert len(boxes) == len(shown["variants"]) == 4
    for i, (l1, t1, r1, b1) in enumerate(boxes):
        for l2, t2, r2, b2 in boxes[i + 1 :]:
            assert r1 <= l2 or r2 <= l1 or b1 <= t2 or b2 <= t1, "two labels overprint"
