"""A run's tools put together: the Python tools of the team, the scenario's MCP servers
(started once for the run, stopped with it; never by a replay), and the check that every
action's ``tools`` names tools that exist, before the first call.

Patterns of the ``py`` source and of sources the scenario does not declare are checked by
:func:`check_named` without starting anything (``sopbus validate`` and ``run`` alike); the
tools of an MCP server are known only once it runs, so :func:`check_tools` checks them then.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import msgspec

from sopbus.bus import ConfigError, ToolSpec
from sopbus.bus.llm import SOURCE_PYTHON, ToolSource, resolve
from sopbus.bus.scenario import Scenario
from sopbus.roles import PythonTools


def named_tools(team: Any) -> list[tuple[str, tuple[str, ...]]]:
    """Each action of the team that names tools: where (role and action) and its patterns."""
    out = []
    for role in team.roles:
        for action in getattr(role, "actions", ()):
            patterns = tuple(getattr(action, "tools", ()))
            if patterns:
                out.append((f"{role.name}'s action {action.name!r} (tools)", patterns))
    return out


def python_tools(team: Any) -> PythonTools:
    return PythonTools(list(team.tools.values()))


def check_named(scenario: Scenario, team: Any) -> None:
    """Checks every pattern whose source is not a declared MCP server (see the module
    docstring); raises :class:`~sopbus.bus.ConfigError` naming the file and the action."""
    listed: dict[str, Sequence[ToolSpec]] = {SOURCE_PYTHON: python_tools(team).specs()}
    for where, patterns in named_tools(team):
        offline = [p for p in patterns if p.partition(".")[0] not in scenario.mcp]
        # Declared servers are known sources (so a typo in their name is not suggested one).
        _resolve(scenario, offline, {**dict.fromkeys(scenario.mcp, ()), **listed}, where)


def check_tools(scenario: Scenario, team: Any, listed: Mapping[str, Sequence[ToolSpec]]) -> None:
    """Checks every pattern against the tools the run's sources list."""
    for where, patterns in named_tools(team):
        _resolve(scenario, patterns, listed, where)


def _resolve(
    scenario: Scenario,
    patterns: Sequence[str],
    listed: Mapping[str, Sequence[ToolSpec]],
    where: str,
) -> None:
    try:
        resolve(patterns, listed, where=where)
    except ConfigError as exc:
        raise ConfigError(f"{scenario.path}: {exc}") from None


def in_workspace(scenario: Scenario, team: Any, run_dir: Path, *, live: bool) -> Scenario:
    """``scenario`` with the MCP servers the team's ``workspace`` places (see
    :class:`sopbus.sops.Team`) running in the folders it made or chose."""
    if team.workspace is None:
        return scenario
    folders = team.workspace(run_dir, live)
    unknown = sorted(set(folders) - set(scenario.mcp))
    if unknown:
        raise ConfigError(
            f"{scenario.path}: the SOP {scenario.sop!r} runs the MCP server "
            f"{unknown[0]!r}, which the file does not declare; add an [mcp.{unknown[0]}] table"
        )
    mcp = {
        name: msgspec.structs.replace(server, cwd=str(folders[name])) if name in folders else server
        for name, server in scenario.mcp.items()
    }
    return msgspec.structs.replace(scenario, mcp=mcp)


def needs_servers(scenario: Scenario, team: Any) -> bool:
    """Whether any action names a tool of a declared MCP server."""
    return any(
        p.partition(".")[0] in scenario.mcp for _, patterns in named_tools(team) for p in patterns
    )


@asynccontextmanager
async def opened_tools(
    scenario: Scenario, team: Any, *, live: bool
) -> AsyncIterator[list[ToolSource]]:
    """The run's tool sources for the block: the Python tools, the scenario's MCP servers
    when the run is ``live`` (a replay starts none) and an action names one of their tools,
    and the A2A agents its roles are answered by (a replay reaches none: the recording
    answers)."""
    async with _opened_agents(scenario, team, live=live) as agents:
        py = python_tools(team)
        if not live or not scenario.mcp or not needs_servers(scenario, team):
            yield [py, *agents]
            return
        from sopbus.bus.llm import open_mcp_servers

        async with open_mcp_servers(scenario.mcp, cwd=scenario.base_dir) as servers:
            sources: list[ToolSource] = [py, *servers]
            check_tools(scenario, team, {s.name: list(s.specs()) for s in sources})
            yield [*sources, *agents]


def remote_agents(team: Any) -> list[str]:
    """The ``[a2a.NAME]`` agents that answer roles of the team, each once."""
    from sopbus.roles import RemoteAction

    found = (
        a.agent
        for r in team.roles
        for a in getattr(r, "actions", ())
        if isinstance(a, RemoteAction)
    )
    return list(dict.fromkeys(found))


@asynccontextmanager
async def _opened_agents(
    scenario: Scenario, team: Any, *, live: bool
) -> AsyncIterator[list[ToolSource]]:
    used = remote_agents(team) if live else []
    if not used:
        yield []
        return
    from sopbus.bus.llm import open_a2a_agents

    async with open_a2a_agents({name: scenario.a2a[name] for name in used}) as agents:
        yield list(agents)


def check_launch(scenario: Scenario, team: Any, environ: Mapping[str, str]) -> None:
    """Where the run will start MCP servers: each stdio server's folder, command and ``env``
    can be had (:func:`~sopbus.bus.llm._mcp_launch.launch`), else a
    :class:`~sopbus.bus.ToolServerSetupError` naming the file and the server. Called before
    the run directory is made; a replay starts no server, and checks none."""
    from sopbus.bus import ToolServerSetupError
    from sopbus.bus.llm import launch

    if not scenario.mcp or not needs_servers(scenario, team):
        return
    for name, server in scenario.mcp.items():
        if server.command is None:
            continue
        try:
            launch(name, server, scenario.base_dir, environ)
        except ToolServerSetupError as error:
            raise ToolServerSetupError(name, f"{error.detail} (in {scenario.path})") from None


async def check_servers(scenario: Scenario, team: Any) -> None:
    """``sopbus validate``'s check of MCP tool names: starts the servers, checks, stops them."""
    if scenario.mcp and needs_servers(scenario, team):
        async with opened_tools(scenario, team, live=True):
            pass
