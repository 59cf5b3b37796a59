"""``sopbus show RUN [--json]``: the message timeline of a run.

One row per message the run published, in order: round, sender, recipients (or
``undelivered`` when nobody watched its action and nobody was named), the action that
caused it, and the first line of its content. ``--json`` prints one JSON object per message
(JSON lines) with the whole content, the ids of its parents and, for an undelivered one,
the reason.

``--full`` prints each message whole instead (a header line, then its content as written),
like CrewAI's task output log. ``--role NAME``, ``--action NAME`` and ``--round N`` keep
only the messages sent by that role, caused by that action, or published in that round
(each may be given more than once; with ``--json`` too).

A run whose actions called tools gets a second table after the messages (not with
``--json``, whose lines are messages): one row per ``tool_called`` event, with the round,
the role, the action, the tool, its arguments, the result's size or its error, and its cost.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ._args import whole_number
from ._flags import JSON, RUN_FLAGS, Flag, add
from ._runref import EVENTS, console, resolve_run

NAME = "show"
HELP = "the message timeline of a run: round, from, to, cause_by, first line of content"

UNDELIVERED = "undelivered"
# How much of a message's first line and of a tool call's arguments the tables show.
_CONTENT = 90
_ARGUMENTS = 40


FULL = Flag("--full", action="store_true", help="print every message whole")
ROLE = Flag(
    "--role", action="append", metavar="NAME", help="only messages sent by this role (repeatable)"
)
ACTION = Flag(
    "--action",
    action="append",
    metavar="NAME",
    help="only messages caused by this action (repeatable)",
)
ROUND = Flag(
    "--round",
    action="append",
    metavar="N",
    type=whole_number(0, "a round number"),
    help="only messages of this round (repeatable)",
)


def configure(parser: argparse.ArgumentParser) -> None:
    add(parser, *RUN_FLAGS)
    add(
        parser.add_mutually_exclusive_group(),
        JSON.but(help="print JSON lines, one per message"),
        FULL,
    )
    add(parser, ROLE, ACTION, ROUND)


def run(args: argparse.Namespace) -> int:
    run_dir = resolve_run(args.run, args.runs_dir)
    everything = list(timeline(run_dir))
    entries = selected(
        everything,
        roles=args.role,
        actions=args.action,
        rounds=args.round,
        run_rounds=_rounds_run(run_dir),
    )
    if args.json:
        for entry in entries:
            print(json.dumps(entry, ensure_ascii=False))
        return 0
    if not entries:  # filters that each match, but not together; or a run with no message
        from rich.text import Text

        given = [f"--{k} {v}" for k in ("role", "action", "round") for v in getattr(args, k) or ()]
        why = f"matches {' '.join(given)} together" if given else "was published"
        out = console()
        out.print(Text(f"no message of run {run_dir.name} {why}"))
        out.print(Text(_ending(run_dir)))
        return 0
    if args.full:
        _print_full(entries, run_dir, len(everything))
        return 0
    _print_table(entries, run_dir)
    _print_tools(tool_calls(run_dir, roles=args.role, rounds=args.round))
    return 0


def tool_calls(
    run_dir: Path, *, roles: list[str] | None = None, rounds: list[int] | None = None
) -> list[dict[str, Any]]:
    """The run's tool calls in the order they ended (its ``tool_called`` events' fields,
    with ``round`` and ``role``), kept to ``roles`` and ``rounds`` when given."""
    from sopbus.bus import read_events

    out = []
    for event in read_events(run_dir / EVENTS):
        data = event.get("data") or {}
        if event.get("kind") != "tool_called" or "server" not in data:
            continue  # a role's own tool_called (the book doctor's) has no server
        if (roles and event.get("role") not in roles) or (
            rounds and event.get("round") not in rounds
        ):
            continue
        out.append({"round": event.get("round"), "role": event.get("role"), **data})
    return out


def _print_tools(calls: list[dict[str, Any]]) -> None:
    if not calls:
        return
    from rich.text import Text

    from ._fit import Field, print_boxed

    fields = [
        Field("round", [str(c["round"]) for c in calls]),
        Field("role", [c["role"] for c in calls]),
        Field("action", [c["action"] for c in calls]),
        Field("tool", [f"{c['server']}.{c['tool']}" for c in calls]),
        Field("arguments", [cut(c["arguments"], _ARGUMENTS) for c in calls], wraps=True),
        Field("result", [_tool_result(c) for c in calls], wraps=True),
        Field("cost", [_tool_cost(c) for c in calls]),
    ]
    out = console()
    out.print(Text(f"tool calls ({len(calls)})"))
    print_boxed(out, fields, key=3)


def _tool_result(call: dict[str, Any]) -> str:
    if call.get("error"):
        result = f"error: {cut(first_line(call['error']), _ARGUMENTS)}"
    else:
        result = f"{call['result_chars']} chars"
    return result + " (cut)" if call.get("cut") else result


def _tool_cost(call: dict[str, Any]) -> str:
    if call.get("replayed"):
        return "replayed"
    return f"${call['cost_usd']}" if call.get("cost_usd") else "free"


def selected(
    entries: list[dict[str, Any]],
    *,
    roles: list[str] | None = None,
    actions: list[str] | None = None,
    rounds: list[int] | None = None,
    run_rounds: int | None = None,
) -> list[dict[str, Any]]:
    """The entries that pass every filter given (``None``: no filter). A role or action
    name that no message of the run has is a :class:`~sopbus.bus.ConfigError` naming the ones
    it has: a typo would otherwise print nothing, as if the role had been silent. So is a
    round without messages (``run_rounds``: how many rounds the run had, if known), with the
    rounds that have some and the nearest of them."""
    for flag, names, key in (("--role", roles, "from"), ("--action", actions, "cause_by")):
        known = list(dict.fromkeys(e[key] for e in entries))
        for name in names or ():
            if name not in known:
                from sopbus.bus import ConfigError, did_you_mean

                raise ConfigError(
                    f"{flag} {name!r}: no message of this run has it (the run's: "
                    f"{', '.join(known) or 'none'}){did_you_mean(name, known)}"
                )
    _check_rounds(rounds or [], entries, run_rounds)
    return [
        e
        for e in entries
        if (not roles or e["from"] in roles)
        and (not actions or e["cause_by"] in actions)
        and (rounds is None or e["round"] in rounds)
    ]


def _check_rounds(wanted: list[int], entries: list[dict[str, Any]], run_rounds: int | None) -> None:
    have = sorted({e["round"] for e in entries})
    for n in wanted:
        if n in have:
            continue
        from sopbus.bus import ConfigError

        had = f"the run had {run_rounds} rounds; " if run_rounds is not None else ""
        if not have:
            raise ConfigError(f"--round {n}: no messages in round {n} ({had}it published none)")
        nearest = min(have, key=lambda r: (abs(r - n), r))
        raise ConfigError(
            f"--round {n}: no messages in round {n} ({had}its messages are in rounds "
            f"{_span(have)}); did you mean `{nearest}`?"
        )


def _span(rounds: list[int]) -> str:
    """``0 to 5`` for rounds without a gap, else the list (``0, 2, 5``)."""
    if rounds == list(range(rounds[0], rounds[-1] + 1)) and len(rounds) > 2:
        return f"{rounds[0]} to {rounds[-1]}"
    return ", ".join(map(str, rounds))


def _rounds_run(run_dir: Path) -> int | None:
    from sopbus.bus import read_summary

    summary = read_summary(run_dir)
    return summary.rounds if summary is not None else None


def timeline(run_dir: Path) -> Iterator[dict[str, Any]]:
    """The run's messages in publish order: ``id``, ``round``, ``from``, ``to`` (the
    recipients; empty when undelivered), ``cause_by``, ``content``, ``parents`` and
    ``undelivered`` (the reason, or ``None``)."""
    from sopbus.bus import read_events

    for event in read_events(run_dir / EVENTS):
        kind = event.get("kind")
        if kind not in ("message_published", "message_undelivered"):
            continue
        message = event["message"]
        yield {
            "id": message["id"],
            "round": message["round"],
            "from": message["sent_from"],
            "to": event.get("recipients", []),
            "cause_by": message["cause_by"],
            "content": message["content"],
            "parents": message["parents"],
            "undelivered": event.get("reason") if kind == "message_undelivered" else None,
        }


def first_line(text: str) -> str:
    """The first line with text in it (a message often starts with a Markdown heading)."""
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def _print_table(entries: list[dict[str, Any]], run_dir: Path) -> None:
    from rich.text import Text

    from ._fit import Field, print_boxed

    # The title and the ending are lines of their own: as a table's title and caption they
    # would wrap at the table's width, however narrow.
    out = console()
    to = [UNDELIVERED if e["undelivered"] is not None else ", ".join(e["to"]) for e in entries]
    # Ids and names are whole at every width: the recipients and the content wrap at their
    # spaces, or each message is stacked under its id when even that does not fit.
    fields = [
        Field("round", [str(e["round"]) for e in entries], right=True),
        Field("id", [e["id"] for e in entries]),
        Field("from", [e["from"] for e in entries]),
        Field("to", to, wraps=True),
        Field("cause_by", [e["cause_by"] for e in entries]),
        Field("content", [cut(first_line(e["content"]), _CONTENT) for e in entries], wraps=True),
    ]
    out.print(Text(f"messages of run {run_dir.name}"))
    print_boxed(out, fields, {UNDELIVERED: "yellow"}, key=1)
    out.print(Text(_ending(run_dir)))


def cut(text: str, limit: int) -> str:
    """``text``, or its first ``limit`` characters and an ellipsis: the same at any width,
    so a narrow terminal wraps what a wide one shows rather than showing less."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _print_full(entries: list[dict[str, Any]], run_dir: Path, total: int) -> None:
    """Each message whole: a header (round, id, sender, recipients, action), then its
    content exactly as published (not parsed as markup), then a blank line."""
    from rich.rule import Rule
    from rich.text import Text

    out = console()
    shown = f"{len(entries)} of {total}" if len(entries) != total else str(total)
    out.print(Text(f"messages of run {run_dir.name} ({shown})", style="bold"))
    for e in entries:
        to = UNDELIVERED if e["undelivered"] is not None else ", ".join(e["to"])
        head = f"round {e['round']} | {e['id']} | {e['from']} -> {to} | {e['cause_by']}"
        if len(head) + 6 <= out.width:  # the rule's ends and the spaces around its title
            out.print(Rule(Text(head), align="left"))
        else:  # a title the rule would cut: the rule, then the title wrapped under it
            out.print(Rule())
            out.print(Text(head))
        # Wrapped at the terminal's width (a word wider than it is folded), not left to
        # run past the edge: the content is shown whole either way.
        out.print(Text(e["content"].rstrip("\n") or "(no content)"), overflow="fold")
        out.print()
    out.print(Text(_ending(run_dir)))


def _ending(run_dir: Path) -> str:
    from sopbus.bus import read_summary

    summary = read_summary(run_dir)
    if summary is None:
        return "no summary.json: the run was killed or is still going"
    from ._summary import output_text, status_text, verdict_text

    verdict = verdict_text(summary.verdict)
    verdict = f"verdict {verdict}" if verdict else "the SOP states no verdict"
    return (
        f"{status_text(summary)} after {summary.rounds} rounds; "
        f"{summary.messages} messages, {summary.undelivered} undelivered; {verdict}; "
        f"{output_text(summary)}"
    )
