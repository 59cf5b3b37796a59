"""The tool loop on the simulator with real Python tools, run by the CLI as a user runs it:
the calls run and are recorded, replay answers them at $0 without running a tool, a loop
that never ends stops at max_tool_steps, a small cap stops a long loop, resume after kill -9
does not repeat a recorded call, verify stays intact."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

from sopbus.bus import LedgerLine, read_jsonl
from support.cli import sopbus
from support.paths import DATA

TEAM = DATA / "tool_team"
TWO_STEPS = """
[[fixture]]
action = "SummarizeNotes"
responses = [
  { tool_calls = [
      { name = "py.word_count", arguments = { text = "green tea guide" } },
      { name = "py.append_note", arguments = { note = "three words" } },
  ] },
  { tool_calls = [
      { name = "py.append_note", arguments = { note = "second", times = 2 } },
      { name = "py.word_cont", arguments = { text = "typo" } },
      { name = "py.append_note", arguments = "not json" },
      { name = "py.append_note", arguments = { times = "many" } },
  ] },
  { summary = "A guide of three words.", words = 3 },
]
"""
FOREVER = """
[[fixture]]
action = "SummarizeNotes"
responses = [{ tool_calls = [{ name = "py.append_note", arguments = { note = "again" } }] }]
"""


def scenario(tmp_path: Path, fixtures: str, *, budget: str = "1.0", steps: str = "") -> Path:
    (tmp_path / "fixtures.toml").write_text(
        "# SIMULATED OUTPUT: canned answers for sopbus's sim provider.\nsimulated = true\n"
        + fixtures
    )
    path = tmp_path / "tools.toml"
    path.write_text(
        f"""
[scenario]
name = "tools"
sop = "tool_sop:SOP"
idea = "green tea guide"
[run]
runs_dir = "{tmp_path / "runs"}"
budget_usd = {budget}
[llm]
fixtures = ["fixtures.toml"]
max_tokens = 200
{steps}
"""
    )
    return path


def run(tmp_path: Path, *args: str | Path) -> Any:
    env = {"PYTHONPATH": str(TEAM), "TOOL_NOTES": str(tmp_path / "notes.txt")}
    return sopbus(*args, env=env)


def only_run(tmp_path: Path, kind: str = "tools") -> Path:
    (found,) = [p for p in (tmp_path / "runs").iterdir() if kind in p.name or kind == "tools"]
    return found


def events(run_dir: Path, kind: str) -> list[dict[str, Any]]:
    return [e for e in read_jsonl(run_dir / "events.jsonl", dict) if e["kind"] == kind]


def notes(tmp_path: Path) -> str:
    path = tmp_path / "notes.txt"
    return path.read_text() if path.exists() else ""


def test_a_tool_loop_runs_records_and_replays_without_calling_a_tool(tmp_path: Path) -> None:
    done = run(tmp_path, "run", scenario(tmp_path, TWO_STEPS), "--quiet")
    assert done.returncode == 0, done.stderr
    assert notes(tmp_path) == "three words\nsecond\nsecond\n"
    (run_dir,) = (tmp_path / "runs").iterdir()
    called = events(run_dir, "tool_called")
    assert sorted((e["data"]["tool"], e["data"]["error"] is None) for e in called) == [
        ("append_note", False),  # not JSON: the model is told, nothing runs
        ("append_note", False),  # times = "many": pydantic's error goes back
        ("append_note", True),
        ("append_note", True),
        ("word_cont", False),  # not offered: an error result with the close name
        ("word_count", True),
    ]
    typo = next(e for e in called if e["data"]["tool"] == "word_cont")
    assert "py.word_count" in typo["data"]["error"]
    recording = [json.loads(line) for line in (run_dir / "calls.jsonl").read_text().splitlines()]
    tools = [r for r in recording if r.get("kind") == "tool"]
    assert {r["call"]["name"] for r in tools} == {"py.word_count", "py.append_note"}
    assert [r["output"]["text"] for r in tools if r["call"]["name"] == "py.word_count"] == ["3"]
    (summary,) = [
        e["message"]["payload"]
        for e in events(run_dir, "message_undelivered")  # nobody watches it: the last word
        if e["message"]["cause_by"] == "SummarizeNotes"
    ]
    assert summary == {"summary": "A guide of three words.", "words": 3}
    # The third request carries both exchanges: 2 + 4 tool results in order.
    last = [r for r in recording if "completion" in r][-1]
    assert last["completion"]["tool_calls"] == []
    # One attempt, three model calls: the ledger and llm_called tell them apart by step.
    ledger = list(read_jsonl(run_dir / "costs.jsonl", LedgerLine))
    assert [(line.attempt, line.step) for line in ledger] == [(1, 1), (1, 2), (1, 3)]
    assert [e["call"]["step"] for e in events(run_dir, "llm_called")] == [1, 2, 3]

    shown = sopbus("show", run_dir, env={"COLUMNS": "160"})
    assert "tool calls (6)" in shown.stdout and "py.word_count" in shown.stdout
    assert "py.word_cont" in shown.stdout and "error: " in shown.stdout

    replayed = run(tmp_path, "replay", run_dir, "--quiet")
    assert replayed.returncode == 0, replayed.stderr
    assert notes(tmp_path) == "three words\nsecond\nsecond\n"  # no tool ran again
    replay_dir = next(p for p in (tmp_path / "runs").iterdir() if p != run_dir)
    lines = list(read_jsonl(replay_dir / "costs.jsonl", LedgerLine))
    assert len(lines) == 3 and sum(line.cost_usd for line in lines) == 0
    assert [line.step for line in lines] == [1, 2, 3]
    # The four calls that reached a tool come from the recording; the two refused before
    # any tool (not offered, not JSON) are refused again.
    again = events(replay_dir, "tool_called")
    assert sorted(e["data"]["replayed"] for e in again) == [False, False, True, True, True, True]
    verified = run(tmp_path, "verify", run_dir)
    assert verified.returncode == 0 and "intact" in verified.stdout, verified.stdout


def test_a_loop_that_never_ends_stops_at_max_tool_steps_within_the_cap(tmp_path: Path) -> None:
    done = run(tmp_path, "run", scenario(tmp_path, FOREVER, budget="0.01"), "--quiet")
    assert done.returncode == 1, done.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["end_reason"] == "error"
    assert "max_tool_steps = 3" in summary["detail"] and "SummarizeNotes" in summary["detail"]
    assert notes(tmp_path) == "again\n" * 3  # three steps ran, the fourth ask was refused
    lines = list(read_jsonl(run_dir / "costs.jsonl", LedgerLine))
    assert len(lines) == 4
    assert sum(line.cost_usd for line in lines) <= Decimal("0.01")


def test_a_small_cap_stops_a_long_loop_before_the_call_that_would_pass_it(tmp_path: Path) -> None:
    # Each step reserves the bound of a prompt that has grown; the cap fits two steps.
    done = run(tmp_path, "run", scenario(tmp_path, FOREVER, budget="0.00025"), "--quiet")
    assert done.returncode == 3, done.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["end_reason"] == "budget_exhausted"
    lines = list(read_jsonl(run_dir / "costs.jsonl", LedgerLine))
    assert lines[-1].outcome == "refused"
    answered = [line for line in lines if line.outcome == "ok"]
    assert 1 <= len(answered) < 4
    assert sum(line.cost_usd for line in lines) <= Decimal("0.00025")
    assert notes(tmp_path) == "again\n" * len(answered)  # every answered ask ran its call


def test_resume_after_kill_does_not_repeat_a_recorded_tool_call(tmp_path: Path) -> None:
    path = scenario(tmp_path, TWO_STEPS)
    env = {
        "PYTHONPATH": str(TEAM),
        "TOOL_NOTES": str(tmp_path / "notes.txt"),
        "SOPBUS_KILL_AT": "tool:recorded#2",
    }
    killed = sopbus("run", path, "--quiet", env=env)
    assert killed.returncode == -9
    (run_dir,) = (tmp_path / "runs").iterdir()
    before = notes(tmp_path)
    assert before.count("three words") == 1
    resumed = run(tmp_path, "resume", run_dir, "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    after = notes(tmp_path)
    assert after.count("three words") == 1  # recorded before the kill: not called again
    assert after.count("second") == 2
    verified = run(tmp_path, "verify", run_dir)
    assert verified.returncode == 0 and "intact" in verified.stdout, verified.stdout


def test_an_unknown_tool_is_a_configuration_error_with_close_names(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(
        """
[scenario]
name = "bad"
sop = "tool_sop:SOP"
idea = "x"
[[roles]]
name = "Ann"
watch = ["UserRequirement"]
actions = ["Look"]
[actions.Look]
instruction = "Look."
tools = ["py.word_cont", "git.*"]
"""
    )
    checked = run(tmp_path, "validate", path)
    assert checked.returncode == 2
    assert "Ann's action 'Look'" in checked.stderr
    assert "'word_cont'" in checked.stderr and "word_count" in checked.stderr
    path.write_text(path.read_text().replace('"py.word_cont", ', ""))
    checked = run(tmp_path, "validate", path)
    assert checked.returncode == 2 and "unknown tool source 'git'" in checked.stderr
