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
    from bus import read_jsonl

    for event in read_jsonl(run_dir / EVENTS, dict):
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
    table.add_column("round", justify="right")
    for column in ("id", "from", "to", "cause_by"):
        table.add_column(column)
    table.add_column("content", no_wrap=True, overflow="ellipsis", ratio=1)
    for e in entries:
        to = Text(UNDELIVERED, style="yellow") if e["undelivered"] is not None else Text(", ".join(e["to"]))
        table.add_row(str(e["round"]), e["id"], Text(e["from"]), to, Text(e["cause_by"]),
                      Text(first_line(e["content"])))
    console().print(table)


def _ending(run_dir: Path) -> str:
    summary = read_summary(run_dir)
    if summary is None:
        return "no summary.json: the run was killed or is still going"
    return (f"{summary.get('status')} ({summary.get('end_reason')}) after "
            f"{summary.get('rounds')} rounds; {summary.get('messages')} messages, "
            f"{summary.get('undelivered')} undelivered")
