"""``sopbus worker``: a process that hosts roles of runs coordinated over NATS.

For a run (:func:`serve_run`) a worker reads the run's :class:`~bus.nats._claims.ScenarioPlan`,
has the caller build the same team from it (the CLI: it knows the SOPs), claims the roles it
may host (``--roles``, else any), keeps its claims alive with a heartbeat, and for each
claimed role (:class:`RoleHost`):

1. opens the role's durable inbox on the run's stream (:meth:`RunStream.open_inbox`);
2. answers the turn requests on ``sopbus.<run>.turn.<role>`` (:mod:`bus.nats._wire`): writes
   the artifacts the request brings into its mirror of ``artifacts/``, reads the wanted news
   from the inbox (it waits for them to arrive), runs the real role's ``step`` with a
   :class:`~bus.Turn` whose gateway and services are this worker's, and answers with the
   output messages, or with what ended the turn (``budget``, ``stop``, ``failed``) as data;
3. acks the inbox once the answer is sent: a worker killed before that leaves the news
   unacked, and the role's next host is handed them again.

The role's LLM calls are made here, through a :class:`~bus.Gateway` of its own whose budget
is the run's cap and whose pool is the run's shared account (:class:`~bus.nats.NatsAccount`
in the run's bucket, this worker its holder, kept alive by a heartbeat so that the holds of
a worker that died are released after its lease); every
reservation, ledger line, recorded answer, artifact and note of a turn is published, in
order, as an effect on ``sopbus.<run>.fx.<role>`` (JetStream), and the answer waits until
they are all stored. The coordinator writes them into the run directory.

A worker stops hosting a role when its claim is lost (a heartbeat finds it taken over),
when the run ends (its announcement says ``ended``), or when the worker exits; a clean
exit (also on Ctrl-C or SIGTERM) deletes its claims so another worker can take the roles
at once.
"""

from __future__ import annotations

import math
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import trio
from loguru import logger

from .._errors import BudgetExhausted, StopRun
from .._member import Member, Turn
from .._message import Message
from .._protocol import Completion, LLMRequest, Provider
from ..llm._gateway import Gateway
from ..llm._tape import CallRecord, Tape, TapeGateway
from ..money._account import AccountShare
from ..money._budget import Budget
from ..money._ledger import LedgerLine
from ..money._prices import PriceBook
from ..store._store import _safe_relpath
from ._account import NatsAccount
from ._claims import CAP_FIX, LEASE_S, RunBoard, ScenarioPlan, announced, bucket_name, run_state
from ._link import Link
from ._stream import Inbox, RunStream
from ._wire import (Artifact, Called, Effect, Envelope, Noted, Reserved, TurnAnswer, TurnRequest,
                    answer_of, decode_request, encode, fx_subject, stored_effects, turn_subject)

READ_NEWS_S = 60.0  # how long a turn waits for its news to arrive on the role's consumer
_POLL_S = 0.3  # how often a worker looks at the board (hosts, the run's state)


@dataclass
class WorkerTeam:
    """What the caller builds from a run's scenario: the roles (all of the team's), the
    provider, the prices, the run's cap and the gateway's attempts."""

    roles: Sequence[Member]
    provider: Provider
    prices: PriceBook
    cap: Decimal
    max_attempts: int = 3
    build_again: Callable[[], Sequence[Member]] = list  # the roles, built anew (fresh instances)


BuildTeam = Callable[[ScenarioPlan, Path], WorkerTeam]
"""Builds the team of a run from its plan; the files it names are materialised under the
given directory."""


class EffectSender:
    """Publishes a worker's effects to the run's stream in order; callable from sync code
    (a role's ``write_artifact``, the gateway's sink)."""

    def __init__(self, link: Link, run_id: str, host: str):
        self.link, self.run_id, self.host = link, run_id, host
        # Unbounded on purpose: producers are sync (they cannot wait); a turn's effects are
        # bounded by its calls and artifacts, and the answer waits for the queue to drain.
        self._send, self._receive = trio.open_memory_channel[tuple[str, bytes, dict[str, str]]](math.inf)
        self._queued = self._sent = 0
        self._progress = trio.Condition()
        self._failure: BaseException | None = None

    def put(self, role: str, turn: int, n: int, effect: Effect, *, replayed: bool = False,
            epoch: int = 0) -> None:
        envelope = Envelope(role=role, turn=turn, n=n, host=self.host, effect=effect,
                            replayed=replayed, epoch=epoch)
        msg_id = f"{self.run_id}/fx/{role}/{self.host}/{epoch}/{turn}/{n}/{int(replayed)}"
        self._queued += 1
        self._send.send_nowait((fx_subject(self.run_id, role), encode(envelope), {"Nats-Msg-Id": msg_id}))

    async def run(self) -> None:
        """Drains the queue, a batch per crossing, until cancelled."""
        while True:
            batch = [await self._receive.receive()]
            while True:
                try:
                    batch.append(self._receive.receive_nowait())
                except trio.WouldBlock:
                    break
            try:
                await self.link.publish_many(batch)
            except Exception as exc:  # a turn that waits on flushed() hears of it
                self._failure = exc
            async with self._progress:
                self._sent += len(batch)
                self._progress.notify_all()

    async def flushed(self) -> None:
        """Returns once every effect queued so far is stored on the stream."""
        target = self._queued
        async with self._progress:
            while self._sent < target:
                await self._progress.wait()
        if self._failure is not None:
            failure, self._failure = self._failure, None
            raise RuntimeError(f"effects of a turn could not be stored on the run's stream: {failure}")


class _TurnEffects:
    """The effects of one role's turns, numbered per turn; the role's gateway journal and
    ledger sink, and its :class:`~bus.TurnServices` (artifacts into the mirror, notes)."""

    def __init__(self, sender: EffectSender, role: str, mirror: Path):
        self.sender, self.role, self.mirror = sender, role, mirror
        self.turn = self.epoch = 0
        self.count = 0
        self.replaying = False
        self._calls = 0
        self._closed: dict[int, tuple[int, LLMRequest, Completion | None]] = {}  # by ledger seq

    def begin(self, epoch: int, turn: int, *, replaying: bool = False) -> None:
        self.epoch, self.turn, self.count, self.replaying = epoch, turn, 0, replaying

    def _put(self, effect: Effect) -> None:
        self.count += 1
        self.sender.put(self.role, self.turn, self.count, effect, replayed=self.replaying,
                        epoch=self.epoch)

    # -- the gateway's journal and sink -----------------------------------------------
    def reserved(self, request: LLMRequest, *, round: int, attempt: int, amount: Decimal) -> int:
        self._calls += 1
        self._put(Reserved(call=self._calls, role=request.role, action=request.action,
                           model=request.model, round=round, attempt=attempt, amount=amount))
        return self._calls

    def closed(self, call: int, request: LLMRequest, completion: Completion | None,
               line: LedgerLine) -> None:
        self._closed[line.seq] = (call, request, completion)

    def ledger(self, line: LedgerLine) -> None:
        call, request, completion = self._closed.pop(line.seq, (0, None, None))
        self._put(Called(line=line, call=call, request=request, completion=completion))

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
    path = root / _safe_relpath(relpath)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


class _Quiet:
    """The run log of a taped gateway on a worker: the coordinator logs the run, not us."""

    def log(self, event: Any) -> None:
        pass

    def record_answer(self, record: Any) -> None:
        pass


def classify(exc: BaseException) -> tuple[str, str]:
    """What ended a turn, as the answer says it: ``budget``, ``stop`` or ``failed``."""
    leaves = list(_leaves(exc))
    if leaves and all(isinstance(e, (BudgetExhausted, StopRun)) for e in leaves):
        budget = next((e for e in leaves if isinstance(e, BudgetExhausted)), None)
        if budget is not None:
            return "budget", str(budget)
        stop = leaves[0]
        assert isinstance(stop, StopRun)
        return "stop", stop.detail
    first = next((e for e in leaves if not isinstance(e, (BudgetExhausted, StopRun))), exc)
    text = "".join(traceback.format_exception(exc))
    return "failed", f"{type(first).__name__}: {first}\n--- on the worker:\n{text}"


def _leaves(exc: BaseException) -> Any:
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    else:
        yield exc


class RoleHost:
    """Hosts one claimed role of a run on this worker (see the module docstring)."""

    def __init__(self, member: Member, fresh: Callable[[], Member], *, link: Link, run_id: str,
                 host: str, inbox: Inbox, sender: EffectSender,
                 gateway_for: Callable[[_TurnEffects], Gateway], mirror: Path):
        self.fresh, self.link, self.run_id, self.host = fresh, link, run_id, host
        self.member = member
        self.inbox = inbox
        self.effects = _TurnEffects(sender, self.member.name, mirror)
        self._gateway = gateway_for(self.effects)
        self.gateway: Any = self._gateway
        self.epoch = -1
        self.done: dict[tuple[int, int], bytes] = {}  # (epoch, turn) -> its answer
        self.busy: tuple[int, int] | None = None
        self.replies: list[str] = []
        self.seen = 0  # the last turn this host took (or replayed) in this epoch

    async def _begin(self, epoch: int) -> None:
        """The role as a new host (or a resumed coordinator) needs it: a fresh instance whose
        calls take the answers already recorded for the role from the run's stream (not
        asked, not paid again); the rest go live."""
        if self.epoch >= 0:
            self.member = self.fresh()
        self.epoch, self.seen = epoch, 0
        recorded = await recorded_answers(self.link, self.run_id, self.member.name)
        self.gateway = (TapeGateway(self._gateway, Tape(recorded, match="key"), free=False,
                                    taped_through=0, store=_Quiet()) if recorded else self._gateway)

    async def serve(self) -> None:
        async with trio.open_nursery() as nursery, \
                self.link.subscribe(turn_subject(self.run_id, self.member.name)) as requests:
            async for msg in requests:
                request = decode_request(msg.data)
                key = (request.epoch, request.turn)
                if key in self.done:
                    await self.link.publish(msg.reply, self.done[key])
                elif key == self.busy:
                    self.replies.append(msg.reply)
                elif self.busy is None and request.epoch >= self.epoch:
                    self.busy, self.replies = key, [msg.reply]
                    nursery.start_soon(self._take, request)

    async def _take(self, request: TurnRequest) -> None:
        if request.epoch != self.epoch:
            await self._begin(request.epoch)
        for past in request.history:
            if past.turn > self.seen:
                await self._replay(past.turn, past.round, past.wanted)
        try:
            answer = await self._turn(request)
        except Exception as exc:  # the news never came, the effects could not be stored
            ended, detail = classify(exc)
            answer = TurnAnswer(turn=request.turn, ended=ended, detail=detail,
                                effects=self.effects.count, host=self.host)
        data = encode(answer)
        # only the last: an older turn is never asked again
        self.done = {(request.epoch, request.turn): data}
        self.busy = None
        for reply in self.replies:
            await self.link.publish(reply, data)
        await self.inbox.ack()

    async def _replay(self, turn: int, round: int, wanted: list[tuple[str, int]]) -> None:
        """Takes an earlier turn again to rebuild the role's state (a new host); its effects
        are marked replayed (the coordinator has them) and its outputs dropped."""
        self.effects.begin(self.epoch, turn, replaying=True)
        news = await self.inbox.read(wanted, timeout=READ_NEWS_S)
        try:
            await self.member.step(news, Turn(run_id=self.run_id, round=round, role=self.member.name,
                                              gateway=self.gateway, services=self.effects))
        except Exception:
            pass  # it ended the same way the first time; the coordinator has that answer
        self.seen = turn

    async def _turn(self, request: TurnRequest) -> TurnAnswer:
        for path, data in request.artifacts.items():
            write_mirrored(self.effects.mirror, path, data)
        self.effects.begin(request.epoch, request.turn)
        news = await self.inbox.read(request.wanted, timeout=READ_NEWS_S)
        turn = Turn(run_id=self.run_id, round=request.round, role=self.member.name,
                    gateway=self.gateway, services=self.effects)
        ended, detail, out = "", "", ()  # type: tuple[str, str, Sequence[Message]]
        try:
            out = await self.member.step(news, turn)
        except Exception as exc:
            ended, detail = classify(exc)
            if ended == "failed":
                logger.warning("role {} failed in round {}: {}", self.member.name, request.round,
                               detail.splitlines()[0])
        self.seen = request.turn
        await self.effects.sender.flushed()
        return TurnAnswer(turn=request.turn, messages=list(out or ()), ended=ended, detail=detail,
                          effects=self.effects.count, host=self.host)


async def recorded_answers(link: Link, run_id: str, role: str) -> list[CallRecord]:
    """The answers the role's earlier hosts got (``called`` effects with a completion, not
    replayed), from the run's stream: what a new host must not ask or pay for again."""
    return [record for envelope in await stored_effects(link, run_id, role)
            if not envelope.replayed and (record := answer_of(envelope.effect)) is not None]


@dataclass
class WorkerOptions:
    worker_id: str
    roles: frozenset[str] | None  # None: any role
    workdir: Path
    lease_s: float = LEASE_S


async def serve_run(link: Link, run_id: str, build: BuildTeam, options: WorkerOptions) -> None:
    """Hosts what this worker may of run ``run_id`` until the run ends (see the module
    docstring). Returns when the run is over or nothing was left to claim."""
    board = RunBoard(link, run_id)
    await board.open()
    plan = await _wait_for_plan(board)
    workdir = options.workdir / run_id
    workdir.mkdir(parents=True, exist_ok=True)
    team = build(plan, workdir)
    stream = RunStream(link, run_id)
    sender = EffectSender(link, run_id, options.worker_id)
    account = NatsAccount(link, bucket_name(run_id), fix=CAP_FIX)
    await account.open(None)  # the coordinator made it with the run's cap
    pool = AccountShare(account, options.worker_id)
    provider = team.provider
    async with _opened(provider) as live, trio.open_nursery() as nursery:
        nursery.start_soon(sender.run)

        def gateway_for(effects: _TurnEffects) -> Gateway:
            return Gateway(live, team.prices, Budget(team.cap), sink=effects.ledger,
                           max_attempts=team.max_attempts, journal=effects, pool=pool)

        nursery.start_soon(_keep_alive, account, options)
        hosted = await _host_roles(board, stream, team, options, sender, gateway_for, workdir, nursery)
        nursery.cancel_scope.cancel()
        del hosted


async def _host_roles(board: RunBoard, stream: RunStream, team: WorkerTeam, options: WorkerOptions,
                      sender: EffectSender, gateway_for: Callable[[_TurnEffects], Gateway],
                      workdir: Path, nursery: trio.Nursery) -> list[str]:
    """Claims, serves and keeps the roles until the run ends; returns the roles it hosted."""
    members = {m.name: m for m in team.roles if options.roles is None or m.name in options.roles}
    scopes: dict[str, trio.CancelScope] = {}
    hosted: list[str] = []
    claimed: set[str] = set()  # released on the way out, whatever happens
    try:
        while not await _run_over(board):
            hosts = await board.hosts()
            for name, member in members.items():
                if name in scopes or (hosts is not None and name not in hosts):
                    continue
                if await board.claim(name, options.worker_id, options.lease_s):
                    logger.info("hosting {} of run {}", name, board.run_id)
                    hosted.append(name)
                    claimed.add(name)
                    scopes[name] = await nursery.start(_host, board, stream, member,
                                                       fresh_role(team.build_again, name), options,
                                                       sender, gateway_for, workdir)
            for name in list(scopes):
                lost = hosts is not None and name not in hosts
                if lost or not await board.heartbeat(name, options.worker_id, options.lease_s):
                    logger.warning("no longer hosting {} of run {}", name, board.run_id)
                    scopes.pop(name).cancel()
                    claimed.discard(name)
                    if lost:
                        await board.release(name)
            if hosts is not None and not scopes and not any(n in hosts for n in members):
                break  # the run goes on without us
            await trio.sleep(min(_POLL_S, options.lease_s / 3))
    finally:
        with trio.CancelScope(shield=True):
            for name in claimed:
                await board.release(name)
    return hosted


async def _host(board: RunBoard, stream: RunStream, member: Member, fresh: Callable[[], Member],
                options: WorkerOptions,
                sender: EffectSender, gateway_for: Callable[[_TurnEffects], Gateway], workdir: Path,
                task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
    with trio.CancelScope() as scope:
        inbox = await stream.open_inbox(member.name, member.watch)
        host = RoleHost(member, fresh, link=board.link, run_id=board.run_id, host=options.worker_id,
                        inbox=inbox, sender=sender, gateway_for=gateway_for,
                        mirror=workdir / "artifacts")
        task_status.started(scope)
        await host.serve()


async def _keep_alive(account: NatsAccount, options: WorkerOptions) -> None:
    """Heartbeats this worker's holder on the run's account: if the worker dies, the money
    its calls in flight hold is released once the lease lapsed."""
    while True:
        await account.heartbeat(options.worker_id, options.lease_s)
        await trio.sleep(options.lease_s / 3)


def fresh_role(build: Callable[[], Sequence[Member]], name: str) -> Callable[[], Member]:
    """Makes a new instance of role ``name`` (its first one is built with the team)."""

    def make() -> Member:
        return next(m for m in build() if m.name == name)
    return make


async def _wait_for_plan(board: RunBoard) -> ScenarioPlan:
    while True:
        plan = await board.scenario()
        if plan is not None:
            return plan
        await trio.sleep(_POLL_S)


async def _run_over(board: RunBoard) -> bool:
    return await run_state(board.link, board.run_id) == "ended"


class _opened:
    """The provider opened for the worker's life (an HTTP client for ``openai``)."""

    def __init__(self, provider: Provider):
        self.provider = provider

    async def __aenter__(self) -> Provider:
        if hasattr(self.provider, "__aenter__"):
            await self.provider.__aenter__()
        return self.provider

    async def __aexit__(self, *exc: object) -> None:
        if hasattr(self.provider, "__aexit__"):
            await self.provider.__aexit__(*exc)


async def serve(link: Link, build: BuildTeam, options: WorkerOptions, *, run_id: str | None = None) -> None:
    """``sopbus worker``: serves ``run_id`` until it ends, or (no run given) every run that
    is announced and not ended, until cancelled. (A run whose coordinator was killed and
    never resumed stays announced ``running``: its hosts wait for a resume.)"""
    if run_id is not None:
        await serve_run(link, run_id, build, options)
        return
    started: set[str] = set()
    async with trio.open_nursery() as nursery:
        while True:
            for found in await announced(link):
                # A running run too: its roles may need a new host (one died).
                if found.run_id not in started and found.state != "ended":
                    started.add(found.run_id)
                    nursery.start_soon(_serve_logged, link, found.run_id, build, options)
            await trio.sleep(_POLL_S)


async def _serve_logged(link: Link, run_id: str, build: BuildTeam, options: WorkerOptions) -> None:
    try:
        await serve_run(link, run_id, build, options)
    except Exception as exc:  # one run's trouble does not stop the worker's other runs
        logger.error("run {}: {}: {}", run_id, type(exc).__name__, exc)
    else:
        logger.info("run {} is over for this worker", run_id)



