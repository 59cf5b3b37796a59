"""A client session with ``sopbus mcp`` as an IDE agent has one: the real command in a
subprocess, spoken to over stdio by the SDK's own client."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.types import CallToolResult, InitializeResult

from support.cli import ARGV


class Server:
    """A connected session with ``sopbus mcp``, and what it wrote to stderr."""

    info: InitializeResult  # what the server said of itself when the session began

    def __init__(self, session: ClientSession, stderr: Path, stray: list[object]):
        self.session, self.stderr, self.stray = session, stderr, stray

    async def call(self, tool: str, **arguments: Any) -> CallToolResult:
        result = await self.session.call_tool(tool, arguments)
        assert isinstance(result, CallToolResult)
        return result

    async def data(self, tool: str, **arguments: Any) -> dict[str, Any]:
        """The tool's structured result; the test fails on a tool error."""
        result = await self.call(tool, **arguments)
        assert not result.is_error, text(result)
        assert result.structured_content is not None
        return result.structured_content

    async def error(self, tool: str, **arguments: Any) -> str:
        """The text of the tool error the call must come back with."""
        result = await self.call(tool, **arguments)
        assert result.is_error, result.structured_content
        return text(result)


def text(result: CallToolResult) -> str:
    return " ".join(getattr(block, "text", "") for block in result.content)


@asynccontextmanager
async def served(cwd: Path, *flags: str) -> AsyncIterator[Server]:
    """``sopbus mcp FLAGS`` started in ``cwd`` (runs under ``cwd/runs``), initialized."""
    stderr = cwd / "server-stderr.txt"
    stray: list[object] = []  # whatever came on stdout that was not a protocol message

    async def on_message(message: object) -> None:
        if isinstance(message, Exception):
            stray.append(message)

    params = StdioServerParameters(
        command=ARGV[0], args=[*ARGV[1:], "mcp", "--runs-dir", "runs", *flags], cwd=cwd
    )
    with trio.fail_after(60), open(stderr, "w", encoding="utf-8") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write, message_handler=on_message) as session,
        ):
            server = Server(session, stderr, stray)
            server.info = await session.initialize()
            yield server
