"""Tools a model may call: what a tool is, one call of it, its output, and where tools come from.

An action that names tools (``tools = ["git.git_log", "py.word_count", "search.*"]``) gets
them from :class:`ToolSource` objects: one per MCP server of the scenario (``[mcp.NAME]``,
:mod:`sopbus.bus.llm._mcp`) and one for a role module's Python function tools (``py``). A
tool's full name is ``SOURCE.TOOL``. These are plain values so that a call and its output
can be written to the run's recording (``calls.jsonl``) and answered from it on replay and
resume, which never call a tool again.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import Any, Protocol

import msgspec

from .._protocol import ToolCall as ToolCall
from .._protocol import ToolOutput as ToolOutput
from .._protocol import ToolSpec as ToolSpec

DEFAULT_MAX_RESULT_CHARS = 20_000
"""A tool's output is cut to this many characters before it goes back to the model (and
says so), unless the server's ``max_result_chars`` says otherwise."""
DEFAULT_MAX_TOOL_STEPS = 8
"""How many answers' tool calls an action runs before the model must answer (an action's
``max_tool_steps``)."""
SOURCE_PYTHON = "py"
"""The source name of Python function tools (``@sopbus.tool``): ``py.NAME``."""


class ToolSource(Protocol):
    """Where a run's tools come from (an MCP server, a role module's functions).

    ``name`` is the first part of the tools' full names. ``price_per_call`` is what one
    call costs in USD (``None``: free); a paid call is reserved against the run's budget
    before it is made. ``specs`` is the tool list, read once when the run starts.
    ``call`` runs one tool and never raises for the tool's own failure (that is an output
    with ``is_error``); it raises :class:`sopbus.bus.ToolServerError` when the source itself fails
    (it crashed, it timed out, it cannot be reached).
    """

    name: str
    price_per_call: Decimal | None

    def specs(self) -> Sequence[ToolSpec]: ...

    async def call(self, tool: str, arguments: dict[str, Any]) -> ToolOutput: ...


class McpServer(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A scenario's ``[mcp.NAME]`` table: an MCP server the run starts (``command`` with
    ``args``, over stdio) or reaches (``url``, streamable HTTP); exactly one of the two.

    ``env`` names the environment variables the server is given from sopbus's own
    environment; nothing else is passed (no API key unless named here). ``headers`` go with
    every HTTP request to a ``url`` server. ``price_per_call`` (USD) makes each call of its
    tools a paid call. ``startup_timeout_s`` bounds the start and the tool listing,
    ``call_timeout_s`` each call; ``max_result_chars`` is where a result is cut.
    """

    command: str | None = None
    args: list[str] = msgspec.field(default_factory=list)
    env: list[str] = msgspec.field(default_factory=list)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    price_per_call: Decimal | None = None
    startup_timeout_s: float = 30.0
    call_timeout_s: float = 60.0
    max_result_chars: int = DEFAULT_MAX_RESULT_CHARS
