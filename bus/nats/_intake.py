"""The coordinator's intake of the workers' effects: what a remote role's turn did, applied
to the run directory in stream order (see :mod:`sopbus.bus.nats._remote` for the whole protocol).

Effects (:mod:`sopbus.bus.nats._wire`) come from the run's stream by sequence, so a reconnect
loses none and takes none twice. A turn's effects are numbered by their host and taken in
that order. Each role's effects are accepted from its current *tenure* only: a
:class:`~sopbus.bus.nats._wire.Fence` moves the role to a new tenure and ledgers the calls the
old one still had open as ``lost``; what the old tenure sends after the fence is dropped.
Reservations go through the run's call journal, ledger lines through
:meth:`sopbus.bus.Gateway.record_remote`, artifacts and notes through the store (once, when a
turn cut by a takeover writes the same ones again).
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from typing import Any

import msgspec
import trio
from loguru import logger

from .._protocol import LLMRequest
from .._util import reached
from ..llm import CallLog, Gateway
from ..money import LedgerLine, money
from ..store import RunStore
from ._link import Link
from ._subjects import fx_subjects
from ._wire import (
    Artifact,
    Called,
    Envelope,
    Fence,
    Noted,
    Reserved,
    Tooled,
    decode_envelope,
    encode,
)

_FX_POLL_S = 0.25  # the reader looks at the stream this often when no bell rang


class EffectsIntake:
    """Applies one run's effects for its coordinator. ``host_has(role, path, digest)`` is
    told of each artifact a role's host wrote (so it is not sent back to it). The gateway
    and the journal are set (:meth:`books_into`) once the run has them, before any turn."""

    def __init__(
        self,
        link: Link,
        store: RunStore,
        stream: str,
        *,
        epoch: int,
        host_has: Callable[[str, str, str], None],
    ):
        self.link, self.store, self.stream, self.epoch = link, store, stream, epoch
        self.run_id = store.run_id
        self._host_has = host_has
        self.gateway: Gateway | None = None
        self.journal: CallLog | None = None
        # Calls by (role, tenure, the worker's call id): the run's call id, and the worker and
        # reservation of those not closed yet.
        self._calls: dict[tuple[str, int, int], int] = {}
        self._open: dict[tuple[str, int, int], tuple[str, Reserved]] = {}
        self._applied: dict[tuple[str, int, int], int] = defaultdict(
            int
        )  # (role, turn, tenure) -> n
        self._tenures: dict[str, int] = {}  # role -> the tenure whose effects are accepted
        self._dropped: set[tuple[str, int]] = set()  # (role, tenure) fenced off, said once
        # (role, turn) -> tenure -> fingerprints of the artifacts and notes it wrote: a turn
        # cut by a takeover and taken again does not write the same ones twice.
        self._written: dict[tuple[str, int], dict[int, Counter[bytes]]] = defaultdict(dict)
        self._fx_seq = 0  # the last effect taken from the stream, by stream sequence
        # (role, tenure, turn, replayed) -> the last effect number taken, and those come early
        self._taken: dict[tuple[str, int, int, bool], int] = defaultdict(int)
        self._early: dict[tuple[str, int, int, bool], dict[int, Envelope]] = defaultdict(dict)
        self._progress = trio.Condition()

    def books_into(self, gateway: Gateway, journal: CallLog) -> None:
        self.gateway, self.journal = gateway, journal

    def applied(self, role: str, turn: int, tenure: int) -> int:
        """How many effects of ``role``'s ``turn`` by ``tenure`` were taken so far."""
        return self._applied[(role, turn, tenure)]

    async def fenced_at(self, role: str, tenure: int) -> None:
        """Returns once the reader passed the fence that moved ``role`` to ``tenure``."""
        async with self._progress:
            while self._tenures.get(role) != tenure:
                await self._progress.wait()

    async def read(self, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Applies the workers' effects in stream order. They are read from the run's stream
        by sequence (:meth:`Link.read_after`), not from a subscription: an effect published
        while the coordinator was cut off from the server (a server restart) is read once it
        is back, none twice. A core subscription on the same subjects only rings the bell
        (and a look every ``_FX_POLL_S`` covers a ring lost in a reconnect)."""
        stream = self.stream
        self._fx_seq = await self.link.last_seq(stream)  # earlier executions' effects are theirs
        async with self.link.subscribe(fx_subjects(self.run_id)) as bell:
            task_status.started()
            while True:
                batch = await self.link.read_after(stream, fx_subjects(self.run_id), self._fx_seq)
                for seq, data in batch:
                    self._fx_seq = seq
                    await self._take(decode_envelope(data))
                if batch:
                    continue
                with trio.move_on_after(_FX_POLL_S):
                    await bell.receive()
                while True:
                    try:
                        bell.receive_nowait()
                    except trio.WouldBlock:
                        break

    async def _take(self, envelope: Envelope) -> None:
        """Takes one effect from the stream. A turn's effects are numbered 1, 2, ... by their
        host and taken in that order: one its host had to send again (the server restarted
        before it stored it) comes after its successors in the stream, and they wait for it."""
        if envelope.epoch != self.epoch:
            return  # asked by an earlier execution of the run, which is gone
        if isinstance(envelope.effect, Fence):
            await self._next(envelope)
            return
        slot = (envelope.role, envelope.tenure, envelope.turn, envelope.replayed)
        if envelope.n <= self._taken[slot]:
            return  # a copy of one taken already
        waiting = self._early[slot]
        waiting[envelope.n] = envelope
        while self._taken[slot] + 1 in waiting:
            self._taken[slot] += 1
            await self._next(waiting.pop(self._taken[slot]))

    async def _next(self, envelope: Envelope) -> None:
        role, effect = envelope.role, envelope.effect
        if isinstance(effect, Fence):
            self._fence(role, effect)
        elif envelope.tenure != self._tenures.get(role):
            if (role, envelope.tenure) not in self._dropped:
                self._dropped.add((role, envelope.tenure))
                logger.warning(
                    "worker {} no longer hosts {} (its lease lapsed; tenure {} is fenced "
                    "off): its late effects are dropped",
                    envelope.host,
                    role,
                    envelope.tenure,
                )
            return
        elif not envelope.replayed:
            self._apply(envelope)
        async with self._progress:
            if not isinstance(effect, Fence):
                self._applied[(role, envelope.turn, envelope.tenure)] += 1
            self._progress.notify_all()

    def _fence(self, role: str, fence: Fence) -> None:
        """From here on ``role``'s effects are accepted from tenure ``fence.tenure`` only; the
        calls the earlier tenure has still open are counted ``lost``."""
        earlier = self._tenures.get(role)
        self._tenures[role] = fence.tenure
        if earlier is not None and earlier != fence.tenure:
            self._lost(role, earlier)

    def _apply(self, envelope: Envelope) -> None:
        effect, store = envelope.effect, self.store
        call = (envelope.role, envelope.tenure, getattr(effect, "call", 0))
        if isinstance(effect, Reserved):
            assert self.journal is not None
            request = LLMRequest(
                messages=(),
                model=effect.model,
                role=effect.role,
                action=effect.action,
                subject=effect.subject,
            )
            self._calls[call] = self.journal.reserved(
                request,
                round=effect.round,
                attempt=effect.attempt,
                amount=effect.amount,
                provider=effect.provider,
            )
            self._open[call] = (envelope.host, effect)
        elif isinstance(effect, Called):
            assert self.gateway is not None
            reached("nats:answer-read")  # the worker's answer is on the stream, not yet here
            self._open.pop(call, None)
            request = effect.request or LLMRequest(
                messages=(),
                model=effect.line.model,
                role=effect.line.role,
                action=effect.line.action,
                subject=effect.line.subject,
            )
            if effect.tool is not None:
                self._paid_tool(effect, request, self._calls.pop(call, 0))
            else:
                self.gateway.record_remote(
                    effect.line,
                    request,
                    call=self._calls.pop(call, 0),
                    completion=effect.completion,
                )
        elif isinstance(effect, Tooled):
            if not self._repeated(envelope):
                store.record_answer(effect.record)
        elif isinstance(effect, Artifact):
            self._host_has(envelope.role, effect.path, hashlib.sha256(effect.data).hexdigest())
            if not self._repeated(envelope):
                store.write_artifact(effect.path, effect.data, role=effect.role, round=effect.round)
        elif isinstance(effect, Noted):
            if not self._repeated(envelope):
                store.emit(effect.kind, effect.data, role=effect.role, round=effect.round)

    def _paid_tool(self, effect: Called, request: LLMRequest, reservation: int) -> None:
        """A paid tool call's result, recorded with its line as the run's ledger numbers it
        (and the run's id of its reservation, which it closes), before the line is ledgered."""
        assert self.gateway is not None and effect.tool is not None
        tool = effect.tool

        def taped(line: LedgerLine) -> None:
            self.store.record_answer(
                msgspec.structs.replace(tool, ledger=line, reservation=reservation)
            )

        self.gateway.record_remote(effect.line, request, taped=taped)

    def _repeated(self, envelope: Envelope) -> bool:
        """Whether this artifact or note was written already, the same, by an earlier tenure
        of the role in the same turn: the turn was cut by a takeover and its new host took it
        again from the start. Counted, so a turn that writes the same note twice keeps both."""
        effect = envelope.effect
        mark = hashlib.sha256(encode(effect)).digest()
        by_tenure = self._written[(envelope.role, envelope.turn)]
        for tenure, marks in by_tenure.items():
            if tenure != envelope.tenure and marks[mark] > 0:
                if isinstance(effect, Artifact) and not self._holds(effect):
                    continue  # changed since (another role wrote it): write it again
                marks[mark] -= 1
                return True
        by_tenure.setdefault(envelope.tenure, Counter())[mark] += 1
        return False

    def _holds(self, artifact: Artifact) -> bool:
        path = self.store.artifacts_dir / artifact.path
        return path.is_file() and path.read_bytes() == artifact.data

    async def applied_all(self, role: str, turn: int, tenure: int, count: int) -> None:
        """Returns once ``count`` effects of ``role``'s ``turn`` by ``tenure`` were taken."""
        async with self._progress:
            while self._applied[(role, turn, tenure)] < count:
                await self._progress.wait()

    def _lost(self, role: str, tenure: int) -> None:
        """The calls ``role``'s holder of ``tenure`` had in flight when it was fenced off:
        ledgered ``lost`` at their reservation (the provider may have billed them), as a
        resume does."""
        assert self.gateway is not None
        for key in [k for k in self._open if k[:2] == (role, tenure)]:
            host, held = self._open.pop(key)
            call = self._calls.pop(key, 0)
            caller = held.role or role  # a population shard's call is its agent's (Player-17)
            request = LLMRequest(
                messages=(), model=held.model, role=caller, action=held.action, subject=held.subject
            )
            line = LedgerLine(
                seq=0,
                round=held.round,
                role=caller,
                action=held.action,
                subject=held.subject,
                provider=self.gateway.provider.name,
                model=held.model,
                prompt_tokens=0,
                completion_tokens=0,
                cached_tokens=0,
                cost_usd=held.amount,
                total_usd=held.amount,
                budget_usd=held.amount,
                attempt=held.attempt,
                outcome="lost",
                estimated=True,
                error=f"worker {host} was lost mid-call",
                latency_ms=0.0,
                t=time.time(),
            )
            self.gateway.record_remote(line, request, call=call)
            logger.warning(
                "worker {} was lost with {}'s {} call in flight: counted at its reservation {}",
                host,
                role,
                held.action,
                money(held.amount),
            )
