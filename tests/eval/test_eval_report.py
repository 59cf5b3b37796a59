"""The shipped HumanEval SOPs side by side as a user runs them (`sopbus eval` on the
simulator), and the eval's page (`sopbus eval-show EVAL --report`): its charts and tables
checked against `eval.json` and `results.jsonl`, then opened in headless chromium (no
request, no console error, every task's link leads to its run's report)."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pytest

from sopbus.bus.report import build_eval_report
from sopbus.bus.scenario import load_scenario
from support.chromium import SKIP_REASON, Browser, browser, chromium
from support.cli import sopbus
from support.paths import SCENARIOS as SHIPPED
from support.report_page import marks, section

pytestmark = pytest.mark.slow  # sopbus runs as a subprocess, the page in a browser

SCENARIOS = ("humaneval_solo", "humaneval_reviewed")
DATA = Path(__file__).parent / "data"


@dataclass(frozen=True)
class Evaluated:
    stdout: str
    eval_dir: Path
    page: Path
    figures: list[dict[str, Any]]
    results: list[dict[str, Any]]


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory: pytest.TempPathFactory) -> Evaluated:
    work = tmp_path_factory.mktemp("eval")
    ran = sopbus(
        "eval", *SCENARIOS, "--dataset", "humaneval", "--limit", "2", "--budget", "1",
        cwd=work, columns=80, timeout=600,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    [eval_dir] = (work / "evals").iterdir()
    shown = sopbus("eval-show", "last", "--report", cwd=work)
    assert shown.returncode == 0, shown.stderr
    page = work / shown.stdout.split("report: ", 1)[1].strip()  # relative to its cwd
    record = json.loads((eval_dir / "eval.json").read_text())
    lines = (eval_dir / "results.jsonl").read_text().splitlines()
    return Evaluated(
        ran.stdout, eval_dir, page, record["figures"]["scenarios"], [json.loads(x) for x in lines]
    )


def test_both_shipped_sops_are_scored_on_two_problems(evaluated: Evaluated) -> None:
    out = evaluated.stdout
    for name in ("humaneval-solo", "humaneval-reviewed"):
        assert re.search(rf"^{name}( \*front\*)? \[SIMULATED\]$", out, re.M), out
    assert out.count("covers 2 of 2 tasks") == 2
    assert "SIMULATED: the answers came from sopbus's simulator" in out
    assert len(evaluated.results) == 4  # two problems, two scenarios, one epoch
    assert {r["task_id"] for r in evaluated.results} == {"HumanEval/0", "HumanEval/1"}
    assert all(r["simulated"] and r["run_id"] for r in evaluated.results)
    assert evaluated.page == evaluated.eval_dir / "report.html" and evaluated.page.is_file()


def test_the_answer_artifact_is_the_last_message(evaluated: Evaluated) -> None:
    """`[eval] answer = "artifact:solution.py"` reads what the last message says."""
    for name in SCENARIOS:
        declared = load_scenario(SHIPPED / f"{name}.toml").eval
        assert declared is not None and declared.answer == "artifact:solution.py"
    for result in evaluated.results:
        run = evaluated.eval_dir / "runs" / result["run_id"]
        events = [json.loads(x) for x in (run / "events.jsonl").read_text().splitlines()]
        said = [
            e["message"]["content"]
            for e in events
            if e.get("kind") in ("message_published", "message_undelivered")
        ]
        assert (run / "artifacts" / "solution.py").read_text() == said[-1]


def test_the_page_draws_each_scenario_with_its_interval(evaluated: Evaluated) -> None:
    html = evaluated.page.read_text()
    score = section(html, "score")
    assert "pass@1" in score and "verdict pass rate" not in html
    assert marks(score, "score", "path") == len(evaluated.figures) == 2
    assert marks(score, "interval", "line") == 2  # a whisker per scenario
    assert marks(score, "ends", "path") == 4  # and a tick at each of its ends
    tradeoff = section(html, "tradeoff")
    assert "dollars per task" in tradeoff and "mean spend per run" not in html
    front = [f["scenario"] for f in evaluated.figures if f["front"]]
    assert front and all(f"{name} (front)" in tradeoff for name in front)
    failures = section(html, "failures")
    for f in evaluated.figures:
        for kind in ("wrong", "error", "timeout", "cut_off", "refused", "not_run"):
            cells = re.findall(rf'<td data-kind="{kind}" data-value="(\d+)">', failures)
            assert int(cells[evaluated.figures.index(f)]) == f["kinds"][kind]


def test_the_task_table_holds_results_jsonl(evaluated: Evaluated) -> None:
    rows = section(evaluated.page.read_text(), "tasks").split("<tr data-task=")[1:]
    assert len(rows) == len(evaluated.results)
    for row, result in zip(rows, evaluated.results, strict=True):
        assert row.startswith(f'"{result["task_id"]}"') and result["scenario"] in row
        assert f'data-col="outcome">{result["kind"].replace("_", " ")}<' in row
        tokens = result.get("prompt_tokens", 0) + result.get("completion_tokens", 0)
        assert f'data-col="tokens" data-value="{tokens}"' in row
        usd = re.search(r'data-col="usd" data-value="([^"]+)"', row)
        assert usd is not None and float(usd.group(1)) == float(result.get("usd", 0))
        assert f'href="runs/{result["run_id"]}/report.html"' in row


@pytest.fixture(scope="module")
def chrome() -> Iterator[Browser]:
    if chromium() is None:
        pytest.skip(SKIP_REASON)
    with browser() as b:
        yield b


def test_the_page_opens_offline_and_shows_the_figures(
    evaluated: Evaluated, chrome: Browser
) -> None:
    loaded = chrome.load(evaluated.page)
    assert loaded.requests == [] and loaded.errors == []
    text = chrome.evaluate("document.body.innerText")
    assert "pass@1 per scenario (95% interval)" in text and "Failures by kind" in text
    # Every chart carries the note, and the header the run report's SIMULATED mark.
    notes = chrome.evaluate("document.querySelectorAll('section .eval-simulated').length")
    assert notes == 3
    assert chrome.evaluate("document.querySelector('[data-figure=simulated]').textContent")
    labels = chrome.evaluate(
        "[...document.querySelectorAll('#score svg text')].map(t => t.textContent)"
    )
    assert {"humaneval-solo", "humaneval-reviewed", "pass@1"} <= set(labels)
    hrefs = chrome.evaluate("[...document.querySelectorAll('a.run-report')].map(a => a.href)")
    assert len(hrefs) == len(evaluated.results)
    for href in hrefs:
        target = Path(unquote(urlparse(href).path))
        assert target.is_file() and "sopbus report" in target.read_text()[:2000]


def _scenario(name: str, score: float, usd: str, front: bool, **kinds: int) -> dict[str, Any]:
    counts = dict.fromkeys(("passed", "wrong", "error", "timeout", "cut_off", "refused"), 0)
    return {
        "scenario": name, "pass_at_1": score, "pass_at_1_low": score / 2,
        "pass_at_1_high": min(1.0, score * 1.5), "usd_per_task": Decimal(usd), "front": front,
        "kinds": {**counts, "not_run": 0, **kinds},
    }  # fmt: skip


def test_a_model_eval_marks_its_front_and_says_nothing_of_the_simulator() -> None:
    page = build_eval_report(
        "sopbus eval x",
        {"eval": "x"},
        [
            _scenario("cheap", 0.4, "0.01", True, wrong=3),
            _scenario("dear", 0.8, "0.05", True, timeout=1, not_run=2),
            _scenario("beaten", 0.3, "0.09", False, error=4),
        ],
        [],
    )
    assert "SIMULATED" not in page
    tradeoff = section(page, "tradeoff")
    assert marks(tradeoff, "front", "path") == 1  # one step line through both front points
    assert "cheap (front)" in tradeoff and "dear (front)" in tradeoff
    assert "beaten (front)" not in tradeoff and "beaten" in tradeoff
    failures = section(page, "failures")
    assert marks(failures, "failures", "path") == 4  # wrong, timeout, not run, error
    assert re.findall(r'data-kind="not_run" data-value="(\d+)"', failures) == ["0", "2", "0"]


HOSTILE = '<img src="http://127.0.0.1:9/x" onerror="document.title=\'pwned\'">"><b id=bold>'


def test_a_hostile_task_id_is_text_on_the_page(tmp_path: Path, chrome: Browser) -> None:
    """A user's dataset names its tasks: an id written as HTML stays text, loads nothing."""
    for name in ("arith.toml", "arith_fixtures.toml"):
        shutil.copy(DATA / name, tmp_path / name)
    line = {"id": HOSTILE, "input": "What is 2+2?", "expected": "4"}
    (tmp_path / "tasks.jsonl").write_text(json.dumps(line) + "\n")
    assert sopbus("eval", "arith.toml", "--dataset", "tasks.jsonl", cwd=tmp_path).returncode == 0
    shown = sopbus("eval-show", "last", "--report", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    loaded = chrome.load(tmp_path / shown.stdout.split("report: ", 1)[1].strip())
    assert loaded.requests == [] and loaded.errors == []
    assert chrome.evaluate("document.title") != "pwned"
    assert chrome.evaluate("document.querySelectorAll('main img, #bold').length") == 0
    cell = chrome.evaluate("document.querySelector('#tasks td').textContent")
    assert cell == HOSTILE


def test_pass_at_k_is_drawn_only_for_more_than_one_epoch() -> None:
    one = build_eval_report("e", {}, [_scenario("solo", 0.5, "0.01", True)], [])
    assert '<section id="passk">' not in one and "pass@k" not in one
    three = [
        {**_scenario("solo", 0.5, "0.01", True), "pass_at_2": 0.75, "pass_at_3": 0.875},
        # a scenario whose tasks got only two scored runs each has no pass@3
        {**_scenario("team", 0.25, "0.02", False), "pass_at_2": 0.5, "pass_at_3": None},
    ]
    page = build_eval_report("e", {}, three, [])
    passk = section(page, "passk")
    assert "pass@k per scenario (k = 1 to 3)" in passk
    assert marks(passk, "passk", "path") == 2  # one line per scenario
    cells = re.findall(r'<td data-k="(\d)" data-value="([^"]*)">([^<]*)<', passk)
    assert cells == [
        ("1", "0.5", "50.0%"), ("2", "0.75", "75.0%"), ("3", "0.875", "87.5%"),
        ("1", "0.25", "25.0%"), ("2", "0.5", "50.0%"), ("3", "", "n/a"),
    ]  # fmt: skip
    assert page.index('id="score"') < page.index('id="passk"') < page.index('id="tradeoff"')
