"""The shipped tool team, ``repo_analyst``, by the CLI: on the simulator the real
``mcp-server-git`` runs the scripted calls on the demo repository the run makes, and the
verdict checks the report against that repository; ``replay`` reproduces it at $0 with the
server nowhere to be found; ``verify`` is intact; a report that names a file no commit
touched, or misses a commit, fails; a missing server is exit 2 naming the package."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

from sopbus.bus import Message, RunRecord, read_events, read_jsonl
from sopbus.sops.builtin.repo_analyst import judge, make_demo_repo, repo_facts
from support.cli import sopbus
from support.venvs import bare_venv


def _git_server() -> None:
    beside = Path(sys.executable).parent / "mcp-server-git"
    if not beside.exists() and shutil.which("mcp-server-git") is None:
        pytest.skip("mcp-server-git is not installed: pip install -e '.[test]'")


def _only_run(runs: Path) -> Path:
    (found,) = [p for p in runs.iterdir() if p.is_dir()]
    return found


def test_the_analyst_reads_a_real_repository_through_mcp_and_passes_its_verdict(
    tmp_path: Path,
) -> None:
    _git_server()
    done = sopbus("run", "repo_analyst", "--runs-dir", tmp_path / "runs", "--quiet")
    assert done.returncode == 0, done.stderr
    run_dir = _only_run(tmp_path / "runs")
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["verdict"]["passed"] is True, summary["verdict"]
    commits, touched = repo_facts(run_dir / "repo", 20)
    assert len(commits) == 4 and "orders/auth.py" in touched
    called = [e for e in read_events(run_dir / "events.jsonl") if e["kind"] == "tool_called"]
    assert {e["data"]["server"] for e in called} == {"git"}
    assert [e["data"]["tool"] for e in called].count("git_show") == 4
    assert all(e["data"]["error"] is None for e in called)
    # The server answered from the repository: each commit's show names its files.
    shown = [
        r["output"]["text"]
        for r in read_jsonl(run_dir / "calls.jsonl")
        if r.get("kind") == "tool" and r["call"]["name"] == "git.git_show"
    ]
    assert any("orders/auth.py" in text and "X-Internal" in text for text in shown)

    # No mcp-server-git anywhere: a replay that started it would fail.
    replayed = sopbus("replay", run_dir, "--quiet", env={"PATH": os.defpath})
    assert replayed.returncode == 0, replayed.stderr
    (again,) = [p for p in (tmp_path / "runs").iterdir() if p.is_dir() and p != run_dir]
    assert sum(float(line["cost_usd"]) for line in read_jsonl(again / "costs.jsonl")) == 0
    replay_summary = json.loads((again / "summary.json").read_text())
    assert replay_summary["verdict"]["passed"] is True
    replayed_calls = [e for e in read_events(again / "events.jsonl") if e["kind"] == "tool_called"]
    assert len(replayed_calls) == len(called) and all(e["data"]["replayed"] for e in replayed_calls)
    verified = sopbus("verify", run_dir)
    assert verified.returncode == 0 and verified.stdout.strip().endswith("intact")


def test_a_missing_git_server_is_exit_2_naming_the_package(tmp_path: Path) -> None:
    """Not on PATH, not in the venv sopbus runs from: exit 2 before any run directory."""
    python = bare_venv(tmp_path / "venv")
    runs = tmp_path / "runs"
    argv = [str(python), "-m", "sopbus", "run", "repo_analyst", "--runs-dir", str(runs), "--quiet"]
    env = {**os.environ, "PATH": os.defpath}
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "mcp-server-git" in done.stderr and "sopbus[tools]" in done.stderr
    assert "Traceback" not in done.stderr
    assert not runs.exists() or not list(runs.iterdir())  # no empty run directory left


def _record(repo: Path, payload: Mapping[str, object]) -> RunRecord:
    report = Message(cause_by="SummarizeChanges", sent_from="Analyst", payload=dict(payload))
    return RunRecord(end_reason="idle", messages=(report,), artifacts_dir=repo.parent / "artifacts")


def test_the_verdict_checks_the_report_against_the_repository(tmp_path: Path) -> None:
    repo = make_demo_repo(tmp_path / "repo")
    commits, touched = repo_facts(repo, 20)
    good = {
        "summary": "four commits",
        "commits": [c[:10] for c in commits],
        "changed_files": sorted(touched),
        "risky_files": ["orders/auth.py"],
    }
    assert judge(_record(repo, good), repo, "SummarizeChanges", 20).passed
    invented = {**good, "risky_files": ["orders/payments.py"]}
    verdict = judge(_record(repo, invented), repo, "SummarizeChanges", 20)
    assert not verdict.passed and "orders/payments.py" in verdict.reason
    short = {**good, "commits": good["commits"][:3]}  # type: ignore[index]
    verdict = judge(_record(repo, short), repo, "SummarizeChanges", 20)
    assert not verdict.passed and f"misses 1 of 4 commits ({commits[3][:7]})" in verdict.reason
    # The range is the last max_commits: an older commit is not asked for, nor its files.
    _, their_files = repo_facts(repo, 3)
    ranged = {**short, "changed_files": sorted(their_files)}
    assert judge(_record(repo, ranged), repo, "SummarizeChanges", 3).passed
    assert not judge(_record(repo, short), repo, "SummarizeChanges", 3).passed  # README.md
    assert make_demo_repo(tmp_path / "again") and repo_facts(tmp_path / "again", 20)[0] == commits
