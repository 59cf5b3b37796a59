"""A small MCP tool server built with the official SDK's low-level ``Server``, for the tests
of sopbus's MCP client. Run as a subprocess::

    python mcp_tool_server.py stdio [CASE]      # over stdin/stdout
    python mcp_tool_server.py http              # streamable HTTP on a free 127.0.0.1 port

In HTTP mode it binds the listening socket first and then prints ``port=N`` on one line of
stdout, so a test that has read that line can connect at once (the kernel queues the
connection until uvicorn accepts it): no polling, no sleeps.

The CASE picks the tool list: ``ok`` (the default: ``echo``, ``env``, ``pid``, ``big``, ``hang``,
``crash``, ``fail``, ``picture``, ``structured``), or a hostile list: ``many`` (10,000
tools), ``bad-schema``, ``bad-name``, ``long-name``, ``duplicate``, and ``exit-at-start``
(writes to stderr and exits before it speaks MCP). Mode ``raw`` is a hand-written server
for lists the SDK would refuse to send: ``array-schema``, ``text-schema``, and for lines
the SDK would not write: ``noisy`` (lines that are no message around each answer) and
``flood`` (a call answered with one line that never ends).
"""

from __future__ import annotations

import json
import os
import socket
import sys
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server

_OBJECT = {"type": "object", "properties": {}}
_TEXT = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
_SIZE = {"type": "object", "properties": {"chars": {"type": "integer"}}, "required": ["chars"]}


def _tool(name: str, schema: dict[str, Any], description: str = "") -> types.Tool:
    return types.Tool(name=name, description=description or f"the {name} tool", input_schema=schema)


def _tools(case: str) -> list[types.Tool]:
    if case == "many":
        return [_tool(f"t{i}", _OBJECT) for i in range(10_000)]
    if case == "bad-schema":
        return [_tool("echo", _TEXT), _tool("broken", {"type": "object", "properties": 5})]
    if case == "bad-name":
        return [_tool("rm -rf /", _OBJECT)]
    if case == "long-name":
        return [_tool("x" * 80, _OBJECT)]
    if case == "duplicate":
        return [_tool("echo", _TEXT), _tool("echo", _OBJECT)]
    return [
        _tool("echo", _TEXT, "Gives back its text."),
        _tool("env", _OBJECT, "Gives back the server's environment as JSON."),
        _tool("pid", _OBJECT, "Gives back the server's process id."),
        _tool("big", _SIZE, "Gives back that many characters."),
        _tool("hang", _OBJECT, "Never answers."),
        _tool("crash", _OBJECT, "Exits the server in the middle of the call."),
        _tool("fail", _OBJECT, "A tool that reports its own failure."),
        _tool("picture", _OBJECT, "Gives back an image and a resource link."),
        _tool("structured", _OBJECT, "Gives back structured content only."),
    ]


def _text(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)])


async def _call(name: str, args: dict[str, Any]) -> types.CallToolResult:
    if name == "echo":
        return _text(str(args.get("text", "")))
    if name == "env":
        return _text(json.dumps(dict(os.environ), sort_keys=True))
    if name == "pid":
        return _text(str(os.getpid()))
    if name == "big":
        return _text("x" * int(args["chars"]))
    if name == "hang":
        await anyio.sleep_forever()
    if name == "crash":
        print("crash: exiting in the middle of a call", file=sys.stderr, flush=True)
        os._exit(7)
    if name == "fail":
        return types.CallToolResult(
            content=[types.TextContent(text="no such branch")], is_error=True
        )
    if name == "picture":
        image = types.ImageContent(data="iVBORw0KGgo=" * 100, mime_type="image/png")
        link = types.ResourceLink(uri="file:///tmp/report.txt", name="report")
        return types.CallToolResult(
            content=[types.TextContent(text="see the picture"), image, link]
        )
    if name == "structured":
        return types.CallToolResult(content=[], structured_content={"answer": 42})
    raise ValueError(f"unknown tool {name}")


def build(case: str) -> Server[Any]:
    async def list_tools(
        ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=_tools(case))

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return await _call(params.name, params.arguments or {})

    return Server("sopbus-test-tools", on_list_tools=list_tools, on_call_tool=call_tool)


async def _stdio(case: str) -> None:
    from mcp.server.stdio import stdio_server

    server = build(case)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def _http() -> None:
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    print(f"port={sock.getsockname()[1]}", flush=True)
    app = build("ok").streamable_http_app()
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    anyio.run(uvicorn.Server(config).serve, [sock])


_RAW_TOOLS = {
    "array-schema": [
        {"name": "listy", "inputSchema": {"type": "array", "items": {"type": "string"}}}
    ],
    "text-schema": [{"name": "texty", "inputSchema": "a string, not a schema"}],
    "noisy": [{"name": "echo", "inputSchema": _TEXT}, {"name": "pid", "inputSchema": _OBJECT}],
    "flood": [{"name": "flood", "inputSchema": _OBJECT}, {"name": "pid", "inputSchema": _OBJECT}],
}
_NOISE = (b"this is not JSON\n", b"\n", b"   \n", b"\xff\xfe not UTF-8\n", b'{"jsonrpc": "2.0"}\n')


def _raw_call(case: str, params: dict[str, Any]) -> dict[str, Any]:
    """A tools/call of the raw cases: ``flood`` writes one line that never ends."""
    if params["name"] == "pid":
        text = str(os.getpid())
    elif params["name"] == "flood":
        block = b"x" * (1 << 20)
        sys.stdout.buffer.write(b'{"jsonrpc": "2.0", "id": 9, "result": "')
        while True:
            sys.stdout.buffer.write(block)
    else:
        text = params["arguments"]["text"]
    if case == "noisy":  # lines that are not messages, before the answer
        sys.stdout.buffer.write(b"".join(_NOISE))
    return {"content": [{"type": "text", "text": text}]}


def _raw(case: str) -> None:
    """A hostile server that is not the SDK (the SDK refuses to send such lists): JSON-RPC
    lines by hand, a legacy handshake, and the case's tool list as raw JSON; the cases
    ``noisy`` and ``flood`` answer calls too (see :func:`_raw_call`)."""
    for line in sys.stdin:
        request = json.loads(line)
        if "id" not in request:
            continue
        answer: dict[str, Any] = {"jsonrpc": "2.0", "id": request["id"]}
        if request["method"] == "initialize":
            info = {"name": "raw", "version": "0"}
            answer["result"] = {
                "protocolVersion": "2025-06-18",
                "capabilities": {"tools": {}},
                "serverInfo": info,
            }
        elif request["method"] == "tools/list":
            answer["result"] = {"tools": _RAW_TOOLS[case]}
        elif request["method"] == "tools/call":
            answer["result"] = _raw_call(case, request["params"])
        else:
            answer["error"] = {"code": -32601, "message": f"no method {request['method']}"}
        sys.stdout.buffer.write(json.dumps(answer).encode() + b"\n")
        sys.stdout.buffer.flush()


def main() -> None:
    mode = sys.argv[1]
    case = sys.argv[2] if len(sys.argv) > 2 else "ok"
    if case == "exit-at-start":
        print("fatal: the config file /nowhere/tools.toml does not exist", file=sys.stderr)
        sys.exit(3)
    if mode == "raw":
        _raw(case)
    elif mode == "http":
        _http()
    else:
        anyio.run(_stdio, case)


if __name__ == "__main__":
    main()
