"""``sopbus show RUN [--json]``: the message timeline of a run.

One row per message the run published, in order: round, sender, recipients (or
``undelivered`` when nobody watched its action and nobody was named), the action that
caused it, and the first line of its content. ``--json`` prints one JSON object per message
(JSON lines) with the whole content, the ids of its parents and, for an undelivered one,
the reason.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ._runref import EVENTS, add_run_arg, console, read_summary, resolve_run

NAME = "show"
HELP = "the message timeline of a run: round, from, to, cause_by, first line of content"

UNDELIVERED = "undelivered"
_COLUMNS = ("round", "id", "from", "to", "cause_by")  # then "content"


def configure(parser: argparse.ArgumentParser) -> None:
    add_run_arg(parser)
    parser.add_argument("--json", action="store_true", help="print JSON lines, one per message")


def run(args: argparse.Namespace) -> int:
    run_dir = resolve_run(args.run, args.runs_dir)
    entries = list(timeline(run_dir))
    if args.json:
        for entry in entries:
            print(json.dumps(entry, ensure_ascii=False))
        return 0
    _print_table(entries, run_dir)
    return 0


def timeline(run_dir: Path) -> Iterator[dict[str, Any]]:
    """The run's messages in publish order: ``id``, ``round``, ``from``, ``to`` (the
    recipients; empty when undelivered), ``cause_by``, ``content``, ``parents`` and
    ``undelivered`` (the reason, or ``None``)."""
    from bus import read_events

    for event in read_events(run_dir / EVENTS):
        kind = event.get("kind")
        if kind not in ("message_published", "message_undelivered"):
            continue
        message = event["message"]
        yield {"id": message["id"], "round": message["round"], "from": message["sent_from"],
               "to": event.get("recipients", []), "cause_by": message["cause_by"],
               "content": message["content"], "parents": message["parents"],
               "undelivered": event.get("reason") if kind == "message_undelivered" else None}


def first_line(text: str) -> str:
    """The first line with text in it (a message often starts with a Markdown heading)."""
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def _print_table(entries: list[dict[str, Any]], run_dir: Path) -> None:
    from rich.table import Table
    from rich.text import Text

    table = Table(title=Text(f"messages of run {run_dir.name}"), title_justify="left",
                  caption=Text(_ending(run_dir)), caption_justify="left")
    rows = [[str(e["round"]), e["id"], e["from"],
             UNDELIVERED if e["undelivered"] is not None else ", ".join(e["to"]), e["cause_by"],
             first_line(e["content"])] for e in entries]
    # One line per message: the content is cut to what the other columns leave (rich would
    # otherwise squeeze every column alike on a narrow terminal and drop the short ones).
    out = console()
    widths = [min(max([len(c), *(len(row[i]) for row in rows)]), 24) for i, c in enumerate(_COLUMNS)]
    for column, width in zip(_COLUMNS, widths, strict=True):
        table.add_column(column, justify="right" if column == "round" else "left", width=width,
                         overflow="ellipsis")
    table.add_column("content", no_wrap=True, overflow="ellipsis",
                     max_width=max(12, min(90, out.width - sum(widths) - 3 * len(widths) - 4)))
    for row in rows:
        style = "yellow" if row[3] == UNDELIVERED else ""
        table.add_row(*row[:3], Text(row[3], style=style), *map(Text, row[4:]))
    out.print(table)


def _ending(run_dir: Path) -> str:
    summary = read_summary(run_dir)
    if summary is None:
        return "no summary.json: the run was killed or is still going"
    return (f"{summary.get('status')} ({summary.get('end_reason')}) after "
            f"{summary.get('rounds')} rounds; {summary.get('messages')} messages, "
            f"{summary.get('undelivered')} undelivered")
