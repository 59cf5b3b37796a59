"""``sopbus report``: the report of every shipped scenario agrees with its summary.json and
its ledger, draws one arrow per delivery and one bar per call; the CLI writes it and
refuses bad input with exit 2."""

from __future__ import annotations

import re
import subprocess
from collections import Counter, defaultdict
from decimal import Decimal
from pathlib import Path
from typing import Any

import msgspec
import pytest

from sopbus._assemble import execute
from sopbus.bus import read_jsonl
from sopbus.bus.report import build_report
from support.cli import ARGV
from support.report_page import Page, marks, section
from support.sop_runs import ROOT, SCENARIOS, run, scenario
from support.synthetic_run import write_run

SHIPPED = sorted(p.stem for p in SCENARIOS.glob("*.toml"))


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ARGV, *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


def arrows(svg: str) -> int:
    return marks(svg, "arrows", "line") + marks(svg, "undelivered", "line")


def _folded(name: str, crowds: set[str]) -> str:
    """A population's agent (``Player-17``) as its population, as ``sopbus costs`` shows it."""
    prefix, _, number = name.rpartition("-")
    return prefix if prefix in crowds and number.isdigit() else name


def check_against_run(run_dir: Path, html: str) -> Page:
    """The page's figures, tables and charts against summary.json, the ledger and the log."""
    summary = msgspec.json.decode((run_dir / "summary.json").read_bytes())
    ledger = list(read_jsonl(run_dir / "costs.jsonl"))
    events = list(read_jsonl(run_dir / "events.jsonl"))
    page = Page(html)
    fig = page.figures
    assert fig["status"] == summary["status"]
    assert int(fig["rounds"]) == summary["rounds"]
    assert int(fig["messages"]) == summary["messages"]
    assert int(fig["llm_calls"]) == summary["llm_calls"]
    assert int(fig["tokens"]) == summary["prompt_tokens"] + summary["completion_tokens"]
    spent = sum((Decimal(line["cost_usd"]) for line in ledger), Decimal(0))
    assert Decimal(fig["total_usd"]) == Decimal(str(summary["total_usd"])) == spent
    assert Decimal(fig["budget_usd"]) == Decimal(str(summary["budget_usd"]))
    assert fig["provider"] == summary["provider"] and fig["model"] == summary["model"]
    if "verdict" in summary:
        verdict = summary["verdict"]
        assert fig["verdict"] == ("none" if verdict is None else str(verdict["passed"]).lower())
    by: dict[str, dict[str, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
    crowds = set(summary.get("populations") or ())
    for line in ledger:
        for group in ("role", "action", "model"):
            by[group][_folded(line[group], crowds)] += Decimal(line["cost_usd"])
    for group in ("role", "action", "model"):
        assert page.costs.get(group, {}) == dict(by[group])
    posted = [e for e in events if e["kind"] in ("message_published", "message_undelivered")]
    assert [m["id"] for m in page.data("messages-data")] == [e["message"]["id"] for e in posted]
    assert [m["content"] for m in page.data("messages-data")] == [
        e["message"]["content"] for e in posted
    ]
    deliveries = sum(len(e.get("recipients") or ["nobody"]) for e in posted)
    assert flow_arrows(html) == deliveries
    if ledger:
        # a population's batch line is a bar a call, each carrying the line's seq
        seqs = [line["seq"] for line in ledger for _ in range(_calls_of(line))]
        calls = section(html, "calls")
        if "calls_aggregated" in fig:  # too many to draw: counted per round, lane, outcome
            counted = re.findall(r'<tr data-round="\d+" data-lane="[^"]+" data-outcome="\w+" '
                                 r'data-value="(\d+)">', calls)  # fmt: skip
            assert marks(calls, "call_bars", "path") == 0
            assert sum(int(n) for n in counted) == len(seqs)
        else:
            assert marks(calls, "call_bars", "path") == len(seqs)
            assert sorted(int(c["seq"]) for c in page.data("calls-data")) == seqs
    return page


def _calls_of(line: dict[str, Any]) -> int:
    batch = line.get("batch")
    return len(batch["agents"]) if batch else 1


def flow_arrows(html: str) -> int:
    """The flow's arrows, on the page and on its later pages (packed, drawn when shown)."""
    import base64
    import gzip

    flow = section(html, "flow")
    pages = [
        gzip.decompress(base64.b64decode(b)).decode()
        for b in re.findall(r"<script [^>]*data-page>([^<]*)</script>", flow)
    ]
    return arrows(flow) + sum(arrows(p) for p in pages)


# Scenarios with a person in the team get their answers from a file, as `--human-input` gives.
HUMAN_ANSWERS = {"flower_shop_manager": ['{"approved": true, "note": "Lovely, send it."}']}


@pytest.mark.parametrize("name", SHIPPED)
async def test_the_report_of_each_shipped_scenario_matches_its_summary_and_ledger(
    name: str, tmp_path: Path
) -> None:
    answers = None
    if name in HUMAN_ANSWERS:
        answers = tmp_path / "answers.jsonl"
        answers.write_text("\n".join(HUMAN_ANSWERS[name]) + "\n")
    outcome = await execute(scenario(name, tmp_path), human_input=answers)
    html = build_report(outcome.run_dir)
    page = check_against_run(outcome.run_dir, html)
    assert page.figures["simulated"] == "true"  # every shipped scenario runs on the simulator
    assert ("human" in page.figures) == (name in HUMAN_ANSWERS)
    written = {
        e["path"]
        for e in read_jsonl(outcome.run_dir / "events.jsonl")
        if e["kind"] == "artifact_written"
    }
    assert html.count("<details class=artifact") == len(written)


def test_a_big_run_is_paged_and_every_message_and_call_is_kept(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, messages=1500, roles=5, per_round=60)
    html = build_report(run_dir)
    page = check_against_run_paged(run_dir, html)
    assert len(page.data("messages-data")) == 1500
    assert html.count("data-page>") >= 3  # the flow's later pages, packed


def check_against_run_paged(run_dir: Path, html: str) -> Page:
    """Like :func:`check_against_run` for figures and tables; marks counted over all pages."""
    events = list(read_jsonl(run_dir / "events.jsonl"))
    posted = [e for e in events if e["kind"] in ("message_published", "message_undelivered")]
    assert flow_arrows(html) == sum(len(e.get("recipients") or ["nobody"]) for e in posted)
    page = Page(html)
    summary = msgspec.json.decode((run_dir / "summary.json").read_bytes())
    assert Decimal(page.figures["total_usd"]) == Decimal(str(summary["total_usd"]))
    assert int(page.figures["undelivered_listed"]) == summary["undelivered"]
    return page


def test_repairs_retries_and_refusals_are_marked(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, messages=400, roles=4)
    calls = Page(build_report(run_dir)).data("calls-data")
    marks_by = Counter(c["mark"] for c in calls)
    outcomes = Counter(c["outcome"] for c in calls)
    # write_run: message i retries when i % 97 == 0, repairs when i % 89 == 0, refused at 211.
    assert marks_by["retry"] == len([i for i in range(1, 400) if i % 97 == 0])
    assert marks_by["repair"] == len([i for i in range(1, 400) if i % 89 == 0 and i % 97])
    assert outcomes["refused"] == 1 and outcomes["error"] == marks_by["retry"]


def test_cli_report_writes_the_page_and_refuses_bad_input(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path / "runs", messages=30, roles=3)
    done = _cli("report", "last", "--runs-dir", str(tmp_path / "runs"))
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()) == run_dir / "report.html"
    check_against_run(run_dir, (run_dir / "report.html").read_text())
    out = tmp_path / "elsewhere.html"
    assert (
        _cli("report", str(run_dir), "-o", str(out)).returncode == 0 and out.stat().st_size > 10_000
    )
    missing = _cli("report", "nope", "--runs-dir", str(tmp_path / "runs"))
    assert (
        missing.returncode == 2
        and "no run 'nope'" in missing.stderr
        and "Traceback" not in missing.stderr
    )
    bad = _cli("report", str(run_dir), "-o", str(tmp_path / "no" / "such" / "x.html"))
    assert bad.returncode == 2 and "does not exist" in bad.stderr and not (tmp_path / "no").exists()


def test_run_report_writes_the_report_when_the_run_ends(tmp_path: Path) -> None:
    done = _cli(
        "run",
        str(SCENARIOS / "software_company.toml"),
        "--runs-dir",
        str(tmp_path),
        "--quiet",
        "--report",
    )
    assert done.returncode == 0, done.stderr
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert f"report: {run_dir / 'report.html'}" in done.stdout
    check_against_run(run_dir, (run_dir / "report.html").read_text())


def test_a_killed_run_without_summary_is_reported_from_its_log(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, messages=50, roles=3)
    (run_dir / "summary.json").unlink()
    page = Page(build_report(run_dir))
    ledger: list[dict[str, Any]] = list(read_jsonl(run_dir / "costs.jsonl"))
    assert page.figures["status"] == "unfinished"
    assert int(page.figures["messages"]) == 50
    assert Decimal(page.figures["total_usd"]) == sum(
        (Decimal(x["cost_usd"]) for x in ledger), Decimal(0)
    )


async def test_an_events_mode_run_is_drawn_along_time(tmp_path: Path) -> None:
    import msgspec.structs

    sc = scenario("software_company", tmp_path)
    outcome = await run(
        msgspec.structs.replace(sc, run=msgspec.structs.replace(sc.run, mode="events"))
    )
    html = build_report(outcome.run_dir)
    check_against_run(outcome.run_dir, html)
    flow = section(html, "flow")
    assert "seconds since the run started" in flow and "round 1</text>" not in flow
    assert Page(html).figures["mode"] == "events"


def test_a_run_killed_before_its_first_message_still_gets_a_report(tmp_path: Path) -> None:
    from sopbus.bus import RunStore
    from sopbus.bus import _events as ev

    store = RunStore.create(tmp_path, "killed")
    store.log(
        ev.RunStarted(
            run_id=store.run_id,
            scenario="killed",
            mode="rounds",
            seed=0,
            max_rounds=3,
            settings={"provider": "sim", "budget_usd": "1"},
        )
    )
    store.close()
    page = Page(build_report(store.run_dir))
    assert page.figures["status"] == "unfinished" and int(page.figures["messages"]) == 0
    assert Decimal(page.figures["total_usd"]) == 0 and Decimal(page.figures["budget_usd"]) == 1
