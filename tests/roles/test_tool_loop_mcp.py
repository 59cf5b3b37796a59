"""The tool loop against a real MCP server (the registry's ``mcp-server-time``), run by the
CLI: the simulator asks for ``time.get_current_time`` from a fixture, the server answers,
the call is paid and ledgered; ``replay`` reproduces the run at $0 without the server (it
is not even on PATH then); ``verify`` is intact; ``validate`` starts the server to check the
tool names and says the close one."""

from __future__ import annotations

import json
import os
from decimal import Decimal
from pathlib import Path

from sopbus.bus import LedgerLine, read_jsonl
from support.cli import sopbus
from support.openai_server import Answer, OpenAIServer
from support.tool_runs import PARIS_FIXTURES, time_server

FIXTURES = PARIS_FIXTURES
SCENARIO = """
[scenario]
name = "clock"
idea = "What time is it in Paris?"
[run]
runs_dir = "runs"
budget_usd = 0.5
[llm]
fixtures = ["fixtures.toml"]
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
tools = ["{tools}"]
"""


def test_a_real_mcp_tool_runs_is_paid_and_replays_without_its_server(tmp_path: Path) -> None:
    (tmp_path / "fixtures.toml").write_text(FIXTURES)
    path = tmp_path / "clock.toml"
    path.write_text(SCENARIO.format(command=time_server(), tools="time.*"))
    done = sopbus("run", path, "--quiet", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    lines = list(read_jsonl(run_dir / "costs.jsonl", LedgerLine))
    tool_lines = [line for line in lines if line.provider == "tool"]
    assert [(t.model, t.cost_usd, t.role, t.action) for t in tool_lines] == [
        ("time.get_current_time", Decimal("0.001"), "Clock", "TellTime")
    ]
    recording = [json.loads(x) for x in (run_dir / "calls.jsonl").read_text().splitlines()]
    (result,) = [r for r in recording if r.get("kind") == "tool"]
    assert json.loads(result["output"]["text"])["timezone"] == "Europe/Paris"
    costs = sopbus("costs", run_dir, "--json", cwd=tmp_path)
    assert "time.get_current_time" in costs.stdout

    # Without the server on PATH or at its path, a replay that started it would fail.
    path.write_text(SCENARIO.format(command="/nonexistent/mcp-server-time", tools="time.*"))
    env = {"PATH": os.defpath}
    replayed = sopbus("replay", run_dir, "--quiet", cwd=tmp_path, env=env)
    assert replayed.returncode == 0, replayed.stderr
    replay_dir = next(p for p in (tmp_path / "runs").iterdir() if p != run_dir)
    again = list(read_jsonl(replay_dir / "costs.jsonl", LedgerLine))
    assert sum(line.cost_usd for line in again) == 0
    assert [line.provider for line in again] == ["replay", "replay"]  # no tool line
    verified = sopbus("verify", run_dir, cwd=tmp_path)
    assert verified.returncode == 0 and verified.stdout.strip().endswith("intact")

    path.write_text(SCENARIO.format(command=time_server(), tools="time.get_curent_time"))
    checked = sopbus("validate", path, cwd=tmp_path)
    assert checked.returncode == 2
    assert "'get_curent_time'" in checked.stderr and "get_current_time" in checked.stderr


def test_tool_choice_required_holds_until_the_first_results_then_the_model_may_answer(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    openai_server.script(
        Answer("", tool_calls=(("c1", "time__get_current_time", '{"timezone": "Asia/Tokyo"}'),)),
        Answer('{"answer": "It is noon in Tokyo."}'),
    )
    path = tmp_path / "clock.toml"
    text = SCENARIO.format(command=time_server(), tools="time.*").replace(
        'tools = ["time.*"]', 'tools = ["time.*"]\ntool_choice = "required"'
    )
    path.write_text(text.replace('fixtures = ["fixtures.toml"]', ""))
    done = sopbus(
        "run", path, "--provider", "openai", "--base-url", openai_server.base_url,
        "--model", "gpt-4o-mini", "--quiet", cwd=tmp_path, env={"OPENAI_API_KEY": "sk-test"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    first, second = (r.body for r in openai_server.requests)
    assert first["tool_choice"] == "required"
    assert "tool_choice" not in second and second["tools"] == first["tools"]
    assert second["messages"][-1]["role"] == "tool"
    (run_dir,) = (tmp_path / "runs").iterdir()
    (called,) = [e for e in read_jsonl(run_dir / "events.jsonl") if e["kind"] == "tool_called"]
    assert called["data"]["error"] is None  # the real server answered the call

    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace('"required"', '"always"'))
    refused = sopbus("validate", bad, cwd=tmp_path)
    assert refused.returncode == 2
    assert "tool_choice" in refused.stderr and "bad.toml" in refused.stderr


def test_a_paid_tool_call_in_flight_at_kill_is_counted_lost_and_called_again(
    tmp_path: Path,
) -> None:
    """The rule: a paid call whose reservation is written but whose result is not may have
    been billed, so a resume ledgers it ``lost`` at its price and calls the tool again (paid
    again): spend is never undercounted, and the loop gets a real result."""
    (tmp_path / "fixtures.toml").write_text(FIXTURES)
    path = tmp_path / "clock.toml"
    path.write_text(SCENARIO.format(command=time_server(), tools="time.*"))
    killed = sopbus("run", path, "--quiet", cwd=tmp_path, env={"SOPBUS_KILL_AT": "tool:reserved"})
    assert killed.returncode == -9, killed.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    reserved = [
        e for e in read_jsonl(run_dir / "events.jsonl", dict) if e["kind"] == "llm_reserved"
    ]
    assert reserved[-1]["data"]["provider"] == "tool"
    resumed = sopbus("resume", run_dir, "--quiet", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    lines = list(read_jsonl(run_dir / "costs.jsonl", LedgerLine))
    tool_lines = [(t.outcome, t.model, t.cost_usd) for t in lines if t.provider == "tool"]
    assert tool_lines == [
        ("lost", "time.get_current_time", Decimal("0.001")),
        ("ok", "time.get_current_time", Decimal("0.001")),
    ]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert Decimal(str(summary["total_usd"])) == sum(line.cost_usd for line in lines)
    assert summary["llm_calls"] == sum(1 for t in lines if t.provider != "tool")
    again = sopbus("resume", run_dir, "--quiet", cwd=tmp_path)  # complete: nothing more is lost
    assert again.returncode == 0 and "is complete" in again.stderr, again.stderr
    assert list(read_jsonl(run_dir / "costs.jsonl", LedgerLine)) == lines
