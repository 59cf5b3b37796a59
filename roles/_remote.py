"""Actions answered by a remote A2A agent: a role with ``agent = "a2a.NAME"`` sends what it
watches to the agent ``[a2a.NAME]`` and publishes the answer under its action's name.

The call is the tool call ``NAME.send`` of the run's tool service (the source is
:mod:`sopbus.bus.llm._a2a`): recorded, priced and replayed as every tool call is, so this
module knows nothing of the protocol.
"""

from __future__ import annotations

import types
from typing import Any, cast

import msgspec

from sopbus.bus import ConfigError, ToolCall

from ._action import Action, ActionContext, ActionResult
from ._registry import Registry

AGENT_PREFIX = "a2a."
"""How a role's ``agent`` names a scenario's ``[a2a.NAME]`` table."""


class RemoteAction(Action, register=False):
    """Sends the news to the remote agent ``agent``; its answer is the result."""

    agent: str = ""
    instruction = "(answered by a remote A2A agent)"

    async def run(self, ctx: ActionContext) -> ActionResult:
        text = "\n\n".join(message.content for message in ctx.news)
        tool = f"{self.agent}.send"
        ids = "-".join(message.id for message in ctx.news) or "none"
        call = ToolCall(
            id=f"a2a-{ctx.turn.round}-{ids}",
            name=tool,
            arguments=msgspec.json.encode({"text": text}).decode(),
        )
        ctx.turn.doing_now(self.name)
        output = await ctx.turn.call_tool(call, offered=(tool,), action=self.name)
        return ActionResult(content=output.text)


def declare_remote_action(name: str, agent: str, *, registry: Registry, where: str) -> type[Action]:
    """An action ``name`` answered by the agent ``[a2a.<agent>]``, registered into ``registry``."""
    if name in registry.actions:
        raise ConfigError(
            f"{where}: the action {name!r} of a role answered by an A2A agent already exists; "
            f"give the role an action name of its own (its answers are published with it)"
        )
    body = {"name": name, "agent": agent, "_declared_at": where, "__module__": __name__}
    cls = cast(
        type[Action],
        types.new_class(name, (RemoteAction,), {"register": False}, lambda ns: ns.update(body)),
    )
    registry.add_action(cls)
    return cls


def agent_name(agent: str, known: Any, where: str) -> str:
    """The NAME of ``agent = "a2a.NAME"``, which must be one of the scenario's ``known``."""
    name = agent[len(AGENT_PREFIX) :] if agent.startswith(AGENT_PREFIX) else ""
    if not name or name not in known:
        listed = ", ".join(f"a2a.{k}" for k in known) or "none: add an [a2a.NAME] table"
        raise ConfigError(
            f'{where}.agent: {agent!r} names no A2A agent of the file; write "a2a.NAME" for '
            f"an [a2a.NAME] table (declared: {listed})"
        )
    return name
