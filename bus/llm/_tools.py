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

from .._protocol import ToolCall as ToolCall
from .._protocol import ToolOutput as ToolOutput
from .._protocol import ToolSpec as ToolSpec
from ..scenario import DEFAULT_MAX_RESULT_CHARS as DEFAULT_MAX_RESULT_CHARS
from ..scenario import DEFAULT_MAX_TOOL_STEPS as DEFAULT_MAX_TOOL_STEPS
from ..scenario import TOOL_CHOICES as TOOL_CHOICES
from ..scenario import McpServer as McpServer
from ..scenario import ToolChoice as ToolChoice

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
