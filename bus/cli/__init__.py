"""The ``sopbus`` command line, and the one place where a scenario is assembled into a run.

``main`` is the console script. Each subcommand is a small module ``_cmd_<name>.py`` in
this package with ``NAME``, ``HELP``, ``configure(parser)`` and ``run(args) -> int``;
modules are found by name, so adding a command is adding a file. A command module imports
only the standard library at module level and does its heavy imports (trio, openai, rich,
pydantic, roles, sops) inside ``run``: ``sopbus --help`` must answer in a blink.

:func:`execute` (build and run a scenario, under trio) and :func:`run_environ` (the keys
and endpoints: the environment over ``./.env``) are what the Python API (``sopbus``)
builds on; they are imported on first use, like ``bus``'s names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports
from ._app import main as main
from ._exit import ExitCode as ExitCode

if TYPE_CHECKING:
    from ._assemble import Outcome as Outcome
    from ._assemble import execute as execute
    from ._environ import run_environ as run_environ

_WHERE: dict[str, str] = {
    "ExitCode": "._exit",
    "main": "._app",
    "Outcome": "._assemble",
    "execute": "._assemble",
    "run_environ": "._environ",
}

__getattr__, __dir__, __all__ = lazy_exports(globals(), _WHERE)
