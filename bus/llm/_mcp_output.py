"""What an MCP server says, made fit for a model: its tool list checked, its results as text.

A server is not trusted: its tool list is bounded (:data:`MAX_TOOLS`), every name must be
usable as a function name, and every input schema must be a JSON-schema object. A result
is text (non-text parts described in a few words, never dumped) cut at the server's
``max_result_chars``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

import jsonschema
import mcp_types

from .._errors import ToolServerError
from ._tools import ToolOutput, ToolSpec

MAX_TOOLS = 512
"""A server that lists more tools than this is refused: no model takes that many, and a
hostile list must not fill the run's memory or the model's context."""

MAX_NAME_CHARS = 64
"""A tool's full name ``SOURCE.TOOL`` is at most this long: what a function name may be."""

TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
"""What a tool's name (after the ``SOURCE.`` prefix) may be: a function name of the
OpenAI tools API."""

_TAIL_LINES = 12
_TAIL_BYTES = 4096


def check_tools(server: str, tools: Sequence[mcp_types.Tool]) -> list[ToolSpec]:
    """The server's tools as :class:`ToolSpec`, or a ToolServerError saying what is wrong
    with the list (too many, a bad or repeated name, a schema that is not an object)."""
    if len(tools) > MAX_TOOLS:
        raise ToolServerError(
            server,
            f"it lists at least {len(tools)} tools; sopbus takes at most {MAX_TOOLS} from one server",
        )
    seen: set[str] = set()
    specs = []
    for tool in tools:
        _check_name(server, tool.name, seen)
        _check_schema(server, tool.name, tool.input_schema)
        specs.append(
            ToolSpec(
                name=tool.name, description=tool.description or "", parameters=tool.input_schema
            )
        )
    return specs


def _check_name(server: str, name: str, seen: set[str]) -> None:
    shown = repr(name[:80] + ("..." if len(name) > 80 else ""))
    if not TOOL_NAME.match(name):
        raise ToolServerError(
            server,
            f"tool name {shown} cannot be a function name (letters, digits, _ and -, 1 to 64)",
        )
    if len(server) + 1 + len(name) > MAX_NAME_CHARS:
        raise ToolServerError(
            server,
            f"the full name {server}.{name} is longer than {MAX_NAME_CHARS} characters; "
            "give the server a shorter name in [mcp.NAME]",
        )
    if name in seen:
        raise ToolServerError(server, f"it lists the tool {shown} twice")
    seen.add(name)


def _check_schema(server: str, name: str, schema: object) -> None:
    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise ToolServerError(
            server, f"the input schema of tool {name!r} is not a JSON schema of type object"
        )
    validator = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        validator.check_schema(schema)
    except jsonschema.SchemaError as error:
        where = "/".join(str(part) for part in error.absolute_path) or "(root)"
        raise ToolServerError(
            server,
            f"the input schema of tool {name!r} is not a valid JSON schema at {where}: {error.message}",
        ) from None


def tool_output(result: mcp_types.CallToolResult, max_chars: int) -> ToolOutput:
    """The result as text for the model, cut at ``max_chars`` with a note that says so."""
    parts = [_describe(part) for part in result.content]
    text = "\n".join(parts)
    if not any(isinstance(part, mcp_types.TextContent) for part in result.content):
        if result.structured_content is not None:
            text = "\n".join([json.dumps(result.structured_content, ensure_ascii=False), *parts])
    return cut(text, max_chars, is_error=result.is_error)


def cut(text: str, max_chars: int, *, is_error: bool = False) -> ToolOutput:
    """``text`` as an output, its first ``max_chars`` characters and a note of the rest."""
    if len(text) <= max_chars:
        return ToolOutput(text=text, is_error=is_error, chars=len(text))
    left = len(text) - max_chars
    note = f"\n[cut: {left} more characters of {len(text)} left out]"
    return ToolOutput(text=text[:max_chars] + note, is_error=is_error, chars=len(text), cut=True)


def _describe(part: mcp_types.ContentBlock) -> str:
    if isinstance(part, mcp_types.TextContent):
        return part.text
    if isinstance(part, mcp_types.ImageContent | mcp_types.AudioContent):
        return f"[{part.type}: {part.mime_type}, {len(part.data) * 3 // 4} bytes, not shown]"
    if isinstance(part, mcp_types.ResourceLink):
        return f"[resource link: {part.uri}" + (f" ({part.name})" if part.name else "") + "]"
    resource = part.resource
    if isinstance(resource, mcp_types.TextResourceContents):
        size = f"{len(resource.text)} characters"
    else:
        size = f"{len(resource.blob) * 3 // 4} bytes"
    kind = f", {resource.mime_type}" if resource.mime_type else ""
    return f"[resource: {resource.uri}{kind}, {size}, not shown]"


def stderr_tail(log: Path) -> str:
    """The last lines a server wrote on stderr, indented, or "" when it wrote nothing."""
    try:
        with log.open("rb") as file:
            file.seek(max(0, file.seek(0, 2) - _TAIL_BYTES))
            data = file.read().decode("utf-8", "replace")
    except OSError:
        return ""
    lines = [line for line in data.splitlines() if line.strip()][-_TAIL_LINES:]
    return "\n".join(f"    {line}" for line in lines)
