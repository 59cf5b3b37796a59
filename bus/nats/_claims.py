"""The run's notice board on JetStream KV: the scenario, who hosts which role, the run's state.

Two buckets:

* ``SOPBUS_RUNS`` (shared by every run on the server): one key per run id, the run's
  :class:`Announcement` (``waiting`` for workers, ``running``, ``ended``). A worker started
  without ``--run`` watches it for runs to join.
* ``SOPBUS_<run>`` (the run's own bucket, history 1): ``scenario`` (the
  :class:`ScenarioPlan`: the scenario as run and the files it names, so that a worker on
  another machine builds the same team), ``hosts`` (the roles that run on workers, fixed by
  the coordinator when it stops waiting for claims), ``claim.<token(role)>`` (a
  :class:`Claim`), and ``budget`` (the run's cap, :mod:`bus.nats._account`).

Claims: a worker claims a role with KV ``create``, which is atomic: of two workers only one
gets it. It keeps the claim with a heartbeat (``update`` with ``last=`` its revision: a
compare-and-swap, so a worker that lost its claim learns it at its next beat) that moves
the lease on; a claim whose lease lapsed may be taken over by another worker with the same
compare-and-swap on the revision it read; a worker that exits cleanly deletes its claims.
Leases are wall-clock times of the claiming worker (``time.time()``): hosts whose clocks
disagree by more than a lease can take over a live claim, so keep clocks synchronised
(NTP) and leases well above the skew (the default is 10 s).
"""

from __future__ import annotations

import time
from typing import Any

import msgspec

from ._link import Link
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


class Claim(msgspec.Struct, frozen=True, kw_only=True):
    worker: str
    until: float  # the lease: wall-clock time (time.time()) until which the claim holds


class Announcement(msgspec.Struct, frozen=True, kw_only=True):
    run_id: str
    state: str  # waiting | running | ended
    t: float = 0.0


def bucket_name(run_id: str) -> str:
    return f"SOPBUS_{run_id}"


def _claim_key(role: str) -> str:
    return f"claim.{token(role)}"


async def _bucket(js: Any, name: str) -> Any:
    import nats.js.errors as jerr

    try:
        return await js.key_value(name)
    except jerr.BucketNotFoundError:
        return await js.create_key_value(bucket=name, history=1)


class RunBoard:
    """The run's bucket (see the module docstring), one crossing per operation."""

    def __init__(self, link: Link, run_id: str):
        self.link, self.run_id = link, run_id
        self.bucket = bucket_name(run_id)
        self._revisions: dict[str, int] = {}  # role -> revision of our claim

    async def open(self) -> None:
        async def fn(nc: Any, js: Any) -> None:
            await _bucket(js, self.bucket)
        await self.link.call(fn)

    async def _put(self, key: str, value: bytes) -> None:
        async def fn(nc: Any, js: Any) -> None:
            kv = await _bucket(js, self.bucket)
            await kv.put(key, value)
        await self.link.call(fn)

    async def _get(self, key: str) -> tuple[bytes, int] | None:
        async def fn(nc: Any, js: Any) -> tuple[bytes, int] | None:
            import nats.js.errors as jerr

            kv = await _bucket(js, self.bucket)
            try:
                entry = await kv.get(key)
            except jerr.KeyNotFoundError:
                return None
            return (bytes(entry.value or b""), int(entry.revision or 0))
        return await self.link.call(fn)

    async def put_scenario(self, plan: ScenarioPlan) -> None:
        await self._put("scenario", msgspec.json.encode(plan))

    async def scenario(self) -> ScenarioPlan | None:
        found = await self._get("scenario")
        return None if found is None else msgspec.json.decode(found[0], type=ScenarioPlan)

    async def set_hosts(self, roles: list[str]) -> None:
        await self._put("hosts", msgspec.json.encode(roles))

    async def hosts(self) -> list[str] | None:
        """The roles that run on workers (``None`` while the coordinator still waits)."""
        found = await self._get("hosts")
        return None if found is None else msgspec.json.decode(found[0], type=list[str])

    async def claim(self, role: str, worker: str, lease_s: float = LEASE_S) -> bool:
        """Claims ``role`` for ``worker``: a free role (atomic create), or one whose lease
        lapsed (compare-and-swap on the revision read). False when another worker holds it."""
        key, value = _claim_key(role), msgspec.json.encode(Claim(worker=worker, until=time.time() + lease_s))

        async def fn(nc: Any, js: Any) -> int | None:
            import nats.js.errors as jerr

            kv = await _bucket(js, self.bucket)
            try:
                return int(await kv.create(key, value))
            except jerr.KeyWrongLastSequenceError:
                pass
            try:
                entry = await kv.get(key)
            except jerr.KeyNotFoundError:
                return None  # deleted between the two: the next try creates it
            held = msgspec.json.decode(entry.value, type=Claim)
            if held.worker != worker and held.until > time.time():
                return None
            try:
                return int(await kv.update(key, value, last=entry.revision))
            except jerr.KeyWrongLastSequenceError:
                return None  # another worker took it over first
        revision = await self.link.call(fn)
        if revision is None:
            return False
        self._revisions[role] = revision
        return True

    async def heartbeat(self, role: str, worker: str, lease_s: float = LEASE_S) -> bool:
        """Moves ``worker``'s lease on ``role`` on; False when the claim was lost (taken over
        after a lapse, or deleted)."""
        last = self._revisions.get(role)
        if last is None:
            return False
        key, value = _claim_key(role), msgspec.json.encode(Claim(worker=worker, until=time.time() + lease_s))

        async def fn(nc: Any, js: Any) -> int | None:
            import nats.js.errors as jerr

            kv = await _bucket(js, self.bucket)
            try:
                return int(await kv.update(key, value, last=last))
            except jerr.KeyWrongLastSequenceError:
                return None
        revision = await self.link.call(fn)
        if revision is None:
            self._revisions.pop(role, None)
            return False
        self._revisions[role] = revision
        return True

    async def release(self, role: str) -> None:
        """Deletes our claim on ``role`` (only if it is still ours: compare-and-swap)."""
        last = self._revisions.pop(role, None)
        if last is None:
            return
        key = _claim_key(role)

        async def fn(nc: Any, js: Any) -> None:
            import nats.js.errors as jerr

            kv = await _bucket(js, self.bucket)
            try:
                await kv.delete(key, last=last)
            except jerr.KeyWrongLastSequenceError:
                pass  # taken over meanwhile: not ours to delete
        await self.link.call(fn)

    async def claims(self, roles: list[str]) -> dict[str, Claim]:
        """The live claims on ``roles`` (lapsed leases left out)."""
        keys = {role: _claim_key(role) for role in roles}

        async def fn(nc: Any, js: Any) -> dict[str, bytes]:
            import nats.js.errors as jerr

            kv = await _bucket(js, self.bucket)
            found = {}
            for role, key in keys.items():
                try:
                    entry = await kv.get(key)
                except jerr.KeyNotFoundError:
                    continue
                found[role] = bytes(entry.value or b"")
            return found
        raw = await self.link.call(fn)
        now = time.time()
        claims = {role: msgspec.json.decode(value, type=Claim) for role, value in raw.items()}
        return {role: claim for role, claim in claims.items() if claim.until > now}


async def announce(link: Link, run_id: str, state: str) -> None:
    """Says in ``SOPBUS_RUNS`` that the run is ``state`` (waiting, running, ended)."""
    value = msgspec.json.encode(Announcement(run_id=run_id, state=state, t=time.time()))

    async def fn(nc: Any, js: Any) -> None:
        kv = await _bucket(js, RUNS_BUCKET)
        await kv.put(run_id, value)
    await link.call(fn)


async def announced(link: Link) -> list[Announcement]:
    """Every run in ``SOPBUS_RUNS``, oldest first. (The keys are read from the bucket's
    stream state: ``kv.keys()`` would make a watcher consumer on every call.)"""
    async def fn(nc: Any, js: Any) -> list[bytes]:
        import nats.js.errors as jerr

        kv = await _bucket(js, RUNS_BUCKET)
        info = await js.stream_info(f"KV_{RUNS_BUCKET}", subjects_filter=f"$KV.{RUNS_BUCKET}.>")
        keys = [subject.split(".", 2)[2] for subject in (info.state.subjects or {})]
        out = []
        for key in keys:
            try:
                out.append(bytes((await kv.get(key)).value or b""))
            except jerr.KeyNotFoundError:
                continue
        return out
    runs = [msgspec.json.decode(raw, type=Announcement) for raw in await link.call(fn)]
    return sorted(runs, key=lambda a: a.t)


async def run_state(link: Link, run_id: str) -> str | None:
    """The state ``SOPBUS_RUNS`` has for ``run_id`` (``None``: not announced)."""
    async def fn(nc: Any, js: Any) -> bytes | None:
        import nats.js.errors as jerr

        kv = await _bucket(js, RUNS_BUCKET)
        try:
            return bytes((await kv.get(run_id)).value or b"")
        except jerr.KeyNotFoundError:
            return None
    raw = await link.call(fn)
    return None if raw is None else msgspec.json.decode(raw, type=Announcement).state
