"""How a stdio tool server is launched: its folder, its command, its scrubbed environment.

Checked without the MCP SDK, so that ``sopbus run`` and ``validate`` find a server that
cannot start as configured before the run starts (:func:`launch` raises
:class:`~sopbus.bus.ToolServerSetupError`, a configuration error naming the server).
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path

from .._errors import ToolServerSetupError
from ._tools import McpServer

BASE_ENV = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "TERM",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TMPDIR",
)
"""What a stdio server gets from sopbus's environment besides the variables its ``env``
names (those that are set): what a process needs to find programs, its home, its locale,
its time zone and a temporary directory. Nothing else: no API key, no token."""


def server_environment(server: McpServer, environ: Mapping[str, str]) -> dict[str, str]:
    """The scrubbed environment of a stdio server: :data:`BASE_ENV` and the variables
    ``server.env`` names, taken from ``environ`` where they are set."""
    names = (*BASE_ENV, *server.env)
    return {name: environ[name] for name in names if name in environ}


def launch(
    name: str, server: McpServer, cwd: Path, environ: Mapping[str, str]
) -> tuple[Path, str, dict[str, str]]:
    """The folder, the command's path and the environment of stdio server ``name``; raises
    :class:`~sopbus.bus.ToolServerSetupError` when one of them cannot be had."""
    folder = (cwd / server.cwd) if server.cwd else cwd
    if not folder.is_dir():
        raise ToolServerSetupError(
            name, f"its cwd {str(folder)!r} is not a folder; fix [mcp.{name}].cwd"
        )
    missing = [variable for variable in server.env if variable not in environ]
    if missing:
        raise ToolServerSetupError(
            name,
            f"[mcp.{name}].env names {', '.join(missing)}, not set in sopbus's environment; "
            "set it, or take it out of env",
        )
    env = server_environment(server, environ)
    return folder, find_command(name, server.command or "", folder, env), env


def find_command(name: str, command: str, folder: Path, env: Mapping[str, str]) -> str:
    """The executable ``command`` names: a path (relative to ``folder``) as it is; a bare
    name on the ``PATH`` of the server's environment, and failing that next to
    ``sys.executable`` (the bin folder of the venv sopbus runs from, where
    ``pip install 'sopbus[tools]'`` puts the servers, whether or not the venv is active)."""
    if os.sep in command:
        path = folder / command
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
        raise ToolServerSetupError(
            name, f"command {command!r} is not an executable file (from {str(folder)!r})"
        )
    found = shutil.which(command, path=env.get("PATH", ""))
    if found is not None:
        return found
    beside = Path(sys.executable).parent / command
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    raise ToolServerSetupError(
        name,
        f"command {command!r} not found on the PATH of the server's scrubbed environment "
        f"(PATH={env.get('PATH', '')!r}) nor next to sopbus's Python ({beside.parent}); "
        f"install it{_package_hint(command)}, or give its full path in [mcp.{name}].command",
    )


def _package_hint(command: str) -> str:
    if command == "mcp-server-git":  # what the tools extra installs beside sopbus
        return " (the package mcp-server-git: pip install 'sopbus[tools]')"
    if command.startswith("mcp-server-"):
        return f" (pip install {command}, or pipx install {command})"
    return ""
