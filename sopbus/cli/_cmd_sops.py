"""``sopbus sops [--json]``: the SOPs a scenario can name by a plain word
(``[scenario].sop = "NAME"``), with what each does and where it comes from.

The list is the SOP registry (:func:`sopbus.sops.registered_sops`): the built-in SOPs and
those installed packages register under the entry-point group ``sopbus.sops``. Each is
loaded as a run would load it, so one that cannot be loaded says why in its row (and the
command exits 2) instead of hiding the others.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from ._exit import ExitCode
from ._flags import JSON, add
from ._runref import console

NAME = "sops"
HELP = "list the SOPs a scenario can name: built-in and installed ones"


def configure(parser: argparse.ArgumentParser) -> None:
    add(parser, JSON)


def run(args: argparse.Namespace) -> int:
    rows = sop_rows()
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        _print_table(rows)
    return ExitCode.USAGE if any(row["error"] for row in rows) else ExitCode.COMPLETED


def sop_rows() -> list[dict[str, Any]]:
    """Every registered SOP as ``{name, description, origin, ref, error}``, by name;
    ``error`` is why it cannot be loaded (``None`` when it can)."""
    from sopbus.bus import ConfigError
    from sopbus.sops import get_sop, registered_sops

    rows = []
    for name, entry in registered_sops().items():
        description, error = "", None
        try:
            description = get_sop(name, where="`sopbus sops`").description
        except ConfigError as exc:
            error = str(exc)
        rows.append(
            {
                "name": name,
                "description": description,
                "origin": entry.origin,
                "ref": entry.ref,
                "error": error,
            }
        )
    return rows


def _print_table(rows: list[dict[str, Any]]) -> None:
    from rich.text import Text

    from ._fit import Field, print_fitted

    out = console()
    out.print(Text("SOPs ([scenario].sop = NAME)", style="bold"))
    print_fitted(
        out,
        [
            Field("name", [row["name"] for row in rows]),
            Field(
                "description",
                [row["description"] or f"cannot load: {row['error']}" for row in rows],
            ),
            Field("origin", [row["origin"] for row in rows], essential=False),
        ],
    )
