"""The coordinator's side of a run on NATS: roles hosted by workers, as members of the run.

``sopbus run SCENARIO --bus URL`` keeps the usual :class:`~sopbus.bus.Environment` and
:class:`~sopbus.bus.Runner` in this process, the one router and the one writer of the run
directory. :class:`Coordinator` adds the run's stream and bucket, the wait for workers'
claims, a :class:`RemoteMember` for each hosted role, and the intake of the workers'
effects; claims are fenced by tenure. The protocol is described in docs/design/nats.md
("A run on NATS", "A remote role's turn", "Claims and fencing").
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any

import trio
from loguru import logger

from .._errors import BudgetExhausted, ConfigError, SopbusError, StopRun
from .._member import Member, Turn
from .._message import Message
from ..llm import CallLog, CallRecord, Gateway
from ..money import AccountShare
from ..store import InFlight, RunStore
from ._account import NatsAccount
from ._claims import CAP_FIX, COORDINATOR, Claim, RunBoard, ScenarioPlan, announce
from ._intake import EffectsIntake
from ._link import Link
from ._stream import RunStream, StreamLog
from ._subjects import fx_subject, turn_subject
from ._wire import (
    Called,
    Envelope,
    Fence,
    PastTurn,
    Reserved,
    TurnAnswer,
    TurnRequest,
    answer_of,
    decode_answer,
    encode,
    fenced,
    stored_effects,
)

ASK_EVERY_S = 3.0  # a turn request is repeated after this long without an answer
TAKEOVER_S = 60.0  # how long a hosted role may be without a live claim before the run fails
_SETTLE_S = 1.0  # no `remote` given: the wait for claims ends when none came for this long


class RemoteTurnFailed(SopbusError):
    """A role hosted by a worker raised in its turn, or lost its worker for good."""


class RemoteMember:
    """A role hosted by a worker, as the coordinator's Environment sees it."""

    def __init__(self, role: Member, coordinator: Coordinator, *, address: str = ""):
        self._role, self._coordinator = role, coordinator
        # Whose addressed mail its inbox reads: its own, or a population's (for a shard).
        self.address = address or role.name
        self.turns: list[PastTurn] = []
        self.host = ""  # the worker the last turn was asked of
        self.tenure = 0  # its claim's fencing token (Claim.tenure)
        self.sent: dict[str, str] = {}  # artifacts the host has: path -> sha256

    @property
    def name(self) -> str:
        return self._role.name

    @property
    def aliases(self) -> tuple[str, ...]:
        return self._role.aliases

    @property
    def watch(self) -> frozenset[str]:
        return self._role.watch

    @property
    def watch_from(self) -> Mapping[str, frozenset[str]]:
        # The coordinator's Environment routes; the worker's inbox reads what it delivered.
        return getattr(self._role, "watch_from", None) or {}

    async def step(self, news: Sequence[Message], turn: Turn) -> Sequence[Message]:
        return await self._coordinator.ask(self, news, turn.round)


class Coordinator:
    """The NATS side of one coordinated run (see the module docstring)."""

    def __init__(
        self,
        link: Link,
        store: RunStore,
        *,
        wait_s: float,
        remote: frozenset[str] = frozenset(),
        epoch: int = 0,
    ):
        self.link, self.store, self.run_id, self.epoch = link, store, store.run_id, epoch
        self.stream = RunStream(link, store.run_id)
        self.board = RunBoard(link, store.run_id)
        self.wait_s, self.remote = wait_s, remote
        self.gateway: Gateway | None = None
        self._proxies: dict[str, RemoteMember] = {}
        self.intake = EffectsIntake(
            link, store, self.stream.name, epoch=epoch, host_has=self._host_has
        )
        self.account: NatsAccount | None = None
        self.pool: AccountShare | None = None  # the coordinator's share of the run's account
        # The Environment's event log: the store, and the stream for every message.
        self.log = StreamLog(store, self.stream)

    async def prepare(self, plan: ScenarioPlan, cap: Decimal) -> None:
        """Creates the stream, the bucket and the account, stores the plan, and then (a
        worker may join at once) announces the run waiting."""
        await self.stream.create()
        await self.board.open()
        await self.board.put_scenario(plan)
        self.pool = await self.open_account(cap, resumed=self.epoch > 0)
        await announce(self.link, self.run_id, "waiting")

    async def members(
        self,
        roles: list[Member],
        *,
        required: frozenset[str] = frozenset(),
        addresses: Mapping[str, str] | None = None,
    ) -> list[Member]:
        """Waits for claims (module docstring), then the team: proxies for hosted roles.
        ``required`` roles must be claimed besides ``--remote`` ones (a population's
        shards); ``addresses`` names whose addressed mail a role reads, if not its own."""
        names = [r.name for r in roles]
        claims = await self._wait_for_claims(names, self.remote | required)
        hosted = [n for n in names if n in claims]
        await self.board.set_hosts(hosted)
        await announce(self.link, self.run_id, "running")
        for name in hosted:
            logger.info("role {} runs on worker {}", name, claims[name].worker)
        out: list[Member] = []
        for role in roles:
            if role.name in claims:
                address = (addresses or {}).get(role.name, "")
                proxy = self._proxies[role.name] = RemoteMember(role, self, address=address)
                out.append(proxy)
            else:
                out.append(role)
        return out

    async def _wait_for_claims(self, names: list[str], remote: frozenset[str]) -> dict[str, Claim]:
        missing = sorted(remote - set(names))
        if missing:
            raise ConfigError(
                f"--remote names {', '.join(missing)}, which the team does not have; "
                f"its roles are {', '.join(names)}"
            )
        deadline = trio.current_time() + self.wait_s
        claims: dict[str, Claim] = {}
        changed = trio.current_time()
        while trio.current_time() < deadline:
            now = await self.board.claims(names)
            if set(now) != set(claims):
                claims, changed = now, trio.current_time()
            if remote and remote <= set(claims):
                break
            problem = await self.board.problem() if remote - set(claims) else None
            if problem is not None:
                raise ConfigError(f"worker {problem.worker} cannot host the run: {problem.message}")
            if not remote and (
                len(claims) == len(names) or (claims and trio.current_time() - changed >= _SETTLE_S)
            ):
                break
            await trio.sleep(0.1)
        if remote - set(claims):
            raise ConfigError(
                f"no worker claimed {', '.join(sorted(remote - set(claims)))} "
                f"within {self.wait_s:g} s; start `sopbus worker --bus "
                f"{self.link.url} --run {self.run_id}` or raise --wait-workers"
            )
        return claims

    async def adopt(
        self, recorded: Sequence[CallRecord], lost: Sequence[InFlight]
    ) -> tuple[InFlight, ...]:
        """A resumed run: the answers workers got while the coordinator was down (on the
        stream, never written here) are written into the ledger and ``calls.jsonl`` now, so
        that the run's spend counts them and a replay finds them. Answers the run has
        (``recorded``) are skipped. An answer to a call the resume found in flight (``lost``:
        reserved here, never answered here) closes that reservation: it is returned, and
        not counted ``lost`` then."""
        assert self.gateway is not None
        have = Counter((r.round, r.role, r.key) for r in recorded)
        in_flight: dict[tuple[Any, ...], list[InFlight]] = defaultdict(list)
        for c in lost:
            in_flight[(c.round, c.role, c.action, c.attempt, c.amount)].append(c)
        envelopes = [
            e
            for e in fenced(await stored_effects(self.link, self.run_id))
            if e.epoch < self.epoch and not e.replayed
        ]
        reserved = {
            (e.host, e.tenure, e.epoch, e.role, e.effect.call): e.effect
            for e in envelopes
            if isinstance(e.effect, Reserved)
        }
        adopted: list[InFlight] = []
        count = 0
        for envelope in envelopes:
            effect = envelope.effect
            record = answer_of(effect)
            if record is None or not isinstance(effect, Called) or effect.request is None:
                continue
            slot = (record.round, record.role, record.key)
            if have[slot]:
                have[slot] -= 1
                continue
            held = reserved.get(
                (envelope.host, envelope.tenure, envelope.epoch, envelope.role, effect.call)
            )
            flight = held and (held.round, held.role, held.action, held.attempt, held.amount)
            closes = in_flight[flight].pop(0) if flight and in_flight.get(flight) else None
            self.gateway.record_remote(
                effect.line,
                effect.request,
                call=closes.call if closes else 0,
                completion=effect.completion,
            )
            if closes is not None:
                adopted.append(closes)
            count += 1
        if count:
            logger.info(
                "{} answers workers got while the run's coordinator was down were ledgered", count
            )
        return tuple(adopted)

    async def open_account(self, cap: Decimal, *, resumed: bool) -> AccountShare:
        """The run's cap as a :class:`~sopbus.bus.nats.NatsAccount` in the run's bucket, which every
        process's gateway draws on; the coordinator's own share of it. A resumed run keeps
        the account (with the cap it is given now); :meth:`rebase` then books the spend."""
        self.account = NatsAccount(self.link, self.board.bucket, fix=CAP_FIX)
        if resumed:
            try:
                await self.account.open(None)
            except ConfigError:  # killed before it made the account
                await self.account.open(cap)
            await self.account.set_cap(cap)
        else:
            await self.account.open(cap)
        return AccountShare(self.account, COORDINATOR)

    async def rebase(self, spent: Decimal) -> None:
        """A resumed run: the account's spend becomes the ledger's (``spent``, booked to the
        coordinator), and the holds left by the killed execution are dropped."""
        assert self.account is not None
        state = await self.account.state()
        for holder in state.by_holder:
            if holder != COORDINATOR:
                await self.account.rebase(holder, Decimal(0))
        await self.account.rebase(COORDINATOR, spent)

    def books_into(self, gateway: Gateway, journal: CallLog) -> None:
        """The run's gateway and call journal, which the workers' calls are booked into."""
        self.gateway = gateway
        self.intake.books_into(gateway, journal)

    def _host_has(self, role: str, path: str, digest: str) -> None:
        proxy = self._proxies.get(role)
        if proxy is not None:
            proxy.sent[path] = digest

    async def ended(self) -> None:
        with trio.CancelScope(shield=True):
            try:
                await announce(self.link, self.run_id, "ended")
            except Exception as exc:  # the run is over either way; the workers time out
                logger.warning("could not announce the end of run {}: {}", self.run_id, exc)

    # -- turns --------------------------------------------------------------------------

    async def ask(
        self, proxy: RemoteMember, news: Sequence[Message], round: int
    ) -> Sequence[Message]:
        await self.stream.settle()
        name = proxy.name
        address = proxy.address
        wanted = [(m.id, self.stream.seq(m.id, address if m.send_to else None)) for m in news]
        number = len(proxy.turns) + 1

        async def request(claim: Claim) -> bytes:
            if claim.tenure > proxy.tenure:  # a new holder: fence the last one off first
                await self._fenced_off(name, number, claim)
                proxy.host, proxy.tenure, proxy.sent = claim.worker, claim.tenure, {}
            return encode(
                TurnRequest(
                    role=name,
                    turn=number,
                    round=round,
                    epoch=self.epoch,
                    wanted=wanted,
                    artifacts=self._unseen(proxy),
                    history=list(proxy.turns),
                    host=proxy.host,
                    tenure=proxy.tenure,
                )
            )

        answer = await self._asked(proxy, request)
        proxy.turns.append(PastTurn(number, round, wanted))
        with trio.move_on_after(TAKEOVER_S) as waited:
            await self.intake.applied_all(name, number, answer.tenure, answer.effects)
        if waited.cancelled_caught:
            raise RemoteTurnFailed(
                f"role {name!r}'s turn {number} made {answer.effects} effects on worker "
                f"{answer.host}, and {self.intake.applied(name, number, answer.tenure)} of them reached "
                f"the coordinator within {TAKEOVER_S:g} s (a lost connection?); resume the run "
                f"with `sopbus resume {self.run_id} --bus {self.link.url}`"
            )
        if answer.ended == "budget":
            raise BudgetExhausted(answer.detail)
        if answer.ended == "stop":
            raise StopRun(answer.detail)
        if answer.ended:
            raise RemoteTurnFailed(f"role {name!r} failed on worker {answer.host}: {answer.detail}")
        return answer.messages

    async def _fenced_off(self, role: str, turn: int, claim: Claim) -> None:
        """Puts a :class:`~sopbus.bus.nats._wire.Fence` for ``claim``'s tenure on the role's effects
        and waits until the reader passed it: the earlier holder's effects stored before it
        are applied, its open calls are counted ``lost``, and nothing of it counts after."""
        envelope = Envelope(
            role=role,
            turn=turn,
            n=0,
            host=COORDINATOR,
            epoch=self.epoch,
            tenure=claim.tenure,
            effect=Fence(tenure=claim.tenure, host=claim.worker),
        )
        msg_id = f"{self.run_id}/fx/{role}/fence/{self.epoch}/{claim.tenure}"
        await self.link.publish_many(
            [(fx_subject(self.run_id, role), encode(envelope), {"Nats-Msg-Id": msg_id})]
        )
        await self.intake.fenced_at(role, claim.tenure)

    async def _asked(
        self, proxy: RemoteMember, request: Callable[[Claim], Awaitable[bytes]]
    ) -> TurnAnswer:
        """The answer to a turn request (``request(claim)`` makes it for the claim's holder),
        asked again while none comes; fails when the role had no live claim for
        ``TAKEOVER_S``. An answer from another tenure than the one asked is not taken."""
        role = proxy.name
        subject = turn_subject(self.run_id, role)
        orphaned: float | None = None
        while True:
            claim = (await self.board.claims([role])).get(role)
            if claim is not None:
                orphaned = None
                asked = trio.current_time()
                try:
                    answer = decode_answer(
                        await self.link.request(subject, await request(claim), timeout=ASK_EVERY_S)
                    )
                except TimeoutError:
                    if trio.current_time() - asked < ASK_EVERY_S / 2:
                        await trio.sleep(0.2)  # no responder yet (a host starting): do not spin
                    continue
                if answer.tenure == proxy.tenure:
                    return answer
                logger.warning(
                    "turn of {} answered by {} (tenure {}), which it was not asked of "
                    "(tenure {}): not taken",
                    role,
                    answer.host,
                    answer.tenure,
                    proxy.tenure,
                )
                continue
            if orphaned is None and self.account is not None:
                await self.account.release_lapsed()  # the money a dead worker held
            orphaned = orphaned or time.monotonic()
            if time.monotonic() - orphaned > TAKEOVER_S:
                raise RemoteTurnFailed(
                    f"role {role!r} lost its worker and no other took it over within "
                    f"{TAKEOVER_S:g} s; start `sopbus worker --bus {self.link.url} --run "
                    f"{self.run_id} --roles {role}`, then `sopbus resume {self.run_id} --bus "
                    f"{self.link.url}`"
                )
            await trio.sleep(0.2)  # no responders comes back at once: do not spin

    def _unseen(self, proxy: RemoteMember) -> dict[str, bytes]:
        """The files of ``artifacts/`` the role's host has not got (new or changed)."""
        root = self.store.artifacts_dir
        out: dict[str, bytes] = {}
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            rel = path.relative_to(root).as_posix()
            data = path.read_bytes()
            digest = hashlib.sha256(data).hexdigest()
            if proxy.sent.get(rel) != digest:
                out[rel] = data
                proxy.sent[rel] = digest
        return out


@asynccontextmanager
async def coordinating(
    url: str,
    store: RunStore,
    plan: ScenarioPlan,
    *,
    cap: Decimal,
    wait_s: float,
    remote: frozenset[str] = frozenset(),
    epoch: int = 0,
) -> AsyncIterator[Coordinator]:
    """A :class:`Coordinator` for the run in ``store``, connected, its stream and bucket
    made, its account opened with ``cap`` (a resume's ``epoch`` keeps it), its effects
    applied for the block. Set ``gateway`` and ``journal`` before the
    first turn; call :meth:`Coordinator.members` to wait for the workers."""
    from ._link import open_link

    async with open_link(url, name=f"sopbus run {store.run_id}") as link:
        link.hide(store.redactor.secrets)  # what the run's files never hold, nor the server's
        coordinator = Coordinator(link, store, wait_s=wait_s, remote=remote, epoch=epoch)
        await coordinator.prepare(plan, cap)
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(coordinator.intake.read)
                yield coordinator
                await coordinator.stream.settle()
                nursery.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            # The run's own error (a ConfigError, Ctrl-C) as the run raised it, not wrapped
            # by this nursery: the CLI turns it into its message and exit code.
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from None
            raise
        finally:
            await coordinator.ended()


def plan_of(text: str, files: Sequence[Path], seed: int, origin: str = "") -> ScenarioPlan:
    """The plan a worker builds the team from: the scenario as run and its files' content
    (``origin``: see :attr:`ScenarioPlan.origin`)."""
    return ScenarioPlan(
        text=text,
        files={str(p): p.read_bytes() for p in files if p.is_file()},
        seed=seed,
        origin=origin,
    )
