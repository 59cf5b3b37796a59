"""A tool loop whose role is hosted by a `sopbus worker` over NATS (issue 27), as a user runs
it: a real nats-server, the worker and the coordinator as subprocesses. The worker runs the
role's Python tools (from the module it imports) and a paid MCP server (the registry's
``mcp-server-time``, started on the worker); each model call and the paid call is reserved
through the run's shared account; the coordinator's recording has every tool call, so the
run verifies and replays at $0 without any tool."""

from __future__ import annotations

import json
import os
from decimal import Decimal
from pathlib import Path
from typing import Any

from sopbus.bus import LedgerLine, read_jsonl
from support.cli import sopbus, start
from support.nats_server import NatsServer, server_env
from support.paths import DATA
from support.tool_runs import PARIS, time_server

TEAM = DATA / "tool_team"
FIXTURES = (
    """# SIMULATED OUTPUT: canned answers for sopbus's sim provider.
simulated = true
[[fixture]]
action = "SummarizeNotes"
responses = [
  { tool_calls = [
      { name = "py.word_count", arguments = { text = "green tea guide" } },
      { name = "py.append_note", arguments = { note = "three words" } },
  ] },
  { summary = "A guide of three words.", words = 3 },
]
"""
    + PARIS
)
SCENARIO = """
[scenario]
name = "remote-tools"
sop = "tool_sop:SOP"
idea = "green tea guide"
[run]
runs_dir = "runs"
budget_usd = 0.01
[llm]
fixtures = ["fixtures.toml"]
max_tokens = 200
[mcp.time]
command = "{command}"
price_per_call = 0.001
[[roles]]
name = "Clock"
watch = ["UserRequirement"]
actions = ["TellTime"]
[actions.TellTime]
instruction = "Say what time it is."
output = {{ answer = "str" }}
tools = ["time.*"]
"""


def env(notes: Path) -> dict[str, str]:
    return {**server_env(), "PYTHONPATH": str(TEAM), "TOOL_NOTES": str(notes)}


def test_a_tool_loop_on_a_worker_is_paid_recorded_and_replays(
    shared_nats_server: NatsServer, tmp_path: Path
) -> None:
    (tmp_path / "fixtures.toml").write_text(FIXTURES)
    path = tmp_path / "tools.toml"
    path.write_text(SCENARIO.format(command=time_server()))
    worker_notes, coordinator_notes = tmp_path / "worker.txt", tmp_path / "coordinator.txt"
    worker = start(
        "worker",
        "--bus",
        shared_nats_server.url,
        "--workdir",
        tmp_path / "w",
        "--id",
        "w-tools",
        cwd=tmp_path,
        env=env(worker_notes),
    )
    try:
        done = sopbus(
            "run",
            path,
            "--quiet",
            "--bus",
            shared_nats_server.url,
            "--remote",
            "Analyst,Clock",
            "--wait-workers",
            "30",
            cwd=tmp_path,
            env=env(coordinator_notes),
            timeout=120,
        )
    finally:
        worker.kill()
        worker.communicate()
    assert done.returncode == 0, done.stdout + done.stderr
    # The tools ran on the worker, once each; nothing ran them in the coordinator.
    assert worker_notes.read_text() == "three words\n"
    assert not coordinator_notes.exists()
    (run_dir,) = (tmp_path / "runs").iterdir()
    check_recording(run_dir)

    no_tools = {**env(coordinator_notes), "PATH": os.defpath}  # no server to start, none started
    replayed = sopbus("replay", run_dir, "--quiet", cwd=tmp_path, env=no_tools)
    assert replayed.returncode == 0, replayed.stderr
    replay_dir = next(p for p in (tmp_path / "runs").iterdir() if p != run_dir)
    again = list(read_jsonl(replay_dir / "costs.jsonl", LedgerLine))
    assert sum(line.cost_usd for line in again) == 0
    assert {line.provider for line in again} == {"replay"}  # no tool was called, nor paid
    assert worker_notes.read_text() == "three words\n"
    assert not coordinator_notes.exists()
    verified = sopbus("verify", run_dir, cwd=tmp_path, env=no_tools)
    assert verified.returncode == 0 and verified.stdout.strip().endswith("intact"), verified.stdout


def check_recording(run_dir: Path) -> None:
    lines = list(read_jsonl(run_dir / "costs.jsonl", LedgerLine))
    (paid,) = [line for line in lines if line.provider == "tool"]
    assert (paid.model, paid.cost_usd, paid.role, paid.outcome) == (
        "time.get_current_time",
        Decimal("0.001"),
        "Clock",
        "ok",
    )
    total = sum(line.cost_usd for line in lines)
    assert total <= Decimal("0.01")
    summary = json.loads((run_dir / "summary.json").read_text())
    assert Decimal(str(summary["total_usd"])) == total
    assert summary["llm_calls"] == len(lines) - 1 == 4  # two steps of two loops; not the tool
    recording = [json.loads(x) for x in (run_dir / "calls.jsonl").read_text().splitlines()]
    tools = {r["call"]["name"]: r for r in recording if r.get("kind") == "tool"}
    assert sorted(tools) == ["py.append_note", "py.word_count", "time.get_current_time"]
    assert tools["py.word_count"]["output"]["text"] == "3"
    timed = tools["time.get_current_time"]
    assert json.loads(timed["output"]["text"])["timezone"] == "Europe/Paris"
    assert timed["ledger"]["seq"] == paid.seq  # the run's numbering, not the worker's
    events: list[dict[str, Any]] = list(read_jsonl(run_dir / "events.jsonl", dict))
    held = [e for e in events if e["kind"] == "llm_reserved" and e["data"].get("provider")]
    assert [e["data"]["call"] for e in held] == [timed["reservation"]]
    called = [e for e in events if e["kind"] == "tool_called"]
    assert sorted(e["data"]["tool"] for e in called) == [
        "append_note",
        "get_current_time",
        "word_count",
    ]
    assert not [e for e in events if e["kind"] == "turn_failed"]
