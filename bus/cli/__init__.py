"""The ``sopbus`` command line.

``main`` is the console script. Each subcommand is a small module ``_cmd_<name>.py`` in
this package with ``NAME``, ``HELP``, ``configure(parser)`` and ``run(args) -> int``;
modules are found by name, so adding a command is adding a file. A command module imports
only the standard library at module level and does its heavy imports (trio, openai, rich,
pydantic, roles, sops) inside ``run``: ``sopbus --help`` must answer in a blink.
"""

from __future__ import annotations

from ._app import main as main
from ._exit import ExitCode as ExitCode
