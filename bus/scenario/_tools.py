"""The tool settings of a scenario: its ``[mcp.NAME]`` tables and the tool loop's bounds.

Plain data, below the LLM layer that uses them (:mod:`sopbus.bus.llm._tools` re-exports
them next to the tools' own vocabulary).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Literal

import msgspec

DEFAULT_MAX_RESULT_CHARS = 20_000
"""A tool's output is cut to this many characters before it goes back to the model (and
says so), unless the server's ``max_result_chars`` says otherwise."""
DEFAULT_MAX_TOOL_STEPS = 8
"""How many answers' tool calls an action runs before the model must answer (an action's
``max_tool_steps``)."""
ToolChoice = Literal["auto", "required", "none"]
"""An action's ``tool_choice``: what its tool loop asks of the model (docs/tools.md)."""
TOOL_CHOICES: tuple[ToolChoice, ...] = ("auto", "required", "none")


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


class A2AAgent(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A scenario's ``[a2a.NAME]`` table: a remote A2A agent a role (``agent = "a2a.NAME"``)
    sends the messages it watches to. Its Agent Card is read from ``url`` when the run
    starts; ``price_per_call`` (USD) is reserved under the run's cap before each call;
    ``timeout_s`` bounds each call (reading the card too)."""

    url: str
    price_per_call: Decimal | None = None
    timeout_s: float = 300.0
    max_result_chars: int = DEFAULT_MAX_RESULT_CHARS
