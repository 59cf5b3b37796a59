"""The records of a run's event log, ``events.jsonl``.

One line per event, in the order things happened. Each record is a msgspec Struct tagged by
``kind``. Logical fields (round, names, messages, recipients) are kept apart from the
wall clock: the only wall-clock field of an event is ``t`` (seconds since the epoch), and
the run's identity is ``run_id``. Drop those (:func:`logical_view`) and two runs of the
same scenario and seed on the simulator give identical logs.

Roles may also write events of their own kinds (``tool_called``, ``gate_passed``...) through
:meth:`sopbus.bus.Turn.emit`; those are :class:`Note` records whose ``kind`` is the role's word.

Four things keep the log short on the hot path, and :func:`read_events` undoes them, so a
reader sees every record whole: a message leaves out its empty fields (``send_to``,
``content``, ``payload``, ``parents``); a message whose parents are those of the message
logged just before it in the same publish names that message (``parents_as``) instead of
repeating them; the messages of one publish, logged at one time, carry that time (``t``)
on the first of them only, the others having the ``t`` of the line before them; and no
message carries the run's id (``run_id``), which the log's ``run_started`` and the run
directory's name hold. ``round_started`` is written only for a round in which something
else is logged before its messages (an LLM call, an artifact, a note, a failure);
``round_ended``, written for every round, names the round's turns.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import msgspec

from ._chain import CHAIN_FIELDS
from ._message import Message
from ._util import read_jsonl
from ._verdict import Verdict

WALL_CLOCK_FIELDS = frozenset({"t", "latency_ms", "run_id"})
# The chain's hashes cover the wall-clock fields, so they differ between identical runs too.
_NOT_LOGICAL = WALL_CLOCK_FIELDS | CHAIN_FIELDS


class _Event(msgspec.Struct, kw_only=True, tag_field="kind"):
    # An event's place is its line number in events.jsonl (verify and readers count lines).
    t: float = 0.0  # when it was logged (seconds since the epoch, to the millisecond)


class RunStarted(_Event, tag="run_started"):
    run_id: str
    scenario: str
    mode: str
    seed: int
    max_rounds: int
    settings: dict[str, Any] = {}


# omit_defaults: a role with no sender subscriptions writes the line it always wrote.
class RoleJoined(_Event, tag="role_joined", omit_defaults=True):
    round: int
    name: str
    aliases: tuple[str, ...]
    watch: tuple[str, ...]
    # action -> the senders it is watched from, for the actions watched from named senders only
    watch_from: dict[str, tuple[str, ...]] = {}


class RoleLeft(_Event, tag="role_left"):
    round: int
    name: str
    unread: tuple[str, ...] = ()  # ids of messages it never read: recorded, not lost


# gc=False for the round records as for the messages (see MessagePublished): they hold ints and
# tuples of names, and a run of one-turn rounds makes two of them a round.
class RoundStarted(_Event, tag="round_started", gc=False):
    """A round begins; logged only when the round logs more than its messages (module
    docstring), just before the first such event."""

    round: int
    turns: tuple[str, ...]  # the roles that take a turn, in declared order


class RoundEnded(_Event, tag="round_ended", gc=False):
    """A round's turns are done and what they published is delivered."""

    round: int
    published: int  # messages the round's turns published
    turns: tuple[str, ...] = ()  # the roles that took a turn, in declared order


# gc=False as for Message (see there): these hold a message and strings, never a cycle, and a
# publish of many messages would otherwise wake the cycle collector again and again.
class MessagePublished(_Event, tag="message_published", omit_defaults=True, gc=False):
    """A message and the roles it was delivered to."""

    message: Message
    recipients: tuple[str, ...]
    parents_as: str = ""  # if set, ``message.parents`` are those of the message with this id


class MessageUndelivered(_Event, tag="message_undelivered", omit_defaults=True, gc=False):
    """A message that reached nobody, kept with the reason."""

    message: Message
    reason: str
    parents_as: str = ""  # as in MessagePublished


class LLMCalled(_Event, tag="llm_called"):
    round: int
    role: str
    action: str
    call: Any  # the cost ledger line, as written to costs.jsonl


class ArtifactWritten(_Event, tag="artifact_written"):
    round: int
    role: str
    path: str
    sha256: str
    size: int


class TurnFailed(_Event, tag="turn_failed"):
    round: int
    role: str
    error: str
    traceback: str


class RunEnded(_Event, tag="run_ended"):
    round: int
    reason: str
    detail: str = ""
    error: str | None = None
    traceback: str | None = None
    verdict: Verdict | None = None
    """The SOP's verdict, sealed in the log so that ``summary.json``'s copy can be checked
    (``null``: the SOP states none; absent in logs written before it was sealed)."""


class Note(msgspec.Struct, kw_only=True):
    """A role's own event (written as ``{"kind": <kind>, ...}``)."""

    kind: str
    t: float = 0.0
    round: int
    role: str
    data: dict[str, Any] = {}


Event = (
    RunStarted
    | RoleJoined
    | RoleLeft
    | RoundStarted
    | RoundEnded
    | MessagePublished
    | MessageUndelivered
    | LLMCalled
    | ArtifactWritten
    | TurnFailed
    | RunEnded
)

KNOWN_KINDS = frozenset(cls.__struct_config__.tag for cls in Event.__args__)
_decode_known = msgspec.json.Decoder(Event).decode


def decode_event(raw: dict[str, Any]) -> Any:
    """A typed event for a known kind; the raw dict for a role's own kind. ``raw`` is a
    record as :func:`read_events` gives it (with its message's parents written out)."""
    if raw.get("kind") in KNOWN_KINDS:
        return _decode_known(msgspec.json.encode(raw))
    return raw


MESSAGE_KINDS = frozenset({"message_published", "message_undelivered"})
_MESSAGE_DEFAULTS: dict[str, Any] = {"send_to": [], "content": "", "payload": None, "parents": []}
_MESSAGE_STAMPS: dict[str, Any] = {"id": "", "run_id": "", "round": -1}


def read_events(path: Path) -> Iterator[dict[str, Any]]:
    """The records of an event log (``events.jsonl``) as dicts, each message whole: its
    empty fields and its time filled in, and ``parents_as`` replaced by the parents it
    names, and the run's id given to each message that does not carry one: the ``run_id``
    of the log's ``run_started``, or, before it or without it, the name of the run
    directory that holds ``path``. Logs written before any of these existed read the same."""
    return whole_messages(read_jsonl(path, dict), run_id=Path(path).parent.name)


def whole_messages(
    records: Iterable[dict[str, Any]], *, run_id: str = ""
) -> Iterator[dict[str, Any]]:
    """``records`` with every message written out in full (see :func:`read_events`);
    ``run_id`` is the run's id until a ``run_started`` names it."""
    shared_id, shared = "", []  # type: tuple[str, list[str]]
    t = 0.0  # the time of the last record that carries one
    for rec in records:
        kind = rec.get("kind")
        if kind not in MESSAGE_KINDS:
            t = rec.get("t", t)
            if kind == "run_started":
                run_id = rec.get("run_id", run_id)
            yield rec
            continue
        if "t" in rec:
            t = rec["t"]
        else:
            rec["t"] = t
        message = {
            "cause_by": None,
            "sent_from": None,
            **_MESSAGE_DEFAULTS,
            **_MESSAGE_STAMPS,
            "run_id": run_id,
            **rec["message"],
        }
        named = rec.pop("parents_as", "")
        if named:
            if named != shared_id:
                raise ValueError(
                    f"message {message.get('id')} has the parents of {named}, which is not "
                    f"the last message logged with its parents written out ({shared_id or 'none'})"
                )
            message["parents"] = list(shared)
        elif len(message["parents"]) > 1:
            shared_id, shared = message.get("id", ""), message["parents"]
        rec["message"] = message
        yield rec


def logical_view(records: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """The records with wall-clock, identity and chain (``_prev``, ``_h``) fields removed,
    at any depth."""
    for rec in records:
        yield _strip(rec)


def message_sequence(path: Path) -> list[dict[str, Any]]:
    """The message events of the log at ``path`` in order, logical fields only and without
    ``seq`` (other events, such as a resume's, shift it without changing the messages): what
    two runs are compared on (``sopbus diff``, a sweep's seeds)."""
    events = (e for e in read_events(path) if e.get("kind") in MESSAGE_KINDS)
    return [{k: v for k, v in e.items() if k != "seq"} for e in logical_view(events)]


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in _NOT_LOGICAL}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value
