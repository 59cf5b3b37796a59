"""The messages of a finished run against its recorded answers: ``sopbus verify`` replays
the run (every answer from ``calls.jsonl``, no provider, $0) into a scratch directory and
compares the replay's messages with the log's.

The hash chain has no key: whoever can rewrite ``events.jsonl`` can edit or drop a message
and seal the file again. The messages are not free text, though: each was made by the
SOP's code from the answers of its calls, and the replay makes them again from those
answers. A message whose content differs from the replay's, or that the replay publishes
and the log lacks, was edited or dropped (or ``calls.jsonl`` was, which the ledger checks
only for usage). ``rounds`` runs are compared in order; ``events`` runs as a set, since
concurrent turns may publish in another order.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import trio
from loguru import logger

from sopbus.bus import (
    EVENTS,
    MESSAGE_KINDS,
    SUMMARY,
    RunSummary,
    SopbusError,
    decode_summary,
    logical_view,
    read_events,
    read_summary,
)
from sopbus.bus.store import plan_replay


@dataclass
class Recheck:
    """What the replay found: ``problems`` (a message the answers do not give) and
    ``notes`` (why messages were not checked)."""

    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    messages: int = 0


def recheck_messages(run_dir: Path) -> Recheck:
    """Replays the finished run in ``run_dir`` and compares its messages (module docstring)."""
    found = Recheck()
    if not (run_dir / SUMMARY).is_file():
        found.notes.append(
            f"{run_dir / EVENTS}: no {SUMMARY} (the run has not finished, or its summary "
            f"was removed), so its messages are not checked against a replay of its answers"
        )
        return found
    ran = read_summary(run_dir)
    if ran is None:
        found.notes.append(
            f"{run_dir / SUMMARY}: not a run summary (damaged), so the run's messages are "
            f"not checked against a replay of its answers"
        )
        return found
    if ran.end_reason == "error" and not ran.rounds:
        # It failed before its first round (a tool server that did not start): it asked no
        # model and published nothing, and a replay, which starts no tool server, would run.
        found.notes.append(
            f"{run_dir}: the run failed before its first round ({ran.detail}), so "
            f"there are no messages to check against a replay"
        )
        return found
    with tempfile.TemporaryDirectory(prefix="sopbus-verify-") as scratch:
        replayed = _replay(run_dir, Path(scratch), found)
        if replayed is not None:
            _compare(run_dir, ran.mode, replayed, found, _stopped(ran, replayed))
    return found


def _stopped(ran: RunSummary, replayed: Path) -> str | None:
    """Why the replay ended in an error the run did not end in (a recording it cannot
    follow to the end), or ``None``."""
    again = decode_summary((replayed / SUMMARY).read_bytes())
    if again.end_reason == "error" and ran.end_reason != "error":
        return str(again.detail or again.error)
    return None


def _replay(run_dir: Path, scratch: Path, found: Recheck) -> Path | None:
    from ._execute import execute

    try:
        scenario, continuation = plan_replay(run_dir, into=scratch)
    except SopbusError as error:
        found.notes.append(
            f"{run_dir}: cannot be replayed here ({error}), so its messages are not checked "
            f"against its answers"
        )
        return None
    logger.disable("sopbus")  # the replay's cost lines are not the verify's output
    try:
        trio.run(lambda: execute(scenario, continuation=continuation))
    except SopbusError as error:
        found.notes.append(
            f"{run_dir}: its replay could not start ({error}), so its messages are not "
            f"checked against its answers"
        )
        return None
    finally:
        logger.enable("sopbus")
    return continuation.run_dir


def _messages(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """(line, logical record) of each message event of the log at ``path``."""
    out = []
    for number, event in enumerate(logical_view(read_events(path)), 1):
        if event.get("kind") in MESSAGE_KINDS:
            out.append((number, {k: v for k, v in event.items() if k != "seq"}))
    return out


def _compare(run_dir: Path, mode: str, replayed: Path, found: Recheck, stopped: str | None) -> None:
    logged, again = _messages(run_dir / EVENTS), _messages(replayed / EVENTS)
    found.messages = len(logged)
    where = run_dir / EVENTS
    if stopped is not None:
        # Only what the replay got to can be compared; the rest is said, not judged.
        found.messages = min(len(logged), len(again))
        if len(logged) > len(again):
            found.notes.append(
                f"{where}: the replay of the recorded answers stopped with an error "
                f"({stopped}), so only the first {len(again)} of {len(logged)} messages "
                f"are checked against it"
            )
        logged = logged[: len(again)]
    if mode != "rounds":
        _compare_as_sets(where, logged, again, found)
        return
    for (line, have), (_, want) in zip(logged, again, strict=False):
        if have != want:
            found.problems.append(
                f"{where}:{line}: message {_name(have)} is not what its recorded answers "
                f"give (a replay of {run_dir.name}): {_difference(have, want)}"
            )
            return
    if len(again) > len(logged):
        after = f"line {logged[-1][0]}" if logged else "the start"
        found.problems.append(
            f"{where}: missing: a replay of the recorded answers publishes message "
            f"{_name(again[len(logged)][1])} after {after}, which the log lacks "
            f"({len(again) - len(logged)} message(s) in all): messages were dropped"
        )
    elif len(logged) > len(again):
        line, extra = logged[len(again)]
        found.problems.append(
            f"{where}:{line}: message {_name(extra)} is not published by a replay of the "
            f"recorded answers: it was added"
        )


def _compare_as_sets(
    where: Path,
    logged: list[tuple[int, dict[str, Any]]],
    again: list[tuple[int, dict[str, Any]]],
    found: Recheck,
) -> None:
    def key(record: dict[str, Any]) -> bytes:
        message = {k: v for k, v in record["message"].items() if k not in ("id", "parents")}
        return msgspec.json.encode({**record, "message": message}, order="sorted")

    wanted: dict[bytes, int] = {}
    for _, record in again:
        wanted[key(record)] = wanted.get(key(record), 0) + 1
    for line, record in logged:
        k = key(record)
        if wanted.get(k, 0) == 0:
            found.problems.append(
                f"{where}:{line}: message {_name(record)} is not one a replay of the recorded "
                f"answers publishes: it was edited or added"
            )
            return
        wanted[k] -= 1
    left = sum(wanted.values())
    if left:
        found.problems.append(
            f"{where}: missing: a replay of the recorded answers publishes {left} message(s) "
            f"the log lacks: messages were dropped"
        )


def _name(record: dict[str, Any]) -> str:
    m = record.get("message", {})
    return f"{m.get('id')} (round {m.get('round')}, {m.get('sent_from')} {m.get('cause_by')})"


def _difference(have: dict[str, Any], want: dict[str, Any]) -> str:
    a, b = _flat(have), _flat(want)
    names = [n for n in sorted(a.keys() | b.keys()) if a.get(n) != b.get(n)]
    shown = [(n, *_around(a.get(n), b.get(n))) for n in names[:3]]
    return "; ".join(f"{n} is {_show(x)}, the answers give {_show(y)}" for n, x, y in shown)


def _around(have: Any, want: Any) -> tuple[Any, Any]:
    """Two long texts shown from a little before where they first differ."""
    if not (isinstance(have, str) and isinstance(want, str)):
        return have, want
    at = next((i for i, (a, b) in enumerate(zip(have, want)) if a != b), min(len(have), len(want)))
    start = max(0, at - 20)
    mark = "..." if start else ""
    return mark + have[start:], mark + want[start:]


def _flat(record: dict[str, Any]) -> dict[str, Any]:
    flat = {k: v for k, v in record.items() if k != "message"}
    flat.update({f"message.{k}": v for k, v in record.get("message", {}).items()})
    return flat


def _show(value: Any, limit: int = 80) -> str:
    text = msgspec.json.encode(value).decode()
    return text if len(text) <= limit else text[:limit] + "..."
