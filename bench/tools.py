"""The round trip of one MCP tool call through sopbus's client (bus/llm/_mcp.py).

Starts real servers: ``mcp-server-time`` over stdio (``get_current_time``), the tests'
SDK-built helper (tests/support/mcp_tool_server.py) over stdio (``echo``) and over
streamable HTTP (``echo``), and times N calls of each after a warm-up: min, median, max in
milliseconds. ``--big`` also times one result of that many characters over stdio and over
HTTP (the reading of a long line, bus/llm/_mcp_stdio.py over stdio, and the cut), with
the process's peak memory.

    python bench/tools.py [--calls N] [--big CHARS]
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import trio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout, uninstalled

from sopbus.bus.llm._mcp import open_mcp_servers  # noqa: E402
from sopbus.bus.llm._tools import McpServer, ToolSource  # noqa: E402

HELPER = ROOT / "tests" / "support" / "mcp_tool_server.py"


def _time_server() -> str:
    beside = Path(sys.executable).with_name("mcp-server-time")
    found = str(beside) if beside.exists() else shutil.which("mcp-server-time")
    if found is None:
        raise SystemExit("no mcp-server-time: pip install -e '.[test]'")
    return found


async def _round_trips(
    source: ToolSource, tool: str, arguments: dict[str, str], calls: int
) -> list[float]:
    await source.call(tool, arguments)  # warm-up
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        await source.call(tool, arguments)
        times.append((time.perf_counter() - start) * 1000)
    return times


def _row(label: str, times: list[float]) -> None:
    print(f"{label:<34} {min(times):8.3f} {statistics.median(times):8.3f} {max(times):8.3f}")


async def main(calls: int, big: int, url: str) -> None:
    servers = {
        "time": McpServer(command=_time_server()),
        "helper": McpServer(command=sys.executable, args=[str(HELPER), "stdio"]),
        "web": McpServer(url=url),
    }
    async with open_mcp_servers(servers, cwd=ROOT) as [clock, helper, web]:
        print(
            f"{'one tool call, ms (N=' + str(calls) + ')':<34} {'min':>8} {'median':>8} {'max':>8}"
        )
        _row(
            "stdio mcp-server-time",
            await _round_trips(clock, "get_current_time", {"timezone": "UTC"}, calls),
        )
        _row("stdio helper echo", await _round_trips(helper, "echo", {"text": "hi"}, calls))
        _row("http helper echo", await _round_trips(web, "echo", {"text": "hi"}, calls))
        for label, source in (("stdio", helper), ("http", web)):
            if big:
                start = time.perf_counter()
                output = await source.call("big", {"chars": str(big)})
                took = time.perf_counter() - start
                peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
                print(
                    f"{label} result of {big:,} chars: {took:.2f} s, cut={output.cut}, "
                    f"peak memory of this process {peak:.0f} MB"
                )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument(
        "--big", type=int, default=0, help="also time one result of this many characters"
    )
    options = parser.parse_args()
    server = subprocess.Popen(
        [sys.executable, str(HELPER), "http"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline().removeprefix("port="))
        trio.run(main, options.calls, options.big, f"http://127.0.0.1:{port}/mcp")
    finally:
        server.terminate()
        server.wait(timeout=10)
