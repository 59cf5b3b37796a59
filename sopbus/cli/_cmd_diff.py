"""``sopbus diff RUN1 RUN2``: the first difference of two runs' message sequences.

Messages are compared on their logical fields (:func:`sopbus.bus.logical_view`: no run id, no
wall clock), with their recipients or the reason they went undelivered. Exit 0 when the
sequences are equal, 5 (:attr:`ExitCode.DIFFERENT`) when they differ (the first difference
is printed), 2 when a run cannot be read.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ._exit import ExitCode
from ._flags import RUNS_DIR, Flag, add
from ._runref import EVENTS, resolve_run

NAME = "diff"
HELP = "print the first difference of two runs' message sequences (exit 5 if they differ)"


FIRST = Flag(
    "first", metavar="RUN1", help="a run id, a run directory, 'last' or 'last~N' (N runs before it)"
)
SECOND = Flag(
    "second",
    metavar="RUN2",
    help="a run id, a run directory, 'last' or 'last~N' (N runs before it)",
)


def configure(parser: argparse.ArgumentParser) -> None:
    add(parser, FIRST, SECOND, RUNS_DIR)


def run(args: argparse.Namespace) -> int:
    first, second = (resolve_run(ref, args.runs_dir) for ref in (args.first, args.second))
    a, b = messages(first), messages(second)
    difference = first_difference(a, b)
    if difference is None:
        print(f"same {len(a)} messages")
        return 0
    from ._fit import wrapped
    from ._runref import line_width

    print(wrapped(f"{first.name} and {second.name} differ: {difference}", line_width()))
    return ExitCode.DIFFERENT


def messages(run_dir: Path) -> list[dict[str, Any]]:
    """The run's message events in order, logical fields only."""
    from sopbus.bus import message_sequence

    return message_sequence(run_dir / EVENTS)


def first_difference(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> str | None:
    """Where ``a`` and ``b`` first differ, in words; ``None`` when they are equal."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            fields = _differing(x, y)
            detail = "; ".join(
                f"{name}: {_show(x_value)} vs {_show(y_value)}" for name, x_value, y_value in fields
            )
            return f"message {i + 1} ({_where(x)}): {detail}"
    if len(a) == len(b):
        return None
    longer, extra = ("RUN1", a[len(b)]) if len(a) > len(b) else ("RUN2", b[len(a)])
    return (
        f"{longer} has {abs(len(a) - len(b))} more message(s) after message {min(len(a), len(b))}; "
        f"the first: {_where(extra)} {_show(extra['message'].get('content', ''))}"
    )


def _differing(x: dict[str, Any], y: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    flat_x, flat_y = _flatten(x), _flatten(y)
    return [
        (name, flat_x.get(name), flat_y.get(name))
        for name in sorted(flat_x.keys() | flat_y.keys())
        if flat_x.get(name) != flat_y.get(name)
    ]


def _flatten(event: dict[str, Any]) -> dict[str, Any]:
    flat = {k: v for k, v in event.items() if k != "message"}
    flat.update({f"message.{k}": v for k, v in event.get("message", {}).items()})
    return flat


def _where(event: dict[str, Any]) -> str:
    message = event.get("message", {})
    return f"{message.get('id')}, round {message.get('round')}, {message.get('sent_from')} {message.get('cause_by')}"


def _show(value: Any, limit: int = 160) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + "..."
