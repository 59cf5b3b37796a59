"""The software company SOP (issue 5): the main job end to end, its bounds, its concurrency,
the openai provider against the local server, and QA's fix rounds."""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from sopbus._assemble import Outcome, execute
from sopbus.bus import (
    ChatMessage,
    ConfigError,
    LLMRequest,
    load_scenario,
    read_events,
    read_jsonl,
    scenario_with_overrides,
)
from sopbus.bus.llm._sim import _generate
from sopbus.roles.company._util import safe_path, unique_paths
from sopbus.sops import build_team
from support.cli import sopbus as cli
from support.openai_server import Answer, OpenAIServer
from support.paths import ROOT

MAIN = ROOT / "scenarios" / "software_company.toml"
FIXTURES = ROOT / "scenarios" / "fixtures" / "software_company.toml"
SOURCES = (
    "wordcount/__init__.py",
    "wordcount/counter.py",
    "wordcount/cli.py",
    "wordcount/__main__.py",
)
TESTS = ("tests/test_counter.py", "tests/test_cli.py")
DOCS = (
    "docs/prd.md",
    "docs/system_design.md",
    "docs/tasks.md",
    "docs/code_summary.md",
    "docs/test_report.md",
)


# -- helpers ----------------------------------------------------------------------------


def sopbus(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return cli("run", *args, "--quiet", env=env)


def the_run(runs_dir: Path) -> Path:
    (run_dir,) = runs_dir.iterdir()
    return run_dir


def summary_of(run_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run_dir / "summary.json").read_text())
    return data


def ledger(run_dir: Path) -> list[dict[str, Any]]:
    return list(read_jsonl(run_dir / "costs.jsonl"))


def events(run_dir: Path, kind: str) -> list[dict[str, Any]]:
    every: list[dict[str, Any]] = list(read_events(run_dir / "events.jsonl"))
    return [e for e in every if e["kind"] == kind]


def published(run_dir: Path, cause_by: str) -> list[dict[str, Any]]:
    return [e for e in events(run_dir, "message_published") if e["message"]["cause_by"] == cause_by]


def qa_verdicts(run_dir: Path) -> list[bool]:
    return [e["data"]["passed"] for e in events(run_dir, "tests_ran")]


def company(
    tmp: Path, *, fixtures: list[Path] | None = None, sop: str = "", latency_ms: int = 0
) -> Path:
    """A copy of the main scenario with other fixtures, [sop] lines or latency."""
    text = MAIN.read_text(encoding="utf-8")
    files = [str(p) for p in (fixtures if fixtures is not None else [FIXTURES])]
    text = text.replace(
        'fixtures = ["fixtures/software_company.toml"]',
        f"fixtures = {json.dumps(files)}\nlatency_ms = {latency_ms}",
    )
    for line in filter(None, sop.splitlines()):  # each `key = value` replaces the file's own
        key = line.split("=")[0].strip()
        text, found = re.subn(rf"^{key} = .*$", line, text, flags=re.M)
        if not found:
            text = text.replace("[sop]\n", f"[sop]\n{line}\n")
    # the shipped fixtures are outside the test's folder, as the file says it allows
    text = text.replace("[scenario]\n", "[scenario]\nallow_outside = true\n", 1)
    path = tmp / "company.toml"
    path.write_text(text, encoding="utf-8")
    return path


async def run_in_process(path: Path, runs_dir: Path) -> Outcome:
    scenario = scenario_with_overrides(load_scenario(path), runs_dir=str(runs_dir))
    return await execute(scenario)


# -- the main job -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def main_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[subprocess.CompletedProcess[str], Path]]:
    runs = tmp_path_factory.mktemp("runs")
    done = sopbus(str(MAIN), "--runs-dir", str(runs))
    yield done, the_run(runs)


@pytest.mark.slow
def test_main_job_ends_completed_with_every_artifact(main_run: tuple[Any, Path]) -> None:
    done, run_dir = main_run
    assert done.returncode == 0, done.stderr
    summary = summary_of(run_dir)
    assert (summary["status"], summary["end_reason"]) == ("completed", "idle")
    artifacts = run_dir / "artifacts"
    for name in (*DOCS, *(f"workspace/{p}" for p in (*SOURCES, *TESTS))):
        assert (artifacts / name).is_file(), name
    assert "```mermaid\nclassDiagram" in (artifacts / "docs/system_design.md").read_text()
    assert "P0" in (artifacts / "docs/prd.md").read_text()


@pytest.mark.slow
def test_main_job_qa_ran_the_tests_and_they_passed(main_run: tuple[Any, Path]) -> None:
    _, run_dir = main_run
    assert qa_verdicts(run_dir) == [True]
    (result,) = published(run_dir, "RunCode")
    assert result["message"]["payload"]["passed"] is True
    assert result["message"]["payload"]["totals"].startswith("13 passed")
    assert result["recipients"] == ["Alex"]
    report = (run_dir / "artifacts/docs/test_report.md").read_text()
    assert "**Result: PASSED** after 1 run(s)" in report
    assert published(run_dir, "DebugError") == []


@pytest.mark.slow
def test_main_job_built_a_working_program(main_run: tuple[Any, Path]) -> None:
    _, run_dir = main_run
    done = subprocess.run(
        [sys.executable, "-m", "wordcount", "-w", "--top", "1"],
        cwd=run_dir / "artifacts/workspace",
        input="the cat and the hat\n",
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["5", "2", "the"]


@pytest.mark.slow
def test_main_job_ledger_adds_up_to_the_summary_under_budget(main_run: tuple[Any, Path]) -> None:
    _, run_dir = main_run
    lines, summary = ledger(run_dir), summary_of(run_dir)
    total = sum((Decimal(str(line["cost_usd"])) for line in lines), Decimal(0))
    assert total > 0
    assert total == Decimal(str(summary["total_usd"]))
    assert total <= Decimal(str(summary["budget_usd"])) == Decimal("2")
    # PRD, design, tasks, four files, four reviews, the summary, two test files
    assert sorted(line["action"] for line in lines) == sorted(
        [
            "WritePRD",
            "WriteDesign",
            "WriteTasks",
            *["WriteCode"] * 4,
            *["WriteCodeReview"] * 4,
            "SummarizeCode",
            *["WriteTest"] * 2,
        ]
    )
    assert {line["outcome"] for line in lines} == {"ok"}


@pytest.mark.slow
def test_a_budget_too_small_stops_the_run_and_keeps_what_was_written(tmp_path: Path) -> None:
    # Enough for the three documents; four files of up to 4096 tokens each are not reserved.
    done = sopbus(str(MAIN), "--runs-dir", str(tmp_path), "--budget", "0.003")
    assert done.returncode == 3, done.stderr
    run_dir = the_run(tmp_path)
    summary = summary_of(run_dir)
    assert (summary["status"], summary["end_reason"]) == ("budget_exhausted", "budget_exhausted")
    assert Decimal(str(summary["total_usd"])) <= Decimal("0.003")
    for name in ("docs/prd.md", "docs/system_design.md", "docs/tasks.md"):
        assert (run_dir / "artifacts" / name).is_file(), name
    lines = ledger(run_dir)
    assert lines[-1]["outcome"] == "refused" and lines[-1]["action"] == "WriteCode"
    assert not (run_dir / "artifacts/docs/test_report.md").exists()


# -- QA's fix rounds --------------------------------------------------------------------


def fixture_file(path: Path, entries: list[dict[str, Any]]) -> Path:
    """A fixture file (TOML) with ``entries``; strings written as JSON, which TOML reads."""
    lines = [
        "# SIMULATED OUTPUT: canned answers for sopbus's sim provider; no model wrote them.",
        "simulated = true",
    ]
    for entry in entries:
        lines.append("[[fixture]]")
        for key, value in entry.items():
            lines.append(f"{key} = {json.dumps(value)}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def canned_code(path: str) -> str:
    for entry in tomllib.loads(FIXTURES.read_text(encoding="utf-8"))["fixture"]:
        if entry.get("match") == f"File to write: {path}":
            code: str = entry["responses"][0]["code"]
            return code
    raise AssertionError(path)


async def test_a_failing_test_sends_a_bug_report_and_the_fix_passes(tmp_path: Path) -> None:
    fixed = canned_code("wordcount/counter.py")
    # A real bug: splitlines() counts a last line without a newline, which wc does not.
    buggy = fixed.replace('lines=text.count("\\n")', "lines=len(text.splitlines())")
    assert buggy != fixed
    bug = fixture_file(
        tmp_path / "bug.toml",
        [
            {
                "action": "WriteCode",
                "match": "File to write: wordcount/counter.py",
                "responses": [json.dumps({"code": buggy}), json.dumps({"code": fixed})],
            },
            {
                "action": "DebugError",
                "responses": [
                    json.dumps(
                        {
                            "analysis": "count_text counts 2 lines for 'a b\\nc'; wc counts newline characters.",
                            "fix_in": "code",
                            "files_to_fix": ["wordcount/counter.py"],
                            "instructions": "Count lines as text.count('\\n').",
                        }
                    )
                ],
            },
        ],
    )
    outcome = await run_in_process(
        company(tmp_path, fixtures=[bug, FIXTURES], sop="review = false"), tmp_path / "runs"
    )
    run_dir = outcome.run_dir
    assert outcome.summary.end_reason == "idle"
    assert qa_verdicts(run_dir) == [False, True]
    (report,) = published(run_dir, "DebugError")
    assert report["recipients"] == ["Alex"]
    assert report["message"]["payload"]["files_to_fix"] == ["wordcount/counter.py"]
    assert "test_last_line_without_newline_is_not_a_line" in report["message"]["payload"]["output"]
    first, second = published(run_dir, "WriteCode")
    assert first["message"]["payload"]["files"]["wordcount/counter.py"] == buggy
    # the fix rewrote only the named file, in answer to the report
    assert second["message"]["payload"]["files"] == {"wordcount/counter.py": fixed}
    assert report["message"]["id"] in second["message"]["parents"]
    assert (run_dir / "artifacts/workspace/wordcount/counter.py").read_text() == fixed
    assert (
        "**Result: PASSED** after 2 run(s)"
        in (run_dir / "artifacts/docs/test_report.md").read_text()
    )


async def test_qa_gives_up_after_max_test_rounds(tmp_path: Path) -> None:
    broken = "def count_text(:\n"  # a syntax error the fixtures never fix
    bug = fixture_file(
        tmp_path / "bug.toml",
        [
            {
                "action": "WriteCode",
                "match": "File to write: wordcount/counter.py",
                "responses": [json.dumps({"code": broken})],
            }
        ],
    )
    outcome = await run_in_process(
        company(tmp_path, fixtures=[bug, FIXTURES], sop="review = false\nmax_test_rounds = 2"),
        tmp_path / "runs",
    )
    run_dir = outcome.run_dir
    assert (outcome.summary.status, outcome.summary.end_reason) == ("completed", "idle")
    assert qa_verdicts(run_dir) == [False, False, False]  # the first run and two fix rounds
    assert len(published(run_dir, "DebugError")) == 2
    (gave_up,) = events(run_dir, "test_rounds_exhausted")
    assert gave_up["data"] == {"max_test_rounds": 2}


async def test_a_review_that_never_passes_rewrites_the_file_at_most_max_review_rounds(
    tmp_path: Path,
) -> None:
    picky = fixture_file(
        tmp_path / "picky.toml",
        [
            {
                "action": "WriteCodeReview",
                "match": "File to review: wordcount/cli.py",
                "responses": [json.dumps({"lgtm": False, "issues": ["main() ignores --top 0"]})],
            }
        ],
    )
    outcome = await run_in_process(
        company(tmp_path, fixtures=[picky, FIXTURES], sop="review = true\nmax_review_rounds = 2"),
        tmp_path / "runs",
    )
    run_dir = outcome.run_dir
    reviews = [e["data"] for e in events(run_dir, "code_reviewed")]
    assert [(r["review_round"], r["lgtm"]) for r in reviews if r["file"] == "wordcount/cli.py"] == [
        (1, False),
        (2, False),
    ]
    assert sorted(r["file"] for r in reviews if r["lgtm"]) == [
        "wordcount/__init__.py",
        "wordcount/__main__.py",
        "wordcount/counter.py",
    ]
    # the first write and one rewrite per failed review of cli.py; one write for the others
    actions = [line["action"] for line in ledger(run_dir)]
    assert actions.count("WriteCode") == 4 + 2 and actions.count("WriteCodeReview") == 3 + 2
    assert qa_verdicts(run_dir) == [True]


# -- concurrency ------------------------------------------------------------------------


async def test_the_engineer_writes_the_files_concurrently(tmp_path: Path) -> None:
    outcome = await run_in_process(company(tmp_path, latency_ms=400), tmp_path / "runs")
    run_dir = outcome.run_dir
    lines = ledger(run_dir)
    writes = [line for line in lines if line["action"] == "WriteCode"]
    assert len(writes) == 4 and all(line["latency_ms"] >= 390 for line in writes)
    # From the first WriteCode call's start to the last one's end: about one latency, not four.
    span = max(w["t"] for w in writes) - min(w["t"] - w["latency_ms"] / 1000 for w in writes)
    assert span < 0.6 * sum(w["latency_ms"] for w in writes) / 1000
    # The whole run, less the time pytest ran, is well under the sum of all latencies.
    latencies = sum(line["latency_ms"] for line in lines) / 1000
    testing = sum(e["data"]["duration_s"] for e in events(run_dir, "tests_ran"))
    assert summary_of(run_dir)["duration_s"] - testing < 0.8 * latencies
    assert qa_verdicts(run_dir) == [True]


# -- through the openai provider --------------------------------------------------------


def schema_answer(body: dict[str, Any]) -> Answer:
    """What a careless model says: schema-valid JSON of the prompt's own words (the code is
    prose, so QA's tests fail), drawn like the simulator draws it."""
    schema = body["response_format"]["json_schema"]["schema"]
    request = LLMRequest(
        messages=tuple(ChatMessage(m["role"], m["content"]) for m in body["messages"]),
        model=body["model"],
        schema=schema,
        max_tokens=body.get("max_completion_tokens") or body.get("max_tokens") or 1024,
    )
    text = _generate(request, random.Random(len(body["messages"][-1]["content"])))
    return Answer(
        text,
        prompt_tokens=sum(len(m["content"]) // 4 for m in body["messages"]),
        completion_tokens=len(text) // 4,
    )


@pytest.mark.slow
def test_the_pipeline_through_the_openai_provider_ends_cleanly(tmp_path: Path) -> None:
    with OpenAIServer() as server:
        server.script(schema_answer)
        done = sopbus(
            str(company(tmp_path, sop="max_test_rounds = 1")),
            "--runs-dir",
            str(tmp_path / "runs"),
            "--provider",
            "openai",
            "--base-url",
            server.base_url,
            "--model",
            "gpt-4o-mini",
            env={"OPENAI_API_KEY": "sk-local-test"},
        )
        requests = len(server.requests)
    # The run ends cleanly (idle) but QA's tests failed: it completed and missed its purpose.
    assert done.returncode == 4, done.stderr
    run_dir = the_run(tmp_path / "runs")
    summary, lines = summary_of(run_dir), ledger(run_dir)
    assert summary["end_reason"] == "idle" and summary["provider"] == "openai"
    assert (
        summary["verdict"]["passed"] is False
        and "QA's tests failed" in summary["verdict"]["reason"]
    )
    assert len(lines) == requests > 10
    assert {line["provider"] for line in lines} == {"openai"}
    assert {line["outcome"] for line in lines} == {"ok"}
    assert sum(Decimal(str(line["cost_usd"])) for line in lines) == Decimal(
        str(summary["total_usd"])
    )
    # prose is not Python: QA's run fails, one fix round is allowed, then QA stops
    assert qa_verdicts(run_dir) == [False, False]
    assert len(events(run_dir, "test_rounds_exhausted")) == 1
    for name in ("docs/prd.md", "docs/system_design.md", "docs/tasks.md", "docs/test_report.md"):
        assert (run_dir / "artifacts" / name).is_file(), name


# -- the reviewed company: a role declared only in TOML ---------------------------------


async def test_a_security_reviewer_declared_in_toml_reports_to_the_engineer(tmp_path: Path) -> None:
    outcome = await run_in_process(ROOT / "scenarios/software_company_reviewed.toml", tmp_path)
    run_dir = outcome.run_dir
    (review,) = published(run_dir, "ReviewSecurity")
    assert review["message"]["sent_from"] == "Sam"
    assert review["recipients"] == ["Alex"]
    (code,) = published(run_dir, "WriteCode")
    assert sorted(code["recipients"]) == ["Edward", "Sam"]
    assert review["message"]["parents"] == [code["message"]["id"]]
    assert review["message"]["payload"]["files"] == ["wordcount/cli.py"]
    assert qa_verdicts(run_dir) == [True]


# -- options and file names -------------------------------------------------------------


def test_a_misspelt_sop_option_names_the_key_and_the_fix(tmp_path: Path) -> None:
    path = company(tmp_path, sop="max_test_round = 2")
    with pytest.raises(ConfigError) as info:
        build_team(load_scenario(path))
    message = str(info.value)
    assert "$.sop.max_test_round" in message and "max_test_rounds" in message


def test_options_reach_the_roles(tmp_path: Path) -> None:
    team = build_team(
        load_scenario(company(tmp_path, sop="max_test_rounds = 5\ntest_timeout_s = 9"))
    )
    qa = {r.name: r for r in team.roles}["Edward"]
    assert (qa.max_test_rounds, qa.limits.timeout_s) == (5, 9.0)  # type: ignore[attr-defined]
    assert [r.name for r in team.roles] == ["Alice", "Bob", "Eve", "Alex", "Edward"]


@pytest.mark.parametrize(
    ("name", "path"),
    [
        ("pkg/core.py", "pkg/core.py"),
        ("`main.py`", "main.py"),
        ("./src/app.py", "src/app.py"),
        ("../../etc/passwd", "etc/passwd"),
        ("/abs/path.py", "abs/path.py"),
        ("The main module, with a parser!", "the_main_module_with.py"),
        ("a/../b.py", "a_b_py.py"),
    ],
)
def test_file_names_from_a_model_stay_inside_the_workspace(name: str, path: str) -> None:
    assert safe_path(name, 0) == path


def test_task_lists_drop_duplicates_and_tests_and_are_bounded() -> None:
    names = ["pkg/a.py", "pkg/a.py", "tests/test_a.py", "pkg/b.py", "pkg/c.py"]
    assert unique_paths(names, limit=2) == ["pkg/a.py", "pkg/b.py"]
