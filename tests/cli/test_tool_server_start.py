"""A tool server that cannot start, by the CLI as a user meets it: a server that cannot be
launched as configured (its command not found, its cwd not a folder, an ``env`` variable
unset) is a configuration error, exit 2 before any run directory is made (``validate``
too); one that starts and fails (exits at once, never finishes the handshake) ends the run
failed (exit 1) with a summary naming the server, without a traceback. A bare command is
found next to sopbus's Python when it is not on PATH (a venv used without activating it)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from support.cli import sopbus
from support.tool_runs import PARIS_FIXTURES, time_server
from support.venvs import bare_venv

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
{server}
[[roles]]
name = "Clock"
watch = ["UserRequirement"]
actions = ["TellTime"]
[actions.TellTime]
instruction = "Say what time it is."
output = {{ answer = "str" }}
tools = ["time.*"]
"""


def scenario(tmp_path: Path, server: str) -> Path:
    (tmp_path / "fixtures.toml").write_text(FIXTURES)
    path = tmp_path / "clock.toml"
    path.write_text(SCENARIO.format(server=server))
    return path


@pytest.mark.parametrize(
    ("server", "said"),
    [
        ('command = "no-such-mcp-server"', "'no-such-mcp-server' not found on the PATH"),
        ('command = "true"\ncwd = "missing"', "is not a folder; fix [mcp.time].cwd"),
        ('command = "true"\nenv = ["SOPBUS_TEST_UNSET"]', "SOPBUS_TEST_UNSET, not set"),
    ],
)
def test_a_server_that_cannot_be_launched_is_exit_2_before_the_run(
    tmp_path: Path, server: str, said: str
) -> None:
    path = scenario(tmp_path, server)
    for command in ("run", "validate"):
        done = sopbus(command, path, "--quiet" if command == "run" else "--mermaid", cwd=tmp_path)
        assert done.returncode == 2, done.stderr
        assert "tool server 'time'" in done.stderr and said in done.stderr, done.stderr
        assert str(path) in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "runs").exists()  # nothing was started, nothing left behind


@pytest.mark.parametrize(
    ("server", "said"),
    [
        ('command = "false"', "'false' did not start"),
        (
            'command = "sleep"\nargs = ["30"]\nstartup_timeout_s = 0.5',
            "within 0.5 s; raise [mcp.time].startup_timeout_s",
        ),
    ],
)
def test_a_server_that_fails_at_start_fails_the_run_cleanly(
    tmp_path: Path, server: str, said: str
) -> None:
    path = scenario(tmp_path, server)
    done = sopbus("run", path, "--quiet", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr and said in done.stderr, done.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert (summary["status"], summary["end_reason"]) == ("failed", "error")
    assert "tool server 'time'" in summary["detail"] and said in summary["detail"]
    assert summary["total_usd"] in ("0", 0)
    events: list[dict[str, Any]] = [
        json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()
    ]
    assert events[0]["kind"] == "run_started"
    assert events[-1]["kind"] == "run_ended" and said in events[-1]["detail"]
    assert (run_dir / "scenario.toml").is_file()
    verified = sopbus("verify", run_dir, cwd=tmp_path)  # nothing it wrote is lost or altered
    assert verified.returncode == 0 and "NOT intact" not in verified.stdout, verified.stdout

    checked = sopbus("validate", path, cwd=tmp_path)
    assert checked.returncode == 1, checked.stderr
    assert said in checked.stderr and "Traceback" not in checked.stderr


def test_a_bare_command_is_found_next_to_sopbus_python_without_path(tmp_path: Path) -> None:
    """A venv used without activating it: ``venv/bin/python -m sopbus`` with a PATH that
    does not name venv/bin finds ``mcp-server-time`` in venv/bin."""
    python = bare_venv(tmp_path / "venv", time_server())
    path = scenario(tmp_path, 'command = "mcp-server-time"')
    env = {**os.environ, "PATH": os.defpath}
    assert shutil.which("mcp-server-time", path=os.defpath) is None
    done = subprocess.run(
        [python, "-m", "sopbus", "run", path, "--quiet"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    recording = (run_dir / "calls.jsonl").read_text()
    assert "Europe/Paris" in recording and '"kind":"tool"' in recording
