"""The MCP client against real servers the tests start: the registry's ``mcp-server-time``
and ``mcp-server-git`` over stdio, and the SDK-built helper (``support/mcp_tool_server.py``)
over stdio and streamable HTTP."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from sopbus.bus import ToolServerError
from sopbus.bus.llm._mcp import open_mcp_servers
from sopbus.bus.llm._tools import McpServer
from support.paths import ROOT

HELPER = ROOT / "tests" / "support" / "mcp_tool_server.py"


def installed(program: str) -> str:
    """The registry server's executable, next to the tests' Python or on PATH."""
    beside = Path(sys.executable).parent / program
    found = str(beside) if beside.exists() else shutil.which(program)
    if found is None:
        pytest.skip(f"{program} is not installed: pip install -e '.[test]'")
    return found


def helper(case: str = "ok", **table: object) -> McpServer:
    return McpServer(command=sys.executable, args=[str(HELPER), "stdio", case], **table)  # type: ignore[arg-type]


async def test_time_server_lists_its_tools_and_tells_the_time(tmp_path: Path) -> None:
    servers = {"time": McpServer(command=installed("mcp-server-time"))}
    async with open_mcp_servers(servers, cwd=tmp_path, errlog_dir=tmp_path / "logs") as sources:
        [time] = sources
        assert time.name == "time"
        specs = {spec.name: spec for spec in time.specs()}
        assert set(specs) == {"get_current_time", "convert_time"}
        assert specs["get_current_time"].parameters["type"] == "object"
        assert "timezone" in specs["get_current_time"].parameters["properties"]
        assert specs["get_current_time"].description
        output = await time.call("get_current_time", {"timezone": "UTC"})
    answer = json.loads(output.text)
    assert answer["timezone"] == "UTC"
    assert answer["datetime"].endswith("+00:00")
    assert not output.is_error and not output.cut and output.chars == len(output.text)
    assert (tmp_path / "logs" / "mcp-time.log").exists()


async def test_a_stdio_server_is_gone_when_the_block_ends(tmp_path: Path) -> None:
    async with open_mcp_servers({"t": helper()}, cwd=tmp_path) as [tools]:
        pid = int((await tools.call("pid", {})).text)
        os.kill(pid, 0)  # alive while the block runs
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_servers_start_together_in_the_mappings_order(tmp_path: Path) -> None:
    servers = {"b": helper(), "a": McpServer(command=installed("mcp-server-time")), "c": helper()}
    async with open_mcp_servers(servers, cwd=tmp_path) as sources:
        assert [source.name for source in sources] == ["b", "a", "c"]
        pids = {int((await sources[i].call("pid", {})).text) for i in (0, 2)}
    assert len(pids) == 2


@pytest.fixture
def secret_environment() -> Iterator[None]:
    saved = dict(os.environ)
    os.environ.update(OPENAI_API_KEY="sk-test-not-for-tools", SOPBUS_TOOL_TOKEN="listed-value")
    os.environ.update(SOME_OTHER_SECRET="unlisted")
    yield
    os.environ.clear()
    os.environ.update(saved)


async def test_a_stdio_server_gets_no_api_key_only_the_listed_variables(
    tmp_path: Path, secret_environment: None
) -> None:
    server = helper(env=["SOPBUS_TOOL_TOKEN"])
    async with open_mcp_servers({"t": server}, cwd=tmp_path) as [tools]:
        environment = json.loads((await tools.call("env", {})).text)
    assert "OPENAI_API_KEY" not in environment
    assert "SOME_OTHER_SECRET" not in environment
    assert "sk-test-not-for-tools" not in json.dumps(environment)
    assert environment["SOPBUS_TOOL_TOKEN"] == "listed-value"
    assert environment["PATH"] == os.environ["PATH"]


async def test_a_listed_variable_that_is_not_set_is_a_clear_error(tmp_path: Path) -> None:
    server = helper(env=["SOPBUS_SURELY_NOT_SET_ANYWHERE"])
    with pytest.raises(ToolServerError, match=r"SOPBUS_SURELY_NOT_SET_ANYWHERE, not set") as caught:
        async with open_mcp_servers({"t": server}, cwd=tmp_path):
            pass
    assert caught.value.server == "t"


async def test_the_server_runs_in_its_cwd_relative_to_the_scenario(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    server = helper(cwd="work")
    async with open_mcp_servers({"t": server}, cwd=tmp_path) as [tools]:
        environment = json.loads((await tools.call("env", {})).text)
        pid = int((await tools.call("pid", {})).text)
        assert Path(f"/proc/{pid}/cwd").resolve() == (tmp_path / "work").resolve()
    assert "PWD" not in environment or environment["PWD"] != ""


def git(repo: Path, *args: str) -> None:
    env = {"GIT_AUTHOR_NAME": "A", "GIT_AUTHOR_EMAIL": "a@example.org", "GIT_COMMITTER_NAME": "A"}
    env |= {"GIT_COMMITTER_EMAIL": "a@example.org", "PATH": os.environ["PATH"], "HOME": str(repo)}
    subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)


async def test_git_server_reads_a_repository_the_test_made(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "notes.txt").write_text("first\n")
    git(repo, "add", "notes.txt")
    git(repo, "commit", "-q", "-m", "add the notes of the week")
    (repo / "draft.txt").write_text("not yet added\n")
    server = McpServer(command=installed("mcp-server-git"), args=["--repository", "repo"])
    async with open_mcp_servers({"git": server}, cwd=tmp_path) as [tools]:
        names = {spec.name for spec in tools.specs()}
        assert {"git_log", "git_status", "git_diff"} <= names
        log = await tools.call("git_log", {"repo_path": str(repo)})
        status = await tools.call("git_status", {"repo_path": str(repo)})
    assert "add the notes of the week" in log.text and not log.is_error
    assert "draft.txt" in status.text and not status.is_error
