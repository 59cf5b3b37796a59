"""A run's messages on JetStream: the coordinator puts them on the run's stream, and each
role hosted elsewhere reads its inbox from its own durable consumer.

The coordinator's :class:`~sopbus.bus.Environment` stays the one router. It logs the records of
every publish to a :class:`StreamLog`, which hands them to the run store as before and to
:meth:`RunStream.put`, which turns each message into what the routing contract needs on the
stream (subjects in :mod:`sopbus.bus.nats._subjects`):

* a message with no ``send_to`` -> one copy on ``act.<cause_by>``; the consumers of the
  roles that watch it take it, and the reader drops the sender's own (sender exclusion);
* an addressed message -> one copy per recipient the Environment resolved, on
  ``to.<role>``; an addressed message that reached nobody -> ``undelivered``.

So what a role's consumer yields is what the Environment delivered to it. Every copy has
a ``Nats-Msg-Id`` (``<run>/<msg id>`` or ``<run>/<msg id>/<role>``) and the stream keeps
ids for :data:`DUPLICATE_WINDOW`: a resumed coordinator that publishes the same messages
again is deduplicated by the server.

``put`` is called from sync code (the Environment's ``log_all``) and must not wait: it
encodes the messages on the trio side and hands them to a single publisher task on the
link's loop in one crossing (:meth:`Link.soon`); that task sends its queue in order and
never waits for acks: they are taken as they come (see ``_Publisher``).
:meth:`RunStream.settle` waits for the acks of everything put so far.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import msgspec

from .._environment import EventLog
from .._errors import SopbusError
from .._events import MessagePublished, MessageUndelivered
from .._message import Message
from ._inbox import Inbox
from ._link import Link
from ._subjects import (
    act_subject,
    consumer_name,
    run_subjects,
    stream_name,
    to_subject,
    undelivered_subject,
)

__all__ = ["DUPLICATE_WINDOW", "Inbox", "RunStream", "StreamError", "StreamLog"]

DUPLICATE_WINDOW = 24 * 3600.0
"""Seconds the stream remembers message ids: a coordinator resumed within a day after a
crash re-publishes nothing twice."""

ACK_TIMEOUT = 30.0
"""Seconds the publisher waits for the server's acks of one batch before it calls the
batch failed (a server that is gone, a stream that does not answer)."""

_encode = msgspec.json.encode
_replace = msgspec.structs.replace


class StreamError(SopbusError):
    """A run's stream refused or lost a message, or does not exist (or not as configured)."""


class _Item(NamedTuple):
    """One copy of a message, ready to publish; ``role`` names the recipient of a ``to``
    copy (``None`` for the one copy of a broadcast or an undelivered message)."""

    subject: str
    payload: bytes
    headers: dict[str, str]
    msg_id: str
    role: str | None


class RunStream:
    """The run's stream ``SOPBUS_<run id>``, seen from one process over ``link``."""

    def __init__(self, link: Link, run_id: str):
        self.link, self.run_id = link, run_id
        self.name = stream_name(run_id)
        self._publisher = _Publisher(self.name)
        # parents_as (bus._events.MessagePublished): the last message put with 2+ parents
        self._shared_id, self._shared = "", ()  # type: tuple[str, tuple[str, ...]]

    async def create(self) -> None:
        """Creates the run's stream, or leaves it as it is if it exists with the same
        configuration (a resumed coordinator, a worker that comes first)."""
        name, subjects = self.name, [run_subjects(self.run_id)]

        async def add(nc: Any, js: Any) -> None:
            try:
                await js.add_stream(name=name, subjects=subjects, duplicate_window=DUPLICATE_WINDOW)
            except Exception as exc:
                if getattr(exc, "err_code", None) == 10058:  # name in use, other configuration
                    raise StreamError(
                        f"stream {name} exists with another configuration than "
                        f"subjects={subjects}, duplicate_window={DUPLICATE_WINDOW:.0f} s "
                        f"({exc}); delete it (nats stream rm {name}) or start a new run"
                    ) from exc
                raise

        await self.link.call(add)

    def put(self, records: list[Any]) -> None:
        """Puts the messages of ``records`` (the Environment's ``message_published`` and
        ``message_undelivered`` records; others are ignored) on the stream, in order.

        Returns at once, callable from sync code; see :meth:`settle` for the outcome."""
        items = self._items(records)
        if items:
            publisher = self._publisher
            self.link.soon(lambda nc, js: publisher.enqueue(nc, items))

    async def settle(self) -> None:
        """Returns when everything put so far is on the stream; raises :class:`StreamError`
        for the first message that could not be put (and for every call after it: once a
        failure has come back, nothing more is sent, so a message missing from the stream
        is followed there by at most those already sent when its failure came back)."""
        await self.link.call(lambda nc, js: self._publisher.settled())

    def seq(self, msg_id: str, role: str | None = None) -> int:
        """The stream sequence of message ``msg_id`` after :meth:`settle`: its ``to`` copy for
        ``role`` when it was addressed, its one copy otherwise."""
        seqs = self._publisher.seqs
        found = seqs.get((msg_id, role)) if role is not None else None
        if found is None:
            found = seqs.get((msg_id, None))
        if found is None:
            copy = f" (the copy for {role})" if role is not None else ""
            raise KeyError(
                f"message {msg_id}{copy} is not on stream {self.name}: it was not "
                f"put, or RunStream.settle() has not returned since"
            )
        return found

    async def open_inbox(self, role: str, watch: Iterable[str], *, address: str = "") -> Inbox:
        """The inbox of ``role`` (which watches ``watch``): its durable pull consumer
        ``role-<token(role)>``, created or, if it exists, bound to (updated to this
        ``watch`` if that changed). ``address``: whose addressed mail it takes, if not the
        role's own (a population's shard reads the population's)."""
        address = address or role
        filters = [act_subject(self.run_id, a) for a in sorted(set(watch))]
        filters.append(to_subject(self.run_id, address))
        inbox = Inbox(
            self.link,
            self.name,
            address,
            consumer_name(role),
            act_prefix=f"sopbus.{self.run_id}.act.",
        )
        await inbox.open(filters)
        return inbox

    # -- from records to copies -----------------------------------------------------------

    def _items(self, records: list[Any]) -> list[_Item]:
        items: list[_Item] = []
        for record in records:
            kind = type(record)
            if kind is MessagePublished:
                self._copies(self._whole(record), record.recipients, items)
            elif kind is MessageUndelivered:
                self._copies(self._whole(record), (), items)
        return items

    def _whole(self, record: MessagePublished | MessageUndelivered) -> Message:
        """The record's message with its parents written out (see ``parents_as``)."""
        message = record.message
        if record.parents_as:
            if record.parents_as != self._shared_id:
                raise ValueError(
                    f"message {message.id} has the parents of {record.parents_as}, "
                    f"which is not the last message put with its parents written "
                    f"out ({self._shared_id or 'none'}); put a publish's records "
                    f"in one call, in order"
                )
            return _replace(message, parents=self._shared)
        if len(message.parents) > 1:
            self._shared_id, self._shared = message.id, message.parents
        return message

    def _copies(self, message: Message, recipients: Sequence[str], items: list[_Item]) -> None:
        run, payload, msg_id = self.run_id, self.link.scrubbed(_encode(message)), message.id
        if not message.send_to:
            items.append(
                _Item(
                    act_subject(run, message.cause_by),
                    payload,
                    {"Nats-Msg-Id": f"{run}/{msg_id}"},
                    msg_id,
                    None,
                )
            )
        elif not recipients:
            items.append(
                _Item(
                    undelivered_subject(run),
                    payload,
                    {"Nats-Msg-Id": f"{run}/{msg_id}"},
                    msg_id,
                    None,
                )
            )
        else:
            items.extend(
                _Item(
                    to_subject(run, role),
                    payload,
                    {"Nats-Msg-Id": f"{run}/{msg_id}/{role}"},
                    msg_id,
                    role,
                )
                for role in recipients
            )


class _Publisher:
    """The publishing side of a :class:`RunStream`. Lives on the link's loop: every method
    but the constructor runs there, so its state needs no lock (``seqs`` is only written
    there, and read by the trio side after a :meth:`settled` that saw the write).

    Sending never waits for acks. Each copy is a plain publish with a reply subject of its
    own (``<inbox>.<copy number>``) on which the stream answers; one subscription takes the
    answers as they come and records their sequences. (nats-py's ``publish_async`` would do
    the same with a future, a task wake-up and a read of the OS's random source per copy,
    which was a third of the publishing loop's time.) A timer fails the copies still
    unanswered when ``ACK_TIMEOUT`` passed with no answer at all. The first failure is
    sticky: nothing is sent after it came back (what was already sent may still be
    stored), and every later copy counts as failed."""

    def __init__(self, stream: str):
        self.stream = stream
        self.queue: list[_Item] = []
        self.put = 0  # copies handed over
        self.sent = 0  # copies numbered for sending (the number is in their reply subject)
        self.done = 0  # copies answered or failed
        self.unanswered: dict[int, _Item] = {}  # copy number -> copy, sent
        self.seqs: dict[tuple[str, str | None], int] = {}
        self.failure = ""  # the first failure, said for a person
        self.failed_cause: BaseException | None = None
        self.waiters: list[tuple[int, asyncio.Future[None]]] = []
        self.replies = ""  # the prefix of the reply subjects
        self.sender: asyncio.Task[None] | None = None
        self.timer: asyncio.TimerHandle | None = None

    def enqueue(self, nc: Any, items: list[_Item]) -> None:
        self.queue += items
        self.put += len(items)
        if self.sender is None or self.sender.done():
            self.sender = asyncio.get_running_loop().create_task(self._send(nc))

    async def settled(self) -> None:
        target = self.put
        if self.done < target:
            future = asyncio.get_running_loop().create_future()
            self.waiters.append((target, future))
            await future
        if self.failure:
            raise StreamError(self.failure) from self.failed_cause

    async def _send(self, nc: Any) -> None:
        try:
            if not self.replies:
                replies = nc.new_inbox()
                await nc.subscribe(f"{replies}.*", cb=self._answered)
                self.replies = replies
            while self.queue:
                batch, self.queue = self.queue, []
                for item in batch:
                    self.sent += 1
                    if self.failure:
                        self.done += 1
                        continue
                    self.unanswered[self.sent] = item
                    await nc.publish(
                        item.subject,
                        item.payload,
                        reply=f"{self.replies}.{self.sent}",
                        headers=item.headers,
                    )
                self._arm()
                self._wake()
        except Exception as exc:  # the connection is closed
            lost = [self.unanswered[n] for n in sorted(self.unanswered)[:1]] + self.queue
            said = str(exc) or type(exc).__name__
            self._give_up(
                _why(self.stream, lost[0], said)
                if lost
                else f"the publisher of stream {self.stream} failed: {said}",
                exc,
            )
        except BaseException as exc:  # a bug, or the loop closing: settle() must not hang
            self._give_up(f"the publisher of stream {self.stream} stopped: {exc!r}", exc)
            raise

    async def _answered(self, msg: Any) -> None:
        """The stream's answer to one copy: a PubAck, an error, or "no responders"."""
        item = self.unanswered.pop(int(msg.subject.rsplit(".", 1)[1]), None)
        if item is None:
            return  # a copy already counted as failed (its answer came too late)
        status = msg.headers.get("Status") if msg.headers else None
        if status == "503":
            self._fail(_no_stream(self.stream, item), StreamError("no responders"))
        else:
            answer = (
                _decode_answer(msg.data)
                if not status
                else _Answer(
                    error={"description": f"status {status} {msg.headers.get('Description', '')}"}
                )
            )
            if answer.error is not None:
                said = str(answer.error.get("description") or answer.error)
                self._fail(_why(self.stream, item, said), StreamError(said))
            elif not self.failure:
                self.seqs[item.msg_id, item.role] = answer.seq
        self.done += 1
        self._wake()

    def _arm(self) -> None:
        if self.timer is None and self.unanswered:
            self.timer = asyncio.get_running_loop().call_later(ACK_TIMEOUT, self._check, self.done)

    def _check(self, done_before: int) -> None:
        self.timer = None
        if self.unanswered and self.done == done_before:
            item = self.unanswered[min(self.unanswered)]
            self._give_up(
                _why(self.stream, item, f"no ack from the server within {ACK_TIMEOUT:.0f} s"),
                TimeoutError(),
            )
        self._arm()

    def _give_up(self, why: str, cause: BaseException) -> None:
        """Fails every copy not answered yet (and any still queued)."""
        self._fail(why, cause)
        self.unanswered.clear()
        self.queue = []
        self.done = self.sent = self.put
        self._wake()

    def _fail(self, why: str, cause: BaseException) -> None:
        if not self.failure:
            self.failure, self.failed_cause = why, cause

    def _wake(self) -> None:
        still = []
        for target, future in self.waiters:
            if self.done >= target:
                if not future.done():
                    future.set_result(None)
            else:
                still.append((target, future))
        self.waiters = still


class _Answer(msgspec.Struct):
    """What JetStream answers a publish: the copy's sequence, or an error."""

    seq: int = 0
    error: dict[str, Any] | None = None


_decode_answer = msgspec.json.Decoder(_Answer).decode


def _no_stream(stream: str, item: _Item) -> str:
    copy = f" (copy for {item.role})" if item.role else ""
    return (
        f"cannot put message {item.msg_id}{copy} on {item.subject}: no stream takes that "
        f"subject (no responders); the run's stream {stream} is missing: create it with "
        f"RunStream.create() before the first publish (or it was deleted)"
    )


def _why(stream: str, item: _Item, said: str) -> str:
    copy = f" (copy for {item.role})" if item.role else ""
    return f"cannot put message {item.msg_id}{copy} on {item.subject} (stream {stream}): {said}"


class StreamLog:
    """An event log (:class:`sopbus.bus._environment.EventLog`) that hands every record to
    ``inner`` (the run store, or ``None``) and the messages to ``stream``: give it to the
    coordinator's Environment and the stream holds the run's messages in log order."""

    def __init__(self, inner: EventLog | None, stream: RunStream):
        self.inner, self.stream = inner, stream

    def log(self, event: Any) -> None:
        if self.inner is not None:
            self.inner.log(event)
        if type(event) in (MessagePublished, MessageUndelivered):
            self.stream.put([event])

    def log_all(self, events: list[Any]) -> None:
        if self.inner is not None:
            self.inner.log_all(events)
        self.stream.put(events)
