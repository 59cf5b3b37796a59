"""``sopbus roles [--json]``: the built-in roles a scenario can name, with what each does.

The roles are those ``sopbus.roles.builtin`` registers into ``sopbus.roles.registry``: name, profile,
the actions it takes, the actions it watches and how it picks among its actions. A
scenario's own ``[[roles]]`` are not listed (they live in that scenario's registry copy);
``sopbus validate SCENARIO`` shows those.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable
from typing import Any

from ._flags import JSON, add
from ._runref import console

NAME = "roles"
HELP = "list the built-in roles: profile, actions, watched actions"

COLUMNS = ("name", "profile", "actions", "watch", "react_mode")


def configure(parser: argparse.ArgumentParser) -> None:
    add(parser, JSON)


def run(args: argparse.Namespace) -> int:
    rows = builtin_roles()
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    _print_table(rows)
    return 0


def builtin_roles() -> list[dict[str, Any]]:
    """Every registered built-in role as ``{name, profile, goal, actions, watch, react_mode,
    module}``, in registration order; ``actions`` and ``watch`` are action names."""
    import sopbus.roles.builtin  # noqa: F401  (registers the built-in roles and actions)
    from sopbus.roles import registry

    return [
        {
            "name": cls.name,
            "profile": cls.profile,
            "goal": cls.goal,
            "actions": _names(cls.actions),
            "watch": _names(cls.watch),
            "react_mode": cls.react_mode,
            "module": cls.__module__,
        }
        for cls in registry.roles.values()
    ]


def _names(refs: Iterable[Any]) -> list[str]:
    """Action names from a class's declaration: names, Action classes or Action instances
    (all three carry ``name``, a string is its own name)."""
    return [ref if isinstance(ref, str) else str(ref.name) for ref in refs]


def _print_table(rows: list[dict[str, Any]]) -> None:
    """Name, profile, actions and watched actions whole (a role is told apart by its name,
    and an action list cut short hides what it reacts to); the react mode while it fits.
    A table when it fits the terminal, else a role a few lines (see ``_fit``)."""
    from rich.text import Text

    from ._fit import Field, print_fitted

    out = console()
    if not rows:
        out.print("no built-in roles are registered (roles.builtin imports none)")
        return
    out.print(Text("built-in roles", style="bold"))
    print_fitted(
        out,
        [
            Field(
                column.replace("_", " "),
                [
                    ", ".join(row[column]) or "-"
                    if column in ("actions", "watch")
                    else str(row[column])
                    for row in rows
                ],
                essential=column != "react_mode",
            )
            for column in COLUMNS
        ],
        key=2,
    )
