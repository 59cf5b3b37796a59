"""``sopbus worker``: a process that hosts roles of runs coordinated over NATS.

For a run (:func:`serve_run`) a worker reads the run's :class:`~sopbus.bus.nats._claims.ScenarioPlan`,
has the caller build the same team from it (the CLI: it knows the SOPs), claims the roles it
may host (``--roles``, else any), keeps its claims alive with a heartbeat, and for each
claimed role (:class:`RoleHost`):

1. opens the role's durable inbox on the run's stream (:meth:`RunStream.open_inbox`);
2. answers the turn requests on ``sopbus.<run>.turn.<role>`` (:mod:`sopbus.bus.nats._wire`): writes
   the artifacts the request brings into its mirror of ``artifacts/``, reads the wanted news
   from the inbox (it waits for them to arrive), runs the real role's ``step`` with a
   :class:`~sopbus.bus.Turn` whose gateway and services are this worker's, and answers with the
   output messages, or with what ended the turn (``budget``, ``stop``, ``failed``) as data;
3. acks the inbox once the answer is sent: a worker killed before that leaves the news
   unacked, and the role's next host is handed them again.

The role's LLM calls and tool calls are made here (its tools are this worker's: the
Python tools of the modules it imports, the scenario's MCP servers started for the run), through a :class:`~sopbus.bus.Gateway` of its own whose budget
is the run's cap and whose pool is the run's shared account (:class:`~sopbus.bus.nats.NatsAccount`
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

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import trio
from loguru import logger

from .._errors import ConfigError
from .._member import Member
from .._protocol import Provider
from ..llm import Gateway, ToolSource, opened
from ..money import AccountShare, Budget, PriceBook
from ._account import NatsAccount
from ._claims import (
    CAP_FIX,
    LEASE_S,
    Problem,
    RunBoard,
    ScenarioPlan,
    announced,
    bucket_name,
    run_state,
)
from ._effects import EffectSender, TurnEffects
from ._host import RoleHost
from ._link import Link
from ._stream import RunStream

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
    secrets: tuple[str, ...] = ()  # the run's key and URL credentials, never to be published
    # The roles' tool sources on this worker for the run: its Python tools, and the MCP
    # servers the scenario declares, started here (scrubbed environment) and stopped with it.
    tools: Callable[[], AbstractAsyncContextManager[Sequence[ToolSource]]] = lambda: nullcontext(())
    # The population shards among ``roles``: shard name -> the population whose news it
    # reads (its inbox takes the population's addressed mail, ``to.<population>``).
    shards: Mapping[str, str] = field(default_factory=dict)


BuildTeam = Callable[[ScenarioPlan, Path], WorkerTeam]
"""Builds the team of a run from its plan; the files it names are materialised under the
given directory."""


@dataclass
class WorkerOptions:
    worker_id: str
    roles: frozenset[str] | None  # None: any role
    workdir: Path
    lease_s: float = LEASE_S
    shards: int = 1  # population shards hosted at once (more roles than that are not claimed)


async def serve_run(link: Link, run_id: str, build: BuildTeam, options: WorkerOptions) -> None:
    """Hosts what this worker may of run ``run_id`` until the run ends (see the module
    docstring). Returns when the run is over or nothing was left to claim."""
    board = RunBoard(link, run_id)
    await board.open()
    plan = await _wait_for_plan(board)
    workdir = options.workdir / run_id
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        team = build(plan, workdir)
    except ConfigError as exc:  # the coordinator says it, instead of waiting for a claim
        await board.put_problem(Problem(worker=options.worker_id, message=str(exc)))
        raise
    link.hide(team.secrets)
    stream = RunStream(link, run_id)
    sender = EffectSender(link, run_id, options.worker_id)
    account = NatsAccount(link, bucket_name(run_id), fix=CAP_FIX)
    await account.open(None)  # the coordinator made it with the run's cap
    pool = AccountShare(account, options.worker_id)
    provider = team.provider
    async with (
        opened(provider) as live,
        team.tools() as sources,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(sender.run)

        def gateway_for(effects: TurnEffects) -> Gateway:
            return Gateway(
                live,
                team.prices,
                Budget(team.cap),
                sink=effects.ledger,
                max_attempts=team.max_attempts,
                journal=effects,
                pool=pool,
            )

        nursery.start_soon(_keep_alive, account, options)
        hosted = await _host_roles(
            board, stream, team, options, sender, gateway_for, workdir, nursery, sources
        )
        nursery.cancel_scope.cancel()
        del hosted


async def _host_roles(
    board: RunBoard,
    stream: RunStream,
    team: WorkerTeam,
    options: WorkerOptions,
    sender: EffectSender,
    gateway_for: Callable[[TurnEffects], Gateway],
    workdir: Path,
    nursery: trio.Nursery,
    sources: Sequence[ToolSource] = (),
) -> list[str]:
    """Claims, serves and keeps the roles until the run ends; returns the roles it hosted."""
    members = {m.name: m for m in team.roles if options.roles is None or m.name in options.roles}
    scopes: dict[str, trio.CancelScope] = {}
    hosted: list[str] = []
    claimed: set[str] = set()  # released on the way out, whatever happens
    beat = 0.0  # when the claims were last moved on: every third of a lease
    try:
        while not await _run_over(board):
            hosts = await board.hosts()
            for name, member in members.items():
                if await _claimed(board, name, hosts, scopes, team.shards, options):
                    logger.info("hosting {} of run {}", name, board.run_id)
                    hosted.append(name)
                    claimed.add(name)
                    scopes[name] = await nursery.start(
                        _host,
                        board,
                        stream,
                        member,
                        fresh_role(team.build_again, name),
                        options,
                        sender,
                        gateway_for,
                        workdir,
                        board.tenure(name),
                        sources,
                        team.shards.get(name, ""),
                    )
            due = trio.current_time() - beat >= options.lease_s / 3
            beat = trio.current_time() if due else beat
            for name in list(scopes):
                lost = hosts is not None and name not in hosts
                if lost or (
                    due and not await board.heartbeat(name, options.worker_id, options.lease_s)
                ):
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


async def _claimed(
    board: RunBoard,
    name: str,
    hosts: Sequence[str] | None,
    scopes: Mapping[str, object],
    shards: Mapping[str, str],
    options: WorkerOptions,
) -> bool:
    """Claims role ``name`` if it is not hosted here yet, the run hosts it (``hosts``:
    ``None`` before the run chose) and, for a population's shard, fewer than
    ``options.shards`` shards are held already (so the other workers take the others)."""
    if name in scopes or (hosts is not None and name not in hosts):
        return False
    if name in shards and sum(n in shards for n in scopes) >= options.shards:
        return False
    return await board.claim(name, options.worker_id, options.lease_s)


async def _host(
    board: RunBoard,
    stream: RunStream,
    member: Member,
    fresh: Callable[[], Member],
    options: WorkerOptions,
    sender: EffectSender,
    gateway_for: Callable[[TurnEffects], Gateway],
    workdir: Path,
    tenure: int,
    sources: Sequence[ToolSource],
    address: str = "",
    task_status: Any = trio.TASK_STATUS_IGNORED,
) -> None:
    with trio.CancelScope() as scope:
        inbox = await stream.open_inbox(member.name, member.watch, address=address)
        host = RoleHost(
            member,
            fresh,
            link=board.link,
            run_id=board.run_id,
            host=options.worker_id,
            inbox=inbox,
            sender=sender,
            gateway_for=gateway_for,
            mirror=workdir / "artifacts",
            tenure=tenure,
            tools=sources,
        )
        task_status.started(scope)
        try:
            await host.serve()
        finally:  # a role given up (lost claim, run over): its next host reads what is unacked
            with trio.CancelScope(shield=True), trio.move_on_after(5):
                await inbox.close()


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


async def serve(
    link: Link, build: BuildTeam, options: WorkerOptions, *, run_id: str | None = None
) -> None:
    """``sopbus worker``: serves ``run_id`` until it ends, or (no run given) every run that
    is announced and not ended, until cancelled. (A run whose coordinator was killed and
    never resumed stays announced ``running``: its hosts wait for a resume.)"""
    if run_id is not None:
        await serve_run(link, run_id, build, options)
        return
    started: set[str] = set()
    async with trio.open_nursery() as nursery:
        while True:
            try:
                runs = await announced(link)
            except Exception as exc:  # the server away for longer than a restart: look again
                logger.warning(
                    "cannot list the runs on {}: {}: {}", link.url, type(exc).__name__, exc
                )
                runs = []
            for found in runs:
                # A running run too: its roles may need a new host (one died).
                if found.run_id not in started and found.state != "ended":
                    started.add(found.run_id)
                    nursery.start_soon(_serve_logged, link, found.run_id, build, options)
            await trio.sleep(_POLL_S)


async def _serve_logged(link: Link, run_id: str, build: BuildTeam, options: WorkerOptions) -> None:
    try:
        await serve_run(link, run_id, build, options)
    except ConfigError as exc:  # the run's settings, not a bug here: said without a traceback
        logger.error("run {}: cannot host its roles: {}", run_id, exc)
    except Exception as exc:  # one run's trouble does not stop the worker's other runs
        # with its traceback: a nursery's error group says nothing of what went wrong
        logger.opt(exception=exc).error("run {}: {}: {}", run_id, type(exc).__name__, exc)
    else:
        logger.info("run {} is over for this worker", run_id)
