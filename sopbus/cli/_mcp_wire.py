"""The stdio wire of ``sopbus mcp``: the SDK's transport, with an answer to every line that
is not a JSON-RPC message.

The SDK's stdio transport hands a line it cannot read (not JSON, no ``method``, ``params``
a string) to the server as an exception, and the server only logs it: the client waits for
an answer that never comes. JSON-RPC 2.0 says such a line gets an error response, ``-32700``
(parse error) or ``-32600`` (invalid request), with the request's ``id`` when it can be read
and ``null`` otherwise; this module sits between the transport and the server and sends it.
The transport itself is the SDK's, so stdin and stdout stay claimed while serving (a child
reads EOF, a stray print lands on stderr).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp_types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError
from pydantic import ValidationError

if TYPE_CHECKING:
    from anyio.abc import ObjectReceiveStream, ObjectSendStream
    from mcp.server.mcpserver import MCPServer

Item = SessionMessage | Exception


async def serve_stdio(server: MCPServer) -> None:
    """``server.run_stdio_async()``, with malformed lines answered (see the module)."""
    # MCPServer has no public way to serve other streams than its own; its low-level
    # server does, and run_stdio_async is these lines without the filter.
    lowlevel = server._lowlevel_server
    async with stdio_server() as (read, write):
        # Unbuffered, as the SDK's own streams: a line is passed on when the server takes it.
        send, receive = anyio.create_memory_object_stream[Item](0)
        async with anyio.create_task_group() as group:
            group.start_soon(_filtered, read, write, send)
            await lowlevel.run(receive, write, lowlevel.create_initialization_options())


async def _filtered(
    read: ObjectReceiveStream[Item], write: ObjectSendStream[SessionMessage], send: Any
) -> None:
    """Passes ``read``'s messages on to ``send``, and answers each unreadable line on
    ``write``; ends (closing ``send``, which ends the server) when ``read`` ends."""
    async with send:
        async for item in read:
            if isinstance(item, Exception):
                try:
                    await write.send(SessionMessage(malformed_answer(item)))
                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                    return  # the server has ended: nobody is left to answer
            else:
                await send.send(item)


def malformed_answer(error: Exception) -> JSONRPCError:
    """The JSON-RPC error response to a line the transport could not read as a message."""
    problems = error.errors() if isinstance(error, ValidationError) else []
    if not problems or any(p["type"] == "json_invalid" for p in problems):
        return _error(None, PARSE_ERROR, "Parse error: the line is not a JSON value")
    return _error(
        _request_id(problems),
        INVALID_REQUEST,
        "Invalid Request: not a JSON-RPC 2.0 message; a request is an object with "
        f'"jsonrpc": "2.0", an "id", a "method" and "params" an object ({_why(problems)})',
    )


def _error(request_id: str | int | None, code: int, message: str) -> JSONRPCError:
    return JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=code, message=message))


def _request_id(problems: list[Any]) -> str | int | None:
    """The ``id`` of the object that failed, when it has a usable one (JSON-RPC: else null)."""
    for problem in problems:
        value = problem.get("input")
        if isinstance(value, dict):
            found = value.get("id")
            if isinstance(found, str | int) and not isinstance(found, bool):
                return found
    return None


def _why(problems: list[Any]) -> str:
    """What is wrong with the line read as a request: the fields and the pydantic words,
    never the values (a line may hold anything)."""
    as_request = [p for p in problems if p["loc"][:1] == ("JSONRPCRequest",)] or problems
    said = [f"{'.'.join(map(str, p['loc'][1:])) or 'the message'}: {p['msg']}" for p in as_request]
    return "; ".join(said[:3])
