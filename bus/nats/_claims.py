"""The run's notice board on JetStream KV: the scenario, who hosts which role, the run's state.

Two buckets:

* ``SOPBUS_RUNS`` (shared by every run on the server): one key per run id, the run's
  :class:`Announcement` (``waiting`` for workers, ``running``, ``ended``). A worker started
  without ``--run`` watches it for runs to join.
* ``SOPBUS_<run>`` (the run's own bucket, history 1): ``scenario`` (the
  :class:`ScenarioPlan`: the scenario as run and the files it names, so that a worker on
  another machine builds the same team), ``problem`` (a worker's :class:`Problem`: why it
cannot build the team, which ends a run waiting for it at once), ``hosts`` (the roles that run on workers, fixed by
  the coordinator when it stops waiting for claims), ``claim.<token(role)>`` (a
  :class:`Claim`), and ``budget`` (the run's cap, :mod:`sopbus.bus.nats._account`).

Claims: a worker claims a role with KV ``create``, which is atomic: of two workers only one
gets it. It keeps the claim with a heartbeat (``update`` with ``last=`` its revision: a
compare-and-swap, so a worker that lost its claim learns it at its next beat) that moves
the lease on; a claim whose lease lapsed may be taken over by another worker with the same
compare-and-swap on the revision it read; a worker that exits cleanly deletes its claims.
The KV revision at which a worker took a claim is its tenure's fencing token
(:attr:`Claim.tenure`): the coordinator accepts a role's turn answers and effects from the
current tenure only (:mod:`sopbus.bus.nats._remote`), so a holder that was paused past its lease
cannot deliver a turn that was given to another.
Leases are wall-clock times of the claiming worker (``time.time()``): hosts whose clocks
disagree by more than a lease can take over a live claim, so keep clocks synchronised
(NTP) and leases well above the skew (the default is 10 s).
"""

from __future__ import annotations

import time
from typing import Any

import msgspec
import msgspec.structs

from ._link import KeyExists, Link, WrongRevision
from ._subjects import token

RUNS_BUCKET = "SOPBUS_RUNS"
LEASE_S = 10.0
COORDINATOR = "coordinator"
"""The coordinator's holder on the run's account (a worker's is its worker id)."""
CAP_FIX = "raise [run].budget_usd or --budget"


class ScenarioPlan(msgspec.Struct, frozen=True, kw_only=True):
    """What a worker needs to build the run's team: the scenario as run (TOML text) and the
    files it names by absolute path (fixtures, a cassette), with their content."""

    text: str
    files: dict[str, bytes] = {}
    seed: int = 0
    origin: str = ""
    """The scenario file the run was made from, on the coordinator's machine: a worker that
    can read it takes the whole base URL from it when the scenario as run keeps the URL's
    credentials blanked (never sent: they stay out of the stream and the buckets)."""


class Problem(msgspec.Struct, frozen=True, kw_only=True):
    """Why a worker cannot host the run's roles (it cannot build the team)."""

    worker: str
    message: str


class Claim(msgspec.Struct, frozen=True, kw_only=True):
    worker: str
    until: float  # the lease: wall-clock time (time.time()) until which the claim holds
    tenure: int = 0
    """The fencing token of this holder's tenure: the KV revision at which it took the claim
    (0 in that first write itself; :meth:`RunBoard.claims` fills it in). Heartbeats keep it,
    a takeover makes a higher one, so a holder whose lease lapsed while it was alive (a long
    pause) carries a token the coordinator no longer accepts."""


class Announcement(msgspec.Struct, frozen=True, kw_only=True):
    run_id: str
    state: str  # waiting | running | ended
    t: float = 0.0


def bucket_name(run_id: str) -> str:
    return f"SOPBUS_{run_id}"


def _claim_key(role: str) -> str:
    return f"claim.{token(role)}"


class RunBoard:
    """The run's bucket (see the module docstring), one crossing per operation."""

    def __init__(self, link: Link, run_id: str):
        self.link, self.run_id = link, run_id
        self.bucket = bucket_name(run_id)
        self._kv: Any = None
        self._revisions: dict[str, int] = {}  # role -> revision of our claim
        self._tenures: dict[str, int] = {}  # role -> our tenure's fencing token

    async def open(self) -> None:
        self._kv = await self.link.key_value(self.bucket)

    async def _bucket(self) -> Any:
        if self._kv is None:
            await self.open()
        return self._kv

    async def _put(self, key: str, value: bytes) -> None:
        await self.link.put_key(await self._bucket(), key, value)

    async def _get(self, key: str) -> tuple[bytes, int] | None:
        return await self.link.get_key(await self._bucket(), key)

    async def put_scenario(self, plan: ScenarioPlan) -> None:
        await self._put("scenario", msgspec.json.encode(plan))

    async def scenario(self) -> ScenarioPlan | None:
        found = await self._get("scenario")
        return None if found is None else msgspec.json.decode(found[0], type=ScenarioPlan)

    async def put_problem(self, problem: Problem) -> None:
        """Tells the coordinator why a worker cannot host the run (the last one told)."""
        await self._put("problem", msgspec.json.encode(problem))

    async def problem(self) -> Problem | None:
        found = await self._get("problem")
        return None if found is None else msgspec.json.decode(found[0], type=Problem)

    async def set_hosts(self, roles: list[str]) -> None:
        await self._put("hosts", msgspec.json.encode(roles))

    async def hosts(self) -> list[str] | None:
        """The roles that run on workers (``None`` while the coordinator still waits)."""
        found = await self._get("hosts")
        return None if found is None else msgspec.json.decode(found[0], type=list[str])

    def tenure(self, role: str) -> int:
        """The fencing token of our claim on ``role`` (see :attr:`Claim.tenure`); 0: none."""
        return self._tenures.get(role, 0)

    async def claim(self, role: str, worker: str, lease_s: float = LEASE_S) -> bool:
        """Claims ``role`` for ``worker``: a free role (atomic create), or one whose lease
        lapsed (compare-and-swap on the revision read). False when another worker holds it.
        The revision written is the new tenure's fencing token."""
        kv, key = await self._bucket(), _claim_key(role)
        value = msgspec.json.encode(Claim(worker=worker, until=time.time() + lease_s))
        try:
            revision = await self.link.create_key(kv, key, value)
        except KeyExists:
            found = await self.link.get_key(kv, key)
            if found is None:
                return False  # deleted between the two: the next try creates it
            held = msgspec.json.decode(found[0], type=Claim)
            if held.worker != worker and held.until > time.time():
                return False
            try:
                revision = await self.link.update_key(kv, key, value, last=found[1])
            except WrongRevision:
                return False  # another worker took it over first
        self._revisions[role] = self._tenures[role] = revision
        return True

    async def heartbeat(self, role: str, worker: str, lease_s: float = LEASE_S) -> bool:
        """Moves ``worker``'s lease on ``role`` on; False when the claim was lost (taken over
        after a lapse, or deleted)."""
        last = self._revisions.get(role)
        if last is None:
            return False
        value = msgspec.json.encode(
            Claim(worker=worker, until=time.time() + lease_s, tenure=self._tenures[role])
        )
        try:
            self._revisions[role] = await self.link.update_key(
                await self._bucket(), _claim_key(role), value, last=last
            )
        except WrongRevision:
            self._revisions.pop(role, None)
            self._tenures.pop(role, None)
            return False
        return True

    async def release(self, role: str) -> None:
        """Deletes our claim on ``role`` (only if it is still ours: compare-and-swap)."""
        last = self._revisions.pop(role, None)
        self._tenures.pop(role, None)
        if last is None:
            return
        try:
            await self.link.delete_key(await self._bucket(), _claim_key(role), last=last)
        except WrongRevision:
            pass  # taken over meanwhile: not ours to delete

    async def claims(self, roles: list[str]) -> dict[str, Claim]:
        """The live claims on ``roles`` (lapsed leases left out), their tenures filled in."""
        kv = await self._bucket()
        now, live = time.time(), {}
        for role in roles:
            found = await self.link.get_key(kv, _claim_key(role))
            if found is None:
                continue
            claim = msgspec.json.decode(found[0], type=Claim)
            if claim.until > now:
                live[role] = (
                    claim if claim.tenure else msgspec.structs.replace(claim, tenure=found[1])
                )
        return live


async def _runs_bucket(link: Link) -> Any:
    return await link.key_value(RUNS_BUCKET)


async def announce(link: Link, run_id: str, state: str) -> None:
    """Says in ``SOPBUS_RUNS`` that the run is ``state`` (waiting, running, ended)."""
    value = msgspec.json.encode(Announcement(run_id=run_id, state=state, t=time.time()))

    await link.put_key(await _runs_bucket(link), run_id, value)


async def announced(link: Link) -> list[Announcement]:
    """Every run in ``SOPBUS_RUNS``, oldest first. (The keys are read from the bucket's
    stream state: ``kv.keys()`` would make a watcher consumer on every call.)"""
    kv = await _runs_bucket(link)

    async def fn(nc: Any, js: Any) -> list[str]:
        info = await js.stream_info(f"KV_{RUNS_BUCKET}", subjects_filter=f"$KV.{RUNS_BUCKET}.>")
        return [subject.split(".", 2)[2] for subject in (info.state.subjects or {})]

    found = [await link.get_key(kv, key) for key in await link.call_patiently(fn)]
    runs = [msgspec.json.decode(raw[0], type=Announcement) for raw in found if raw is not None]
    return sorted(runs, key=lambda a: a.t)


async def run_state(link: Link, run_id: str) -> str | None:
    """The state ``SOPBUS_RUNS`` has for ``run_id`` (``None``: not announced)."""
    found = await link.get_key(await _runs_bucket(link), run_id)
    return None if found is None else msgspec.json.decode(found[0], type=Announcement).state
