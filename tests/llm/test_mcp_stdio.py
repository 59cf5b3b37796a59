"""sopbus's stdio transport for MCP servers (bus/llm/_mcp_stdio.py): its line splitter on
any cut of a byte stream, and against real server processes: lines that are no message,
characters split across reads, a server that writes one endless line (stopped at the cap,
the call failing with the cap's name), and a caller cancelled mid-call."""

from __future__ import annotations

import itertools
import os
import sys

import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from sopbus.bus import ToolServerError
from sopbus.bus.llm._mcp import open_mcp_servers
from sopbus.bus.llm._mcp_stdio import MAX_MESSAGE_BYTES, Lines, LineTooLong, size_text
from sopbus.bus.llm._tools import McpServer
from support.paths import ROOT

HELPER = ROOT / "tests" / "support" / "mcp_tool_server.py"

_LINE = st.binary(max_size=40).map(lambda line: line.replace(b"\n", b""))


@given(lines=st.lists(_LINE, max_size=30), cuts=st.lists(st.integers(0, 1300), max_size=12))
def test_lines_are_the_streams_lines_however_it_is_cut(lines: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(line + b"\n" for line in lines) + b"unfinished"
    bounds = sorted({0, len(stream), *(cut for cut in cuts if cut < len(stream))})
    splitter = Lines(cap=1000)
    seen = [
        line
        for start, end in itertools.pairwise(bounds)
        for line in splitter.feed(stream[start:end])
    ]
    assert seen == lines


def test_a_line_may_be_as_long_as_the_cap_not_longer() -> None:
    splitter = Lines(cap=10)
    assert list(splitter.feed(b"0123456789\nshort\n0123")) == [b"0123456789", b"short"]
    with pytest.raises(LineTooLong) as caught:
        list(splitter.feed(b"4567"))  # 8 bytes so far: still waiting
        list(splitter.feed(b"89X"))
    assert (caught.value.size, caught.value.cap) == (11, 10)


def test_the_lines_before_a_line_over_the_cap_come_out_first() -> None:
    splitter = Lines(cap=4)
    seen = []
    with pytest.raises(LineTooLong):
        for line in splitter.feed(b"ab\ncd\nefghij\n"):
            seen.append(line)
    assert seen == [b"ab", b"cd"]


def test_sizes_read_as_people_say_them() -> None:
    assert size_text(MAX_MESSAGE_BYTES) == "64 MiB"
    assert size_text(1500) == "1,500 bytes"


def raw(case: str, **table: object) -> McpServer:
    return McpServer(command=sys.executable, args=[str(HELPER), "raw", case], **table)  # type: ignore[arg-type]


async def test_lines_that_are_no_message_are_passed_over() -> None:
    async with open_mcp_servers({"n": raw("noisy")}, cwd=ROOT) as [noisy]:
        first = await noisy.call("echo", {"text": "one"})
        second = await noisy.call("echo", {"text": "two"})
    assert (first.text, first.is_error, second.text) == ("one", False, "two")


async def test_characters_split_across_reads_come_out_whole() -> None:
    text = "é€😀" * 60_000  # 540,000 bytes: many reads, cut inside characters
    server = McpServer(
        command=sys.executable, args=[str(HELPER), "stdio"], max_result_chars=len(text)
    )
    async with open_mcp_servers({"t": server}, cwd=ROOT) as [tools]:
        echoed = await tools.call("echo", {"text": text})
    assert echoed.text == text and not echoed.cut


async def test_an_endless_line_is_stopped_at_the_cap_and_names_it() -> None:
    with trio.fail_after(60):  # a guard against a hang, far above the few seconds it takes
        async with open_mcp_servers({"flood": raw("flood")}, cwd=ROOT) as [flood]:
            pid = int((await flood.call("pid", {})).text)
            with pytest.raises(ToolServerError) as caught:
                await flood.call("flood", {})
            with pytest.raises(ToolServerError) as after:
                await flood.call("pid", {})
    message = str(caught.value)
    assert message.startswith("tool server 'flood': during the call: it sent one message")
    assert "more than 64 MiB (the cap on one message from a stdio server)" in message
    assert "sopbus ended its session and stopped it" in message
    assert str(after.value) == message
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_a_caller_cancelled_mid_call_leaves_no_server() -> None:
    server = McpServer(command=sys.executable, args=[str(HELPER), "stdio"])
    with trio.move_on_after(30) as scope:  # the guard; the cancel below comes first
        async with open_mcp_servers({"t": server}, cwd=ROOT) as [tools]:
            pid = int((await tools.call("pid", {})).text)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(tools.call, "hang", {})
                await trio.testing.wait_all_tasks_blocked()  # the call waits on the server
                scope.cancel()
    assert scope.cancelled_caught
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
