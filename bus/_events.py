"""The records of a run's event log, ``events.jsonl``.

One line per event, in the order things happened. Each record is a msgspec Struct tagged by
``kind``. Logical fields (round, names, messages, recipients) are kept apart from the
wall clock: the only wall-clock field of an event is ``t`` (seconds since the epoch), and
the run's identity is ``run_id``. Drop those (:func:`logical_view`) and two runs of the
same scenario and seed on the simulator give identical logs.

Roles may also write events of their own kinds (``tool_called``, ``gate_passed``...) through
:meth:`bus.Turn.emit`; those are :class:`Note` records whose ``kind`` is the role's word.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import msgspec

from ._chain import CHAIN_FIELDS
from ._message import Message

WALL_CLOCK_FIELDS = frozenset({"t", "latency_ms", "run_id"})
# The chain's hashes cover the wall-clock fields, so they differ between identical runs too.
_NOT_LOGICAL = WALL_CLOCK_FIELDS | CHAIN_FIELDS


class _Event(msgspec.Struct, kw_only=True, tag_field="kind"):
    seq: int = 0
    t: float = 0.0


class RunStarted(_Event, tag="run_started"):
    run_id: str
    scenario: str
    mode: str
    seed: int
    max_rounds: int
    settings: dict[str, Any] = {}


class RoleJoined(_Event, tag="role_joined"):
    round: int
    name: str
    aliases: tuple[str, ...]
    watch: tuple[str, ...]


class RoleLeft(_Event, tag="role_left"):
    round: int
    name: str
    unread: tuple[str, ...] = ()  # ids of messages it never read: recorded, not lost


class RoundStarted(_Event, tag="round_started"):
    round: int
    turns: tuple[str, ...]  # the roles that take a turn, in declared order


class RoundEnded(_Event, tag="round_ended"):
    round: int
    published: int


class MessagePublished(_Event, tag="message_published"):
    message: Message
    recipients: tuple[str, ...]


class MessageUndelivered(_Event, tag="message_undelivered"):
    message: Message
    reason: str


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


class Note(msgspec.Struct, kw_only=True):
    """A role's own event (written as ``{"kind": <kind>, ...}``)."""

    kind: str
    seq: int = 0
    t: float = 0.0
    round: int
    role: str
    data: dict[str, Any] = {}


Event = (RunStarted | RoleJoined | RoleLeft | RoundStarted | RoundEnded | MessagePublished
         | MessageUndelivered | LLMCalled | ArtifactWritten | TurnFailed | RunEnded)

KNOWN_KINDS = frozenset(
    cls.__struct_config__.tag for cls in Event.__args__  # type: ignore[attr-defined]
)
_decode_known = msgspec.json.Decoder(Event).decode


def decode_event(raw: dict[str, Any]) -> Any:
    """A typed event for a known kind; the raw dict for a role's own kind."""
    if raw.get("kind") in KNOWN_KINDS:
        return _decode_known(msgspec.json.encode(raw))
    return raw


def logical_view(records: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """The records with wall-clock, identity and chain (``_prev``, ``_h``) fields removed,
    at any depth."""
    for rec in records:
        yield _strip(rec)


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in _NOT_LOGICAL}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value
