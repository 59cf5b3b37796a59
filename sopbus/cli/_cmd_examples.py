"""``sopbus examples [--json]``: the scenarios that ship with sopbus, one line each.

Each runs by its name (``sopbus run software_company``) from any folder, on the embedded
simulator; ``sopbus new DIR --from NAME`` copies one to change it.
"""

from __future__ import annotations

import argparse
import json

from ._flags import JSON, add

NAME = "examples"
HELP = "list the shipped scenarios (run one by name: sopbus run NAME)"


def configure(parser: argparse.ArgumentParser) -> None:
    add(parser, JSON.but(help="print a JSON array of {name, description, path, needs}"))


def run(args: argparse.Namespace) -> int:
    from sopbus._examples import examples

    found = examples()
    if args.json:
        print(
            json.dumps(
                [
                    {
                        "name": e.name,
                        "description": e.description,
                        "path": str(e.path),
                        "needs": e.needs,
                    }
                    for e in found
                ],
                indent=2,
            )
        )
        return 0
    from ._fit import hanging
    from ._runref import console

    # Each description wrapped under itself at the terminal's width, the names whole.
    width, room = max((len(e.name) for e in found), default=0), console().width
    for example in found:
        needs = f" (needs {example.needs})" if example.needs else ""
        print(hanging(f"{example.name:<{width}}  ", example.description + needs, room))
    run, copy = "run one: sopbus run NAME", "copy one to change it: sopbus new DIR --from NAME"
    print(f"\n{run}    {copy}" if len(run) + 4 + len(copy) <= room else f"\n{run}\n{copy}")
    return 0
