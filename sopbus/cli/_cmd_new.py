"""``sopbus new DIR [--from NAME]``: write a starting team into DIR.

Without ``--from``: a commented scenario file, a Python module with a role, an action and
an SOP with a verdict (named after the folder, ``<dir>_team.py``, so it cannot shadow a
module sopbus or the user imports), and simulator fixtures; ``sopbus validate`` accepts it
and ``sopbus run`` completes it on the simulator with a verdict. With ``--from NAME``: a copy
of that shipped scenario with every file it names (fixtures, data, its SOP module). Never
replaces a file.
"""

from __future__ import annotations

import argparse
import shlex

from ._args import path_arg
from ._flags import Flag, add

NAME = "new"
HELP = "write a starting team (scenario, Python roles, fixtures) into a folder"


DIRECTORY = Flag(
    "directory", metavar="DIR", type=path_arg, help="the folder to write into (made if missing)"
)
SOURCE = Flag(
    "--from",
    dest="source",
    metavar="NAME",
    help="copy this shipped scenario instead of the template (sopbus examples)",
)


def configure(parser: argparse.ArgumentParser) -> None:
    add(parser, DIRECTORY, SOURCE)


def run(args: argparse.Namespace) -> int:
    from sopbus._examples import write_team

    from ._fit import hanging
    from ._runref import console

    written = write_team(args.directory, args.source)
    width = console().width  # a deep folder's paths break after a slash, never cut
    for path in written:
        print(hanging("wrote ", str(path), width))
    # Quoted as a shell reads it: the hint is meant to be pasted, and "my team/" has a space.
    scenario = shlex.quote(str(written[0]))
    print(f"\n{hanging('next: ', f'sopbus validate {scenario}', width)}")
    print(hanging("      ", f"sopbus run {scenario}", width))
    return 0
