"""The ``sopbus`` command line, on top of the Python API and the assembly of runs.

``main`` is the console script (and ``python -m sopbus``). Each subcommand is a small module
``_cmd_<name>.py`` in this package with ``NAME``, ``HELP``, ``configure(parser)`` and
``run(args) -> int``; modules are found by name, so adding a command is adding a file. Its
arguments are :class:`._flags.Flag` values: the flags commands share are defined once in
:mod:`._flags`, and a command's own words for one are a ``.but(help=...)`` variant. A
command module imports only the standard library at module level and does its heavy imports
(trio, openai, rich, pydantic, the roles and SOPs) inside ``run``: ``sopbus --help`` must
answer in a blink. Nothing imports this package but the console script.
"""

from __future__ import annotations

from ._app import main as main
from ._exit import ExitCode as ExitCode

__all__ = ["ExitCode", "main"]
