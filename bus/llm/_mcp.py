"""The MCP client: a run's tool servers, started once, listed, called, and stopped.

The one door to MCP is the official ``mcp`` SDK; it runs on anyio, so it runs under trio.
:func:`open_mcp_servers` starts every ``[mcp.NAME]`` server of a scenario concurrently and
yields one :class:`~sopbus.bus.llm._tools.ToolSource` per server. What a server gives back
is turned into text for the model in :mod:`._mcp_output`; its tool list is checked there
too. A stdio server's pipes are read and written by :mod:`._mcp_stdio`. Every failure of a server is a :class:`sopbus.bus.ToolServerError` naming it.
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any

import pydantic
import trio
from loguru import logger

try:
    import httpx2
    import mcp_types
    from mcp import Client
    from mcp.client import Transport
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.exceptions import MCPError
except ImportError as missing:  # the SDK is the mcp extra
    raise ImportError(
        f"tool servers ([mcp.NAME]) need the MCP SDK: pip install 'sopbus[mcp]' ({missing})"
    ) from None

from .._errors import ToolServerError, exception_leaves
from ._mcp_launch import BASE_ENV as BASE_ENV
from ._mcp_launch import launch
from ._mcp_launch import server_environment as server_environment
from ._mcp_output import MAX_TOOLS, check_tools, cut, stderr_tail, tool_output
from ._mcp_stdio import StdioServerParameters, StdioTransport
from ._tools import McpServer, ToolOutput, ToolSource, ToolSpec

_CONNECTION_LOST = (mcp_types.CONNECTION_CLOSED,)
_TRANSPORT_ERRORS = (
    OSError,
    httpx2.TransportError,
    httpx2.HTTPStatusError,
    trio.BrokenResourceError,
)


@asynccontextmanager
async def open_mcp_servers(
    servers: Mapping[str, McpServer], *, cwd: Path, errlog_dir: Path | None = None
) -> AsyncIterator[list[ToolSource]]:
    """Start the servers (concurrently, once), yield their tool sources in the mapping's
    order, and stop them all (their processes gone) when the block ends.

    A stdio server runs ``command`` with ``args`` in ``cwd`` (its ``cwd``, relative to the
    scenario's folder ``cwd``) with a scrubbed environment (:data:`BASE_ENV` and its
    ``env``); its stderr goes to ``errlog_dir/mcp-NAME.log``, or is discarded when there is
    no ``errlog_dir``. A ``url`` server is reached over streamable HTTP with its
    ``headers``. The handshake and the tool listing are bounded by ``startup_timeout_s``.
    Raises :class:`ToolServerError` when any server fails to start (one error that says
    each failure).
    """
    async with AsyncExitStack() as stack:
        if errlog_dir is None:
            errlog_dir = Path(
                stack.enter_context(tempfile.TemporaryDirectory(prefix="sopbus-mcp-"))
            )
        errlog_dir.mkdir(parents=True, exist_ok=True)
        stop = trio.Event()
        # The body's own error is raised after the nursery, not inside it: a nursery wraps
        # what its body raises in an ExceptionGroup, and the caller wants its BudgetExceeded.
        failure: Exception | None = None
        async with trio.open_nursery() as nursery:
            try:
                sources = await _start_all(nursery, servers, cwd, errlog_dir, stop)
                yield sources
            except Exception as error:
                failure = error
            finally:
                stop.set()
        if failure is not None:
            raise failure


async def _start_all(
    nursery: trio.Nursery,
    servers: Mapping[str, McpServer],
    cwd: Path,
    errlog_dir: Path,
    stop: trio.Event,
) -> list[ToolSource]:
    started: dict[str, ToolSource] = {}
    failed: dict[str, ToolServerError] = {}

    async def start(name: str, server: McpServer) -> None:
        log = errlog_dir / f"mcp-{name}.log"
        try:
            started[name] = await nursery.start(_serve, name, server, cwd, log, stop)
        except ToolServerError as error:
            failed[name] = error

    async with trio.open_nursery() as starting:
        for name, server in servers.items():
            starting.start_soon(start, name, server)
    if failed:
        raise _together([failed[name] for name in servers if name in failed])
    return [started[name] for name in servers]


def _together(failed: list[ToolServerError]) -> ToolServerError:
    if len(failed) == 1:
        return failed[0]
    lines = "\n".join(f"  - {error}" for error in failed)
    names = ", ".join(error.server for error in failed)
    return ToolServerError(names, f"{len(failed)} tool servers failed to start:\n{lines}")


class McpToolSource:
    """One running MCP server as a :class:`ToolSource`: its tools, and calls of them."""

    def __init__(
        self,
        name: str,
        server: McpServer,
        client: Client,
        specs: list[ToolSpec],
        log: Path,
        stdio: StdioTransport | None = None,
    ):
        self.name = name
        self.price_per_call: Decimal | None = server.price_per_call
        self._server = server
        self._client = client
        self._specs = specs
        self._log = log
        self._stdio = stdio

    def specs(self) -> list[ToolSpec]:
        return list(self._specs)

    async def call(self, tool: str, arguments: dict[str, Any]) -> ToolOutput:
        """Call ``tool``; the tool's own failure is an output with ``is_error``, a failure
        of the server (it exited, it timed out, it answered nonsense) a ToolServerError."""
        timeout = self._server.call_timeout_s
        try:
            with trio.move_on_after(timeout) as scope:
                result = await self._client.call_tool(tool, arguments)
        except MCPError as error:
            if error.code in _CONNECTION_LOST:
                raise self._lost(
                    f"the connection closed during the call of {tool!r} (the server exited?)"
                ) from error
            return cut(
                f"MCP error {error.code}: {error.message}",
                self._server.max_result_chars,
                is_error=True,
            )
        except (*_TRANSPORT_ERRORS, pydantic.ValidationError, RuntimeError) as error:
            raise self._lost(f"the call of {tool!r} failed: {error}") from error
        if scope.cancelled_caught:
            raise ToolServerError(
                self.name,
                f"the call of {tool!r} did not answer within {timeout:g} s; "
                f"raise [mcp.{self.name}].call_timeout_s if the tool is slow",
            )
        return tool_output(result, self._server.max_result_chars)

    def _lost(self, what: str) -> ToolServerError:
        if self._stdio is not None and self._stdio.failure is not None:
            return ToolServerError(self.name, f"during the call: {self._stdio.failure}")
        tail = stderr_tail(self._log) if self._server.command else ""
        return ToolServerError(
            self.name, what + (f"; its stderr ends with:\n{tail}" if tail else "")
        )


async def _serve(
    name: str,
    server: McpServer,
    cwd: Path,
    log: Path,
    stop: trio.Event,
    *,
    task_status: trio.TaskStatus[McpToolSource] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run one server for the run: connect, list, hand its source over, wait for the end."""
    if (server.command is None) == (server.url is None):
        raise ToolServerError(name, f"give exactly one of command or url in [mcp.{name}]")
    timeout = server.startup_timeout_s
    ready = False
    async with AsyncExitStack() as stack:
        transport: Transport
        stdio: StdioTransport | None = None
        if server.url is not None:
            http = httpx2.AsyncClient(
                headers=server.headers, timeout=httpx2.Timeout(30.0, read=300.0)
            )
            await stack.enter_async_context(http)
            transport = streamable_http_client(server.url, http_client=http)
        else:
            transport = stdio = _stdio(name, server, cwd, log, stack)
        try:
            with trio.CancelScope(deadline=trio.current_time() + timeout) as startup, _one_error():
                async with Client(transport) as client:
                    specs = check_tools(name, await _list_tools(name, client))
                    startup.deadline = math.inf
                    task_status.started(McpToolSource(name, server, client, specs, log, stdio))
                    ready = True
                    await stop.wait()
        except MCPError as error:
            if ready:  # closing a session the server already ended; its calls said so
                return logger.debug("tool server {!r} closed with {}", name, error)
            why = stdio.failure if stdio and stdio.failure else f"it answered {error.message!r}"
            raise _start_failed(name, server, log, why) from error
        except (*_TRANSPORT_ERRORS, pydantic.ValidationError) as error:
            if ready:
                return logger.debug("tool server {!r} closed with {}", name, error)
            raise _start_failed(name, server, log, _transport_failure(error)) from error
        if startup.cancelled_caught:
            raise _start_failed(
                name,
                server,
                log,
                f"it did not finish the handshake and the tool listing within {timeout:g} s; "
                f"raise [mcp.{name}].startup_timeout_s if it is slow to start",
            )


@contextmanager
def _one_error() -> Iterator[None]:
    """The SDK's task groups wrap what fails inside a session in exception groups; a lone
    error (ours from the tool list, the SDK's from the handshake) comes out as itself."""
    try:
        yield
    except BaseExceptionGroup as group:
        leaves = list(exception_leaves(group))
        if len(leaves) == 1 and isinstance(leaves[0], Exception):
            raise leaves[0] from None
        raise


def _stdio(
    name: str, server: McpServer, cwd: Path, log: Path, stack: AsyncExitStack
) -> StdioTransport:
    folder, command, env = launch(name, server, cwd, os.environ)
    errlog = stack.enter_context(log.open("a", encoding="utf-8"))
    params = StdioServerParameters(command=command, args=server.args, env=env, cwd=folder)
    return StdioTransport(name, params, errlog)


async def _list_tools(name: str, client: Client) -> list[mcp_types.Tool]:
    """Every page of the tool list, stopping as soon as it has more than MAX_TOOLS."""
    tools: list[mcp_types.Tool] = []
    cursor: str | None = None
    while True:
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None or len(tools) > MAX_TOOLS:
            return tools
        if not page.tools:
            raise ToolServerError(name, "its tool list sent an empty page with a cursor to more")


def _start_failed(name: str, server: McpServer, log: Path, why: str) -> ToolServerError:
    if server.url is not None:
        return ToolServerError(name, f"could not start a session with {server.url}: {why}")
    tail = stderr_tail(log)
    said = f"; its stderr ends with:\n{tail}" if tail else " (it wrote nothing on stderr)"
    return ToolServerError(name, f"{server.command!r} did not start: {why}{said}")


def _transport_failure(error: BaseException) -> str:
    if isinstance(error, httpx2.ConnectError):
        return "nothing answers there (connection refused); is the server running?"
    if isinstance(error, httpx2.HTTPStatusError):
        return f"it answered HTTP {error.response.status_code}, not MCP; check the url"
    if isinstance(error, pydantic.ValidationError):
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        return f"its answer is not valid MCP at {where}: {first['msg']}"
    return f"{type(error).__name__}: {error}"
