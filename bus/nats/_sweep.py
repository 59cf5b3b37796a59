"""A sweep's runs on a JetStream work queue: what ``sopbus sweep --bus`` and ``sopbus worker``
share (issue 18). Payloads are bytes here; what they mean is :mod:`sopbus.sweep._wire`'s.

One stream per sweep, ``SOPBUS_SWEEP_<sweep id>`` on ``sopbus.sweep.<sweep id>.>``, with
work-queue retention (a message is gone once acked, so the stream holds only the work not
done and the news not read yet):

* ``sopbus.sweep.<id>.job``: one message per run to execute, ``Nats-Msg-Id`` = the run id,
  so a run submitted twice is queued once. Every worker pulls from the one durable consumer
  ``workers`` (explicit ack): a job goes to one worker at a time. The worker acks it only
  after the run's result is on the stream, and says "still working" (``+WPI``) every third
  of the lease; a worker that goes silent for ``lease_s`` (killed, cut off) has its job
  delivered again to another worker.  A job is delivered at most :data:`MAX_DELIVER` times: a run
  that kills every worker that takes it (or whose workers all lose the server) is then given
  up, and the server's max-deliveries advisory (:func:`exhausted_subject`) tells the sweep,
  which counts the run ``crashed``.
* ``sopbus.sweep.<id>.event``: what workers report (a run started, a run ended and how),
  read by the sweep process through the durable consumer ``sweep``.

The sweep announces itself in the KV bucket ``SOPBUS_SWEEPS`` under its id (a
:class:`SweepNotice`'s JSON); workers list that bucket to find work, and the sweep deletes
its key when it ends (:func:`withdraw_notice`), then its stream and its account's bucket.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from ._link import Link

SWEEPS_BUCKET = "SOPBUS_SWEEPS"
WORKERS = "workers"
SWEEP = "sweep"
MAX_DELIVER = 3
"""How many times a job is delivered at most (the first delivery and two more, each after a
worker went silent for the lease) before the sweep gives its run up as ``crashed``."""


class SweepNotice(msgspec.Struct, frozen=True, kw_only=True):
    """A sweep open for workers: where its jobs and its account are, how to run them."""

    #: The sweep's id (``YYYYmmdd-HHMMSS-slug-hex``: safe in stream names and subjects).
    sweep_id: str
    #: The KV bucket of the sweep's :class:`~sopbus.bus.nats._account.NatsAccount`.
    account_bucket: str
    #: ``processes`` (simulator, replay: one process per run) or ``tasks`` (a real provider).
    executor: str
    #: Seconds a worker may go silent before its job goes to another worker.
    lease_s: float
    #: How the user raises the sweep's cap (ends a refusal's message).
    fix: str


def stream_name(sweep_id: str) -> str:
    return f"SOPBUS_SWEEP_{sweep_id}"


def job_subject(sweep_id: str) -> str:
    return f"sopbus.sweep.{sweep_id}.job"


def event_subject(sweep_id: str) -> str:
    return f"sopbus.sweep.{sweep_id}.event"


def exhausted_subject(sweep_id: str) -> str:
    """The server's advisory (core NATS) that a job of the sweep was delivered
    :data:`MAX_DELIVER` times and is not delivered again."""
    return f"$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.{stream_name(sweep_id)}.{WORKERS}"


async def exhausted_job(link: Link, sweep_id: str, advisory: bytes) -> bytes | None:
    """The job (its payload) a max-deliveries ``advisory`` is about; ``None`` when the stream
    no longer has it (acked meanwhile: its run did end)."""
    seq = int(msgspec.json.decode(advisory).get("stream_seq", 0))

    async def read(nc: Any, js: Any) -> bytes | None:
        try:
            return bytes((await js.get_msg(stream_name(sweep_id), seq=seq)).data or b"")
        except Exception:  # nats' NotFoundError: gone
            return None

    return await link.call(read) if seq else None


class Taken:
    """A message taken from a consumer: its payload, how often it was delivered, and the
    client's handle to ack it (used on the link's loop only)."""

    __slots__ = ("_msg", "data", "delivered")

    def __init__(self, msg: Any):
        self.data: bytes = bytes(msg.data)
        self.delivered: int = int(msg.metadata.num_delivered)
        self._msg = msg


async def open_sweep(link: Link, notice: SweepNotice) -> None:
    """Creates the sweep's stream and its two consumers, then announces it (in that order:
    a worker that sees the notice finds the queue)."""
    sweep_id = notice.sweep_id

    async def create(nc: Any, js: Any) -> None:
        await js.add_stream(
            name=stream_name(sweep_id),
            subjects=[f"sopbus.sweep.{sweep_id}.>"],
            retention="workqueue",
        )
        await js.add_consumer(
            stream_name(sweep_id),
            durable_name=WORKERS,
            ack_policy="explicit",
            filter_subject=job_subject(sweep_id),
            ack_wait=notice.lease_s,
            max_ack_pending=-1,
            max_deliver=MAX_DELIVER,
        )
        await js.add_consumer(
            stream_name(sweep_id),
            durable_name=SWEEP,
            ack_policy="explicit",
            filter_subject=event_subject(sweep_id),
            max_ack_pending=-1,
        )

    await link.call(create)
    await link.put_key(await link.key_value(SWEEPS_BUCKET), sweep_id, msgspec.json.encode(notice))


async def withdraw_notice(link: Link, sweep_id: str) -> None:
    """Takes the sweep's notice down: workers take no more of its jobs and cancel the runs
    of it they have (they report each on the stream, which stays until
    :func:`delete_queue`). No error when it is gone already."""
    kv = await link.key_value(SWEEPS_BUCKET)

    async def withdraw(nc: Any, js: Any) -> None:
        await _gone(kv.delete(sweep_id))

    await link.call(withdraw)


async def delete_queue(link: Link, sweep_id: str) -> None:
    """Deletes the sweep's stream (jobs not taken are dropped)."""

    async def delete(nc: Any, js: Any) -> None:
        await _gone(js.delete_stream(stream_name(sweep_id)))

    await link.call(delete)


async def delete_bucket(link: Link, bucket: str) -> None:
    """Deletes a KV bucket (the sweep's account, once its books are copied)."""

    async def delete(nc: Any, js: Any) -> None:
        await _gone(js.delete_key_value(bucket))

    await link.call(delete)


async def _gone(step: Any) -> None:
    try:
        await step
    except Exception:  # nats' NotFoundError and kin: already gone
        pass


async def submit(link: Link, sweep_id: str, jobs: Sequence[tuple[str, bytes]]) -> None:
    """Queues ``(run id, payload)`` jobs in order, in one crossing."""
    await link.publish_many(
        [(job_subject(sweep_id), data, {"Nats-Msg-Id": run_id}) for run_id, data in jobs]
    )


async def report(link: Link, sweep_id: str, msg_id: str, data: bytes) -> None:
    """Puts a worker's event on the sweep's stream (``msg_id`` makes a repeat a no-op)."""
    await link.publish_many([(event_subject(sweep_id), data, {"Nats-Msg-Id": msg_id})])


async def notices(link: Link) -> list[SweepNotice]:
    """The sweeps open for workers now, oldest first. A server that does not answer raises
    (a worker asks again later): taken for "no sweep", it would make every worker cancel
    the runs it has."""
    kv = await link.key_value(SWEEPS_BUCKET)
    found = []
    for key in sorted(await link.keys(kv)):
        got = await link.get_key(kv, key)
        if got is not None and got[0]:  # None: withdrawn between keys() and get()
            found.append(msgspec.json.decode(got[0], type=SweepNotice))
    return found


class Puller:
    """One durable consumer of a sweep's stream, pulled from trio."""

    def __init__(self, link: Link, sweep_id: str, consumer: str):
        self._link, self._stream, self._consumer = link, stream_name(sweep_id), consumer
        self._sub: Any = None

    async def take(self, count: int, wait: float) -> list[Taken]:
        """Up to ``count`` messages, waiting up to ``wait`` seconds for the first."""

        async def fetch(nc: Any, js: Any) -> list[Taken]:
            if self._sub is None:
                self._sub = await js.pull_subscribe_bind(self._consumer, stream=self._stream)
            try:
                return [Taken(m) for m in await self._sub.fetch(count, timeout=wait)]
            except TimeoutError:  # nats' TimeoutError is one: nothing came
                return []

        return await self._link.call(fetch)

    async def ack(self, taken: Taken) -> None:
        """Done with it: the stream drops it (waits for the server's confirmation)."""
        await self._link.call(lambda nc, js: taken._msg.ack_sync())

    async def working(self, taken: Taken) -> None:
        """Still on it: its ack wait starts again."""
        await self._link.call(lambda nc, js: taken._msg.in_progress())

    async def give_back(self, taken: Taken) -> None:
        """Not done: delivered again at once (to whichever worker asks next)."""
        await self._link.call(lambda nc, js: taken._msg.nak())

    async def close(self) -> None:
        if self._sub is not None:
            sub, self._sub = self._sub, None
            await self._link.call(lambda nc, js: sub.unsubscribe())
