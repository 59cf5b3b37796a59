"""The MCP client against real servers the tests start: the registry's ``mcp-server-time``
and ``mcp-server-git`` over stdio, and the SDK-built helper (``support/mcp_tool_server.py``)
over stdio and streamable HTTP."""

from __future__ import annotations

import json
import os
import resource
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


def helper(case: str = "ok", mode: str = "stdio", **table: object) -> McpServer:
    return McpServer(command=sys.executable, args=[str(HELPER), mode, case], **table)  # type: ignore[arg-type]


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


async def test_results_as_text_for_the_model(tmp_path: Path) -> None:
    async with open_mcp_servers({"t": helper(max_result_chars=1000)}, cwd=tmp_path) as [tools]:
        echoed = await tools.call("echo", {"text": "hello"})
        failed = await tools.call("fail", {})
        picture = await tools.call("picture", {})
        structured = await tools.call("structured", {})
        cut = await tools.call("big", {"chars": 1500})
    assert (echoed.text, echoed.is_error, echoed.chars) == ("hello", False, 5)
    assert (failed.text, failed.is_error) == ("no such branch", True)
    assert picture.text.startswith("see the picture\n[image: image/png, 900 bytes, not shown]")
    assert "iVBOR" not in picture.text
    assert "[resource link: file:///tmp/report.txt (report)]" in picture.text
    assert json.loads(structured.text) == {"answer": 42}
    assert cut.cut and cut.chars == 1500
    assert cut.text == "x" * 1000 + "\n[cut: 500 more characters of 1500 left out]"


# About 1.5 s on 2 cores since sopbus reads stdio itself (bus/llm/_mcp_stdio.py) in time
# linear in a line's length; the SDK's reader took 24 to 53 s. bench/tools.py measures it.
async def test_a_50_mb_result_is_cut_and_the_server_goes_on(tmp_path: Path) -> None:
    size = 50_000_000
    async with open_mcp_servers({"t": helper()}, cwd=tmp_path) as [tools]:
        huge = await tools.call("big", {"chars": size})
        after = await tools.call("echo", {"text": "still here"})
    assert huge.cut and huge.chars == size
    assert len(huge.text) < 20_100
    assert huge.text.endswith(f"[cut: {size - 20_000} more characters of {size} left out]")
    assert after.text == "still here"
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    assert peak_mb < 1500, f"peak memory {peak_mb:.0f} MB for one 50 MB result"


@pytest.mark.parametrize(
    ("case", "says"),
    [
        ("many", r"lists at least 10000 tools; sopbus takes at most 512"),
        ("bad-schema", r"input schema of tool 'broken' is not a valid JSON schema at properties"),
        ("bad-name", r"tool name 'rm -rf /' cannot be a function name"),
        ("long-name", r"tool name 'x{80}' cannot be a function name"),
        ("duplicate", r"lists the tool 'echo' twice"),
    ],
)
async def test_a_hostile_tool_list_is_a_clear_error(tmp_path: Path, case: str, says: str) -> None:
    with pytest.raises(ToolServerError, match=says) as caught:
        async with open_mcp_servers({"evil": helper(case)}, cwd=tmp_path):
            pytest.fail("a hostile tool list was taken")
    assert caught.value.server == "evil"


@pytest.mark.parametrize("case", ["array-schema", "text-schema"])
async def test_a_schema_that_is_not_an_object_is_a_clear_error(tmp_path: Path, case: str) -> None:
    # The SDK's own types already refuse such a list; the error says where.
    with pytest.raises(
        ToolServerError, match=r"did not start: its answer is not valid MCP at tools.0.inputSchema"
    ):
        async with open_mcp_servers({"evil": helper(case, mode="raw")}, cwd=tmp_path):
            pytest.fail("a hostile tool list was taken")


async def test_a_full_name_longer_than_a_function_name_is_refused(tmp_path: Path) -> None:
    name = "s" * 60
    with pytest.raises(
        ToolServerError, match=r"longer than 64 characters; give the server a shorter name"
    ):
        async with open_mcp_servers({name: helper()}, cwd=tmp_path):
            pass


async def test_a_server_that_exits_at_start_is_quoted(tmp_path: Path) -> None:
    with pytest.raises(ToolServerError) as caught:
        async with open_mcp_servers({"t": helper("exit-at-start")}, cwd=tmp_path):
            pass
    message = str(caught.value)
    assert message.startswith("tool server 't': ")
    assert "did not start" in message
    assert "fatal: the config file /nowhere/tools.toml does not exist" in message


async def test_a_command_not_on_the_path_says_where_it_was_looked_up(tmp_path: Path) -> None:
    server = McpServer(command="sopbus-no-such-mcp-server")
    with pytest.raises(
        ToolServerError, match=r"'sopbus-no-such-mcp-server' not found on the PATH of the server's"
    ):
        async with open_mcp_servers({"t": server}, cwd=tmp_path):
            pass


async def test_a_silent_server_times_out_naming_the_knob(tmp_path: Path) -> None:
    server = McpServer(
        command=sys.executable, args=["-c", "import time; time.sleep(60)"], startup_timeout_s=0.5
    )
    with pytest.raises(
        ToolServerError, match=r"within 0.5 s; raise \[mcp.slow\].startup_timeout_s"
    ):
        async with open_mcp_servers({"slow": server}, cwd=tmp_path):
            pass


async def test_several_failing_servers_are_each_named(tmp_path: Path) -> None:
    servers = {
        "ok": helper(),
        "gone": helper("exit-at-start"),
        "nowhere": McpServer(command="sopbus-no-such"),
    }
    with pytest.raises(ToolServerError) as caught:
        async with open_mcp_servers(servers, cwd=tmp_path):
            pass
    message = str(caught.value)
    assert "2 tool servers failed to start" in message
    assert "tool server 'gone': " in message and "fatal: the config file" in message
    assert "tool server 'nowhere': command 'sopbus-no-such' not found" in message
    assert "'ok'" not in message


async def test_a_hanging_call_times_out_naming_the_knob(tmp_path: Path) -> None:
    async with open_mcp_servers({"t": helper(call_timeout_s=0.5)}, cwd=tmp_path) as [tools]:
        with pytest.raises(
            ToolServerError, match=r"did not answer within 0.5 s; raise \[mcp.t\].call_timeout_s"
        ):
            await tools.call("hang", {})
        assert (await tools.call("echo", {"text": "next"})).text == "next"


async def test_a_server_that_crashes_mid_call_is_a_clear_error(tmp_path: Path) -> None:
    async with open_mcp_servers({"t": helper()}, cwd=tmp_path) as [tools]:
        pid = int((await tools.call("pid", {})).text)
        with pytest.raises(ToolServerError) as caught:
            await tools.call("crash", {})
        with pytest.raises(ToolServerError):
            await tools.call("echo", {"text": "anyone?"})
    assert "closed during the call of 'crash'" in str(caught.value)
    assert "crash: exiting in the middle of a call" in str(caught.value)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_the_bodys_own_error_comes_out_as_itself(tmp_path: Path) -> None:
    with pytest.raises(KeyError, match="from the run"):
        async with open_mcp_servers({"t": helper()}, cwd=tmp_path):
            raise KeyError("from the run")


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    """The helper over streamable HTTP on a free port; it prints the port once it listens."""
    server = subprocess.Popen(
        [sys.executable, str(HELPER), "http"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert server.stdout is not None
    line = server.stdout.readline()
    assert line.startswith("port="), line
    yield f"http://127.0.0.1:{int(line.removeprefix('port='))}/mcp"
    server.terminate()
    server.wait(timeout=10)
    server.stdout.close()


async def test_a_streamable_http_server(tmp_path: Path, http_url: str) -> None:
    server = McpServer(url=http_url, headers={"X-Sopbus-Test": "yes"}, max_result_chars=100)
    async with open_mcp_servers({"web": server}, cwd=tmp_path) as [web]:
        assert "echo" in {spec.name for spec in web.specs()}
        assert (await web.call("echo", {"text": "over http"})).text == "over http"
        big = await web.call("big", {"chars": 1000})
    assert big.cut and big.chars == 1000


async def test_a_url_where_nothing_listens(tmp_path: Path) -> None:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = McpServer(url=f"http://127.0.0.1:{port}/mcp", startup_timeout_s=10)
    with pytest.raises(ToolServerError, match=r"connection refused"):
        async with open_mcp_servers({"web": server}, cwd=tmp_path):
            pass


async def test_a_url_that_answers_something_else(tmp_path: Path) -> None:
    import http.server
    import threading

    class NotMcp(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = b"<html>a web page</html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), NotMcp) as page:
        threading.Thread(target=page.serve_forever, daemon=True).start()
        server = McpServer(url=f"http://127.0.0.1:{page.server_address[1]}/", startup_timeout_s=10)
        try:
            with pytest.raises(
                ToolServerError, match=r"could not start a session with http://127.0.0.1"
            ) as caught:
                async with open_mcp_servers({"web": server}, cwd=tmp_path):
                    pass
        finally:
            page.shutdown()
    print(caught.value)
