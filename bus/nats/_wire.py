"""What a coordinator and its workers say to each other (besides the run's messages).

Three conversations, each on subjects of the run (``sopbus.<run>.``...):

* **turns** (core NATS request/reply on ``sopbus-turn.<run>.<token(role)>``, outside the
  run's stream): the coordinator's
  :class:`~sopbus.bus.nats._remote.RemoteMember` sends a :class:`TurnRequest` (the proxy's turn
  number, the round, the wanted ``(message id, stream seq)`` news, the artifacts the host
  has not seen yet); the worker hosting the role answers a :class:`TurnAnswer` (the output
  messages, unstamped, or what ended the turn as data). A request is idempotent by turn
  number: asked again (the proxy re-asks after a silence, or a new host took the role over)
  it is answered by the same turn, never by a second one. A request of a newer ``epoch``
  (the coordinator was resumed, and runs the run again from round 1) makes the host start
  the role afresh: a new instance, whose turns take their answers from the recording.
* **effects** (JetStream, ``fx.<token(role)>``, stored in the run's stream): what a remote
  turn did besides its messages, in order, as it happens: LLM reservations and ledgered
  calls (with the answer), tool results, artifacts, notes. The coordinator applies them to the run
  directory (the one writer), so ``costs.jsonl``, ``calls.jsonl`` and ``events.jsonl``
  read as in one process. A turn's answer says how many effects it made, and the proxy
  returns only once the coordinator applied them all: a round's log is whole before the
  next round starts. Being on the stream, they also survive a worker's death: a new host
  reads the answers already recorded for the role (:func:`answers_of`) and does not pay
  for them again.
* **claims and the scenario** (the run's KV bucket): see :mod:`sopbus.bus.nats._claims`.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import msgspec

from .._message import Message
from .._protocol import Completion, LLMRequest
from ..llm import CallRecord, ToolRecord, request_key
from ..money import LedgerLine
from ._link import Link
from ._subjects import fx_subject, fx_subjects


class PastTurn(msgspec.Struct, frozen=True):
    """An earlier turn of the role, which a new host replays (from the recorded answers)
    to rebuild the role's memory before it takes the next one."""

    turn: int
    round: int
    wanted: list[tuple[str, int]]


class TurnRequest(msgspec.Struct, frozen=True, kw_only=True):
    """The coordinator asks the host of ``role`` to take its turn number ``turn``."""

    role: str
    turn: int  # 1, 2, ... per role: the request's identity (with the epoch)
    round: int
    epoch: int = 0  # the coordinator's execution of the run: 0, then n for its n-th resume
    wanted: list[tuple[str, int]]  # the news: (message id, stream sequence), in order
    artifacts: dict[str, bytes] = {}  # files under artifacts/ the host has not seen (path -> data)
    history: list[PastTurn] = []  # the role's earlier turns, for a host that has not seen them
    host: str = ""  # the worker asked: the role's claim holder when the request was made
    tenure: int = 0  # that claim's fencing token (Claim.tenure): only that tenure answers


class TurnAnswer(msgspec.Struct, frozen=True, kw_only=True):
    """The host's answer: ``messages`` (unstamped), or ``ended`` (``budget``, ``stop`` or
    ``failed``) with ``detail``; ``effects`` is how many effects the turn published."""

    turn: int
    messages: list[Message] = []
    ended: str = ""
    detail: str = ""
    effects: int = 0
    host: str = ""
    tenure: int = 0  # the answering host's fencing token (the request's)


class Reserved(msgspec.Struct, frozen=True, tag="reserved"):
    """A worker's call attempt holds its reservation and is about to be sent."""

    call: int  # the worker's own call number (the coordinator maps it to the run's)
    role: str
    action: str
    model: str
    round: int
    attempt: int
    amount: Decimal
    subject: str = ""  # what the call is for (LLMRequest.subject), for a lost call's line
    provider: str = ""  # "tool": a paid tool call's reservation


class Called(msgspec.Struct, frozen=True, tag="called"):
    """An attempt ended: its ledger line (numbered by the worker; the coordinator renumbers
    it into the run's ledger), and for an answered or failed call its journal entry."""

    line: LedgerLine
    call: int = 0
    request: LLMRequest | None = None
    completion: Completion | None = None
    tool: ToolRecord | None = None  # a paid tool call's result (its line is ``line``)


class Tooled(msgspec.Struct, frozen=True, tag="tool"):
    """A free tool call's result, for the run's ``calls.jsonl``."""

    record: ToolRecord


class Artifact(msgspec.Struct, frozen=True, tag="artifact"):
    path: str
    data: bytes
    role: str
    round: int


class Noted(msgspec.Struct, frozen=True, tag="note"):
    kind: str
    data: dict[str, Any]
    role: str
    round: int


class Fence(msgspec.Struct, frozen=True, tag="fence"):
    """Written by the coordinator (not a worker) before it asks a new holder of the role:
    from here on, in stream order, it accepts the role's effects of tenure ``tenure`` only.
    The effects an earlier tenure published before the fence are applied, its calls still
    open at the fence are counted ``lost``, and whatever it publishes after the fence (it
    was paused past its lease, not dead) is dropped, by the coordinator and by a new host
    reading the recorded answers alike."""

    tenure: int
    host: str


Effect = Reserved | Called | Tooled | Artifact | Noted | Fence


class Envelope(msgspec.Struct, frozen=True):
    """One effect of turn ``turn`` of ``role``, number ``n`` (1, 2, ...) of that turn."""

    role: str
    turn: int
    n: int
    host: str
    effect: Effect
    replayed: bool = False  # made while a new host replayed earlier turns: not applied
    epoch: int = 0  # the coordinator's execution it was asked by (a resumed one ignores older)
    tenure: int = 0  # the host's fencing token for the role (Claim.tenure)


encode = msgspec.json.Encoder().encode
_envelope = msgspec.json.Decoder(Envelope)
_request = msgspec.json.Decoder(TurnRequest)
_answer = msgspec.json.Decoder(TurnAnswer)


def decode_envelope(data: bytes) -> Envelope:
    return _envelope.decode(data)


def decode_request(data: bytes) -> TurnRequest:
    return _request.decode(data)


def decode_answer(data: bytes) -> TurnAnswer:
    return _answer.decode(data)


async def stored_effects(link: Link, run_id: str, role: str | None = None) -> list[Envelope]:
    """The effects the run's stream holds (of ``role``, or of every role), in order."""
    subject = fx_subject(run_id, role) if role is not None else fx_subjects(run_id)

    return [decode_envelope(data) for data in await link.stored(f"SOPBUS_{run_id}", subject)]


def fenced(envelopes: list[Envelope]) -> list[Envelope]:
    """The effects the coordinator accepted, in order: the workers' ones whose tenure was the
    role's current one (the last :class:`Fence` before them in its epoch), no fences."""
    current: dict[tuple[int, str], int] = {}
    out = []
    for envelope in envelopes:
        slot = (envelope.epoch, envelope.role)
        if isinstance(envelope.effect, Fence):
            current[slot] = envelope.effect.tenure
        elif envelope.tenure == current.get(slot, envelope.tenure):
            out.append(envelope)
    return out


def tool_of(effect: Effect) -> ToolRecord | None:
    """The tool result in ``effect`` (a free or a paid call's), or ``None``."""
    if isinstance(effect, Tooled):
        return effect.record
    if isinstance(effect, Called) and effect.tool is not None:
        return msgspec.structs.replace(effect.tool, ledger=effect.line)
    return None


def answer_of(effect: Effect) -> CallRecord | None:
    """The recorded answer in ``effect`` (a ``called`` one with a completion), or ``None``."""
    if not isinstance(effect, Called) or effect.completion is None or effect.request is None:
        return None
    return CallRecord(
        key=request_key(effect.request),
        role=effect.request.role,
        action=effect.request.action,
        completion=effect.completion,
        round=effect.line.round,
        attempt=effect.line.attempt,
        call=effect.call,
        ledger=effect.line,
    )
