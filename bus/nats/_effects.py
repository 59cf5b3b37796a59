"""A remote turn's effects: what a role's turn on a worker does besides its messages.

The role's gateway on the worker journals and ledgers through :class:`TurnEffects`, and the
role's :class:`~sopbus.bus.Turn` writes artifacts and notes through it (it is the turn's
:class:`~sopbus.bus.TurnServices`). Each becomes an effect (:mod:`sopbus.bus.nats._wire`), numbered within
its turn, and :class:`EffectSender` publishes them to ``sopbus.<run>.fx.<role>`` in order,
a batch per crossing. Artifacts are also written into the worker's mirror of the run's
``artifacts/`` (a role such as QA reads the files it tests from there).

The gateway tells the journal of an attempt's end before it writes the ledger line
(:meth:`sopbus.bus.Gateway._ledger`): the two are joined into one ``called`` effect, so that the
coordinator can renumber the line and journal the answer with it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any

import trio

from .._events import Note
from .._protocol import Completion, LLMRequest
from ..llm import ToolRecord
from ..money import LedgerLine
from ..store import safe_relpath
from ._link import Link
from ._subjects import fx_subject
from ._wire import Artifact, Called, Effect, Envelope, Noted, Reserved, Tooled, encode

ACK_WAIT_S = 5.0  # how long a batch of effects waits for its publish acks before it is sent again
RETRY_EVERY_S = 0.5
RETRY_S = 60.0  # how long a batch is sent again before the turn fails


class EffectSender:
    """Publishes a worker's effects to the run's stream in order; callable from sync code
    (a role's ``write_artifact``, the gateway's sink)."""

    def __init__(self, link: Link, run_id: str, host: str):
        self.link, self.run_id, self.host = link, run_id, host
        # Unbounded on purpose: producers are sync (they cannot wait); a turn's effects are
        # bounded by its calls and artifacts, and the answer waits for the queue to drain.
        self._send, self._receive = trio.open_memory_channel[tuple[str, bytes, dict[str, str]]](
            math.inf
        )
        self._queued = self._sent = 0
        self._progress = trio.Condition()
        self._failure: BaseException | None = None

    def put(
        self,
        role: str,
        turn: int,
        n: int,
        effect: Effect,
        *,
        replayed: bool = False,
        epoch: int = 0,
        tenure: int = 0,
    ) -> None:
        envelope = Envelope(
            role=role,
            turn=turn,
            n=n,
            host=self.host,
            effect=effect,
            replayed=replayed,
            epoch=epoch,
            tenure=tenure,
        )
        msg_id = f"{self.run_id}/fx/{role}/{self.host}/{tenure}/{epoch}/{turn}/{n}/{int(replayed)}"
        self._queued += 1
        self._send.send_nowait(
            (fx_subject(self.run_id, role), encode(envelope), {"Nats-Msg-Id": msg_id})
        )

    async def run(self) -> None:
        """Drains the queue, a batch per crossing, until cancelled."""
        while True:
            batch = [await self._receive.receive()]
            while True:
                try:
                    batch.append(self._receive.receive_nowait())
                except trio.WouldBlock:
                    break
            await self._publish(batch)
            async with self._progress:
                self._sent += len(batch)
                self._progress.notify_all()

    async def _publish(self, batch: list[tuple[str, bytes, dict[str, str]]]) -> None:
        """Publishes ``batch``; one whose acks did not all come (the server restarting) is
        sent again, whole, every ``RETRY_EVERY_S`` for up to ``RETRY_S``: the stream drops the
        copies it stored already (same ``Nats-Msg-Id``, within its duplicate window), and the
        coordinator puts a turn's effects back in order by their number. A failure past that
        is the turn's (see :meth:`flushed`)."""
        deadline = trio.current_time() + RETRY_S
        while True:
            try:
                await self.link.publish_many(batch, timeout=ACK_WAIT_S)
                return
            except Exception as exc:
                if trio.current_time() >= deadline:
                    self._failure = exc
                    return
            await trio.sleep(RETRY_EVERY_S)

    async def flushed(self) -> None:
        """Returns once every effect queued so far is stored on the stream."""
        target = self._queued
        async with self._progress:
            while self._sent < target:
                await self._progress.wait()
        if self._failure is not None:
            failure, self._failure = self._failure, None
            raise RuntimeError(
                f"effects of a turn could not be stored on the run's stream: {failure}"
            )


class TurnEffects:
    """The effects of one role's turns, numbered per turn; the role's gateway journal and
    ledger sink, and its :class:`~sopbus.bus.TurnServices` (artifacts into the mirror, notes).
    A population shard's calls come one by one (``batches`` is false): each is a remote
    role's call, with its own effects, so the coordinator's records need no batch kind."""

    batches = False

    def __init__(self, sender: EffectSender, role: str, mirror: Path, *, tenure: int = 0):
        self.sender, self.role, self.mirror, self.tenure = sender, role, mirror, tenure
        self.turn = self.epoch = 0
        self.count = 0
        self.replaying = False
        self._calls = 0
        self._closed: dict[int, tuple[int, LLMRequest, Completion | None]] = {}  # by ledger seq
        self._paid: dict[int, ToolRecord] = {}  # paid tool results waiting for their line, by seq

    def begin(self, epoch: int, turn: int, *, replaying: bool = False) -> None:
        self.epoch, self.turn, self.count, self.replaying = epoch, turn, 0, replaying

    def _put(self, effect: Effect) -> None:
        self.count += 1
        self.sender.put(
            self.role,
            self.turn,
            self.count,
            effect,
            replayed=self.replaying,
            epoch=self.epoch,
            tenure=self.tenure,
        )

    # -- the gateway's journal and sink -----------------------------------------------
    def reserved(
        self,
        request: LLMRequest,
        *,
        round: int,
        attempt: int,
        amount: Decimal,
        provider: str = "",
        calls: int = 0,
    ) -> int:
        assert not calls, "a worker's journal takes no batch (batches is false)"
        self._calls += 1
        self._put(
            Reserved(
                call=self._calls,
                role=request.role,
                action=request.action,
                model=request.model,
                round=round,
                attempt=attempt,
                amount=amount,
                subject=request.subject,
                provider=provider,
            )
        )
        return self._calls

    def closed(
        self,
        call: int,
        request: LLMRequest,
        completion: Completion | None,
        line: LedgerLine,
        *,
        texts: list[str] | None = None,
        finish: dict[int, str] | None = None,
        key: str = "",
    ) -> None:
        assert texts is None, "a worker's journal takes no batch (batches is false)"
        self._closed[line.seq] = (call, request, completion)

    def ledger(self, line: LedgerLine) -> None:
        paid = self._paid.pop(line.seq, None)
        if paid is not None:  # one effect: the coordinator records it with its renumbered line
            self._put(Called(line=line, call=paid.reservation, tool=paid))
            return
        call, request, completion = self._closed.pop(line.seq, (0, None, None))
        self._put(Called(line=line, call=call, request=request, completion=completion))

    # -- the RunLog of the role's tool calls (a ToolBox's store) ----------------------
    def record_answer(self, record: Any) -> None:
        assert isinstance(record, ToolRecord), "a worker's gateway journals through reserved"
        if record.ledger is not None:
            self._paid[record.ledger.seq] = record  # its ledger line follows at once
        else:
            self._put(Tooled(record=record))

    def log(self, event: Any) -> None:
        assert isinstance(event, Note), "a worker's ToolBox logs tool_called notes only"
        self._put(Noted(kind=event.kind, data=dict(event.data), role=event.role, round=event.round))

    # -- TurnServices ---------------------------------------------------------------
    @property
    def artifacts_dir(self) -> Path:
        return self.mirror

    def write_artifact(self, relpath: str, data: str | bytes, *, role: str, round: int) -> Path:
        raw = data.encode() if isinstance(data, str) else data
        path = write_mirrored(self.mirror, relpath, raw)
        self._put(Artifact(path=relpath, data=raw, role=role, round=round))
        return path

    def emit(self, kind: str, data: Mapping[str, Any], *, role: str, round: int) -> None:
        self._put(Noted(kind=kind, data=dict(data), role=role, round=round))


def write_mirrored(root: Path, relpath: str, data: bytes) -> Path:
    """Writes ``data`` at ``relpath`` under ``root`` (a path inside it, else refused)."""
    path = root / safe_relpath(relpath)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path
