"""A small run with real tool calls, for the tests of what reads a run (report, OTel): the
simulator asks the registry's ``mcp-server-time`` (started for real, paid per call) for two
times at once, one of them in a zone that does not exist, so the run holds a good tool
call and one whose result is an error; then it answers."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from sopbus._assemble import execute
from sopbus.bus import load_scenario

FIXTURES = """# SIMULATED OUTPUT: canned answers for sopbus's sim provider.
simulated = true
[[fixture]]
action = "TellTime"
responses = [
  { tool_calls = [
    { name = "time.get_current_time", arguments = { timezone = "Europe/Paris" } },
    { name = "time.get_current_time", arguments = { timezone = "Mars/Olympus_Mons" } },
  ] },
  { answer = "It is noon in Paris; Mars has no time zone." },
]
"""
SCENARIO = """
[scenario]
name = "clock"
idea = "What time is it in Paris, and on Mars?"
[run]
runs_dir = "{runs}"
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
tools = ["time.*"]
"""
PRICE = "0.001"
PARIS = """
[[fixture]]
action = "TellTime"
responses = [
  { tool_calls = [{ name = "time.get_current_time", arguments = { timezone = "Europe/Paris" } }] },
  { answer = "It is noon in Paris." },
]
"""
"""A fixture: the clock asks the time in Paris once, then answers (the CLI tests' loop)."""
PARIS_FIXTURES = (
    "# SIMULATED OUTPUT: canned answers for sopbus's sim provider.\nsimulated = true\n" + PARIS
)


def time_server() -> str:
    """The path of ``mcp-server-time`` (beside the interpreter, or on PATH), else a skip."""
    beside = Path(sys.executable).parent / "mcp-server-time"
    found = str(beside) if beside.exists() else shutil.which("mcp-server-time")
    if found is None:
        pytest.skip("mcp-server-time is not installed: pip install -e '.[test]'")
    return found


async def tool_run(tmp: Path) -> Path:
    """Runs the clock scenario in ``tmp`` and returns its run directory."""
    (tmp / "fixtures.toml").write_text(FIXTURES, encoding="utf-8")
    path = tmp / "clock.toml"
    path.write_text(SCENARIO.format(command=time_server(), runs=tmp / "runs"), encoding="utf-8")
    outcome = await execute(load_scenario(path))
    assert outcome.summary.status == "completed", outcome.summary
    return outcome.run_dir
