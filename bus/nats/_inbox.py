"""A role's inbox on JetStream: its durable pull consumer, read from trio.

The consumer ``role-<token(role)>`` takes the role's subjects of the run's stream
(``act.<A>`` for each watched action ``A``, and ``to.<role>``) with explicit acks. The
coordinator decides what a turn reads (the message ids and stream sequences its
Environment delivered to the role); :meth:`Inbox.read` returns exactly those:

* from the consumer, holding whatever else it yields for a later turn, and passing over
  the role's own broadcasts (sender exclusion: the ``act`` subjects are shared by every
  watcher, the sender included) and anything it has read before (a redelivery);
* a wanted message the consumer no longer gives (acked by an earlier host of the role,
  or waiting for the ack of a host that died) comes from the stream by its sequence.

Stream order is the coordinator's publish order and a turn reads all the role's news, so
a held message older than the newest one a turn wanted will never be wanted (it came
before the role joined, or while it was away): it is passed over and acked.

Pulling: the inbox subscribes (core NATS, with a callback) to a private reply subject and
sends the consumer's pull requests itself, each a one-shot request (``no_wait`` with
``expires``): the server delivers what the consumer has at once, or the first messages that
come within ``expires``, then ends the request with a status message on the request's own
reply subject (none when the batch is full). A read waits for that end (or its deadline),
never for a full batch and never by polling; every delivery is held by the callback as it
arrives, also one that comes after its read gave up (a cancelled read loses nothing: it is
held for the next). A read with nothing to wait for (``timeout=0``, or a turn's wanted
list) sends a plain ``no_wait`` request, which the server ends at once.
nats-py's ``fetch`` is not used: it makes a task per message, can strand the tail of a
pull in its queue, and leaves that queue in a state in which draining the connection
waits out its timeout.

``ACK_WAIT`` is a minute: a host acks a turn's messages once its answer was taken, which
can be minutes after the read for a slow model; a message whose ack is late is only
redelivered (and passed over), and a new host does not wait for it (it reads by sequence),
so a short wait costs some redeliveries and a long one costs nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import msgspec

from .._message import Message
from ._link import Link

ACK_WAIT = 60.0
"""Seconds the server waits for a message's ack before it redelivers it."""

_POLL = 0.02  # seconds between two looks at the stream for a wanted message it lacks
_SLACK = 1.0  # seconds the inbox waits for the end of a pull beyond its ``expires``
_BATCH = 1000  # most messages asked of the consumer in one pull
_decode = msgspec.json.Decoder(Message).decode
_encode = msgspec.json.encode


class Inbox:
    """The inbox of one role on the run's stream; open it with
    :meth:`sopbus.bus.nats._stream.RunStream.open_inbox`. One task reads it at a time."""

    def __init__(self, link: Link, stream: str, role: str, consumer: str, *, act_prefix: str):
        self.link, self.stream, self.role, self.consumer = link, stream, role, consumer
        self._act_prefix = act_prefix
        # From here on, state of the link's loop (touched only inside `link.call` and the
        # subscription's callback).
        self._sub: Any = None  # the subscription to the reply subjects of our pulls
        self._replies = ""  # their prefix: `<inbox>.<pull number>`
        self._next = f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer}"
        self._pulls = 0  # pull requests sent
        self._ends: dict[str, asyncio.Future[None]] = {}  # reply subject -> its end, awaited
        self._full: tuple[int, asyncio.Future[None]] | None = None  # the pull under way ends
        #             when `_got` reaches this (a full batch comes with no status after it)
        self._got = 0  # deliveries so far (held, redelivered or passed over)
        self._held: dict[int, tuple[Message, Any]] = {}  # seq -> delivered, not read yet
        self._read: set[int] = set()  # seqs handed out (a redelivery of one is passed over)
        self._unacked: list[Any] = []  # consumer messages read or passed over

    async def open(self, filters: list[str]) -> None:
        """Creates the consumer (or binds to it) with ``filters`` as its subjects."""
        stream, consumer = self.stream, self.consumer

        async def create(nc: Any, js: Any) -> None:
            await js.add_consumer(
                stream,
                durable_name=consumer,
                filter_subjects=filters,
                ack_policy="explicit",
                ack_wait=ACK_WAIT,
                max_ack_pending=-1,
            )  # held messages are acked every turn
            self._replies = nc.new_inbox()
            self._sub = await nc.subscribe(f"{self._replies}.*", cb=self._arrived)

        await self.link.call(create)

    async def close(self) -> None:
        """Stops reading (unsubscribes); the consumer stays for the role's next host. What
        was delivered and not acked goes to that host after ``ACK_WAIT``. Call it when this
        process stops hosting the role; closing twice does nothing."""

        async def unsubscribe(nc: Any, js: Any) -> None:
            sub, self._sub = self._sub, None
            for end in self._ends.values():
                if not end.done():
                    end.set_result(None)
            if sub is not None:
                await sub.unsubscribe()

        await self.link.call(unsubscribe)

    async def read(self, wanted: Sequence[tuple[str, int]], *, timeout: float) -> list[Message]:
        """The messages ``wanted`` as ``(msg id, stream seq)``, in that order. Raises
        :class:`TimeoutError` naming those not found within ``timeout`` seconds."""
        return await self.link.call(lambda nc, js: self._read_wanted(nc, js, list(wanted), timeout))

    async def read_available(self, *, max: int = 1000, timeout: float = 0.5) -> list[Message]:
        """What the consumer has now (up to ``max``, in stream order, the role's own
        broadcasts left out); waits up to ``timeout`` seconds for a first message."""
        return await self.link.call(lambda nc, js: self._read_available(nc, max, timeout))

    async def ack(self) -> None:
        """Acks every message read (or passed over) so far, in one crossing. Returns once the
        acks are handed to the connection, which sends them at once; it does not wait for a
        round trip to the server: an ack lost with a dying host costs a redelivery, which the
        role's next host passes over."""

        async def ack_all(nc: Any, js: Any) -> None:
            unacked, self._unacked = self._unacked, []
            for msg in unacked:
                await msg.ack()

        await self.link.call(ack_all)

    # -- on the link's loop ----------------------------------------------------------------

    async def _read_wanted(
        self, nc: Any, js: Any, wanted: list[tuple[str, int]], timeout: float
    ) -> list[Message]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        from_stream: dict[int, Message] = {}
        while True:
            missing = [(i, s) for i, s in wanted if s not in self._held and s not in from_stream]
            if not missing:
                break
            if await self._pull(nc, _BATCH, wait=0):
                continue
            for msg_id, seq in missing:  # what the consumer does not give comes by sequence
                message = await self._by_seq(js, msg_id, seq)
                if message is not None:
                    from_stream[seq] = message
            left = deadline - loop.time()
            if len(from_stream) < len(missing) and left <= 0:
                gone = [i for i, s in missing if s not in from_stream]
                raise TimeoutError(
                    f"role {self.role}: message(s) {', '.join(gone)} not found on "
                    f"stream {self.stream} within {timeout} s (wanted as {wanted})"
                )
            if len(from_stream) < len(missing):
                await asyncio.sleep(min(_POLL, left))
        return self._hand_out(wanted, from_stream)

    def _hand_out(
        self, wanted: list[tuple[str, int]], from_stream: dict[int, Message]
    ) -> list[Message]:
        out = []
        for _, seq in wanted:
            held = self._held.pop(seq, None)
            if held is None:
                out.append(from_stream[seq])
            else:
                out.append(held[0])
                self._unacked.append(held[1])
            self._read.add(seq)
        newest = max((s for _, s in wanted), default=0)
        for seq in [s for s in self._held if s < newest]:  # never wanted (module docstring)
            self._unacked.append(self._held.pop(seq)[1])
            self._read.add(seq)
        return out

    async def _read_available(self, nc: Any, most: int, timeout: float) -> list[Message]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while len(self._held) < most:
            # something held already: only what the consumer has now, no waiting for more
            wait = 0.0 if self._held else max(deadline - loop.time(), 0.0)
            await self._pull(nc, most - len(self._held), wait=wait)
            if self._held or loop.time() >= deadline:
                break
        out = []
        for seq in sorted(self._held)[:most]:
            message, msg = self._held.pop(seq)
            out.append(message)
            self._unacked.append(msg)
            self._read.add(seq)
        return out

    async def _pull(self, nc: Any, most: int, *, wait: float) -> bool:
        """Asks the consumer for up to ``most`` messages, waiting up to ``wait`` seconds for
        a first one (0: none, only what it has now), and returns when the server ended the
        request (module docstring). True when something was delivered meanwhile."""
        if self._sub is None:
            raise RuntimeError(f"the inbox of role {self.role} is closed")
        self._pulls += 1
        reply = f"{self._replies}.{self._pulls}"
        end = self._ends[reply] = asyncio.get_running_loop().create_future()
        got = self._got
        self._full = (got + most, end)
        request: dict[str, Any] = {"batch": most, "no_wait": True}
        if wait > 0:
            request["expires"] = int(wait * 1e9)
        try:
            await nc.publish(self._next, _encode(request), reply=reply)
            await asyncio.wait_for(end, wait + _SLACK)
        except TimeoutError:  # no word from the server: what came is held all the same
            pass
        finally:
            del self._ends[reply]
            self._full = None
        return self._got > got

    async def _arrived(self, msg: Any) -> None:
        """The subscription's callback: a delivery, or the status that ends a pull."""
        if msg.subject.startswith(self._replies):
            if msg.headers and msg.headers.get("Status") == "100":
                return  # a heartbeat; the pull goes on
            end = self._ends.get(msg.subject)
            if end is not None and not end.done():
                end.set_result(None)
            return
        self._got += 1
        self._hold(msg)
        if self._full is not None and self._got >= self._full[0] and not self._full[1].done():
            self._full[1].set_result(None)

    def _hold(self, msg: Any) -> None:
        seq = int(msg.metadata.sequence.stream)
        if seq in self._read or seq in self._held:
            self._unacked.append(msg)  # a redelivery
            return
        message = _decode(msg.data)
        if message.sent_from == self.role and msg.subject.startswith(self._act_prefix):
            self._unacked.append(msg)  # its own broadcast
            self._read.add(seq)
            return
        self._held[seq] = (message, msg)

    async def _by_seq(self, js: Any, msg_id: str, seq: int) -> Message | None:
        """Message ``msg_id`` read from the stream at ``seq``, or ``None`` if the stream has
        nothing there (yet); a different message there is a wrong wanted list."""
        try:
            raw = await js.get_msg(self.stream, seq)
        except Exception as exc:
            if getattr(exc, "code", None) == 404:
                return None
            raise
        message = _decode(raw.data)
        if message.id != msg_id:
            raise ValueError(
                f"role {self.role}: stream {self.stream} holds message {message.id} "
                f"at sequence {seq}, not {msg_id}: the wanted list is wrong"
            )
        return message
