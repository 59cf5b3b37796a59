"""The one door between trio and NATS: an asyncio loop on its own thread, behind a trio API.

nats-py is asyncio-only and there is no trio- or anyio-native client, so a :class:`Link`
starts a private asyncio event loop on a daemon thread, connects there, and hands trio
code coroutines that run on that loop. Every other module of sopbus talks to NATS through
a :class:`Link`; nothing else imports ``nats``.

A crossing (trio -> asyncio -> trio) costs tens of microseconds, so the API is built to
cross once per *batch*, never once per message:

* :meth:`Link.call` runs one coroutine function ``fn(nc, js)`` on the loop and returns its
  result: anything that needs several NATS operations does them in one ``fn``;
* :meth:`Link.publish_many` publishes a batch to JetStream with pipelined acks (all the
  publishes go out, then all the acks are awaited) in one crossing;
* :meth:`Link.swap_key` runs a whole compare-and-swap loop on a KV key (read, change,
  write if unchanged, retry) in one crossing;
* :meth:`Link.subscribe` turns a core-NATS subscription into a trio receive channel; the
  messages that arrive while trio is busy are handed over together, in one crossing.
* single KV operations (:meth:`Link.get_key`, :meth:`Link.create_key`,
  :meth:`Link.update_key`, ...) raise the Link's own :class:`KeyExists` and
  :class:`WrongRevision`, and are tried again while the server cannot answer (a restart);
* :meth:`Link.read_after` reads a stream's messages by sequence (no consumer, nothing lost
  across reconnects), :meth:`Link.stored` all that a stream holds on a subject.

Cancellation: a trio task cancelled while it waits for :meth:`Link.call` cancels the
asyncio task too (a request that was sent may still have had its effect on the server,
as with any network call). Closing the link drains the connection (pending publishes are
flushed) and stops the loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import random
import threading
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import trio

from .._errors import SopbusError
from .._util import Redactor

T = TypeVar("T")

Headers = dict[str, str]


class NatsUnavailable(SopbusError):
    """The NATS server at the given URL cannot be reached (or lacks JetStream)."""


class KeyExists(Exception):
    """A KV ``create`` found the key there already (another writer created it first)."""


class WrongRevision(Exception):
    """A KV ``update`` or ``delete`` with ``last=`` found the key at another revision: another
    writer changed it since it was read (the compare-and-swap lost)."""


class Received:
    """A message received on a subscription, safe to read from trio (plain attributes)."""

    __slots__ = ("data", "headers", "reply", "subject")

    def __init__(self, subject: str, data: bytes, headers: Headers | None, reply: str):
        self.subject, self.data, self.headers, self.reply = subject, data, headers, reply


RIDE_OUT_S = 30.0
"""How long a KV operation is tried again while the server cannot answer (it restarts)."""


def _transient() -> tuple[type[BaseException], ...]:
    """The errors of a server that cannot answer for now (restarting, JetStream not ready,
    the connection being made again), as opposed to an answer."""
    import nats.errors
    import nats.js.errors

    return (
        nats.errors.TimeoutError,
        nats.errors.ConnectionClosedError,
        nats.errors.NoRespondersError,
        nats.errors.StaleConnectionError,
        nats.errors.OutboundBufferLimitError,
        nats.js.errors.ServiceUnavailableError,
        asyncio.TimeoutError,
    )


async def _ridden_out(op: Callable[[], Awaitable[T]], *, for_s: float = RIDE_OUT_S) -> T:
    """``await op()``, tried again every 0.2 s while the server cannot answer, for up to
    ``for_s`` (runs on the link's loop). A compare-and-swap whose first try did land but whose
    answer was lost then fails its retry, as if another writer had come first: the callers
    treat that as a lost race, which is the safe side."""
    transient = _transient()
    deadline = asyncio.get_running_loop().time() + for_s
    while True:
        try:
            return await op()
        except transient:
            if asyncio.get_running_loop().time() >= deadline:
                raise
        await asyncio.sleep(0.2)


class Link:
    """A connection to one NATS server, used from trio. Open it with :func:`open_link`."""

    def __init__(
        self, url: str, loop: asyncio.AbstractEventLoop, thread: threading.Thread, nc: Any, js: Any
    ):
        self.url = url
        self.redactor = Redactor()  # see hide
        self._loop, self._thread = loop, thread
        self.nc, self.js = nc, js  # for use inside `call` only (they belong to the loop)

    def hide(self, secrets: Iterable[str]) -> None:
        """Blanks ``secrets`` (a run's key and URL credentials, in all their encodings) in
        every payload this link publishes or puts from now on: the streams and buckets are
        files on the server's disk, and a model's answer may repeat a secret."""
        self.redactor = Redactor((*self.redactor.secrets, *secrets))

    def scrubbed(self, payload: bytes) -> bytes:
        """``payload`` with the secrets given to :meth:`hide` blanked."""
        return self.redactor.data(payload) if self.redactor else payload

    async def call(self, fn: Callable[[Any, Any], Awaitable[T]]) -> T:
        """Runs ``await fn(nc, js)`` on the link's loop and returns its result (or raises its
        exception). One crossing each way, whatever ``fn`` does."""
        return await self._cross(fn(self.nc, self.js))

    async def call_patiently(self, fn: Callable[[Any, Any], Awaitable[T]]) -> T:
        """:meth:`call`, with ``fn`` tried again while the server cannot answer (a restart),
        for up to ``RIDE_OUT_S``: for reads and other steps that are safe to repeat."""
        return await self._cross(_ridden_out(lambda: fn(self.nc, self.js)))

    def soon(self, fn: Callable[[Any, Any], None]) -> None:
        """Schedules ``fn(nc, js)`` on the link's loop and returns at once: the door for sync
        code (an event log's ``log_all``) that must not wait. Calls run in the order they
        were made; ``fn`` must not block (it may start tasks on the loop) and reports its
        own failures, since nobody awaits it."""
        self._loop.call_soon_threadsafe(fn, self.nc, self.js)

    async def _cross(self, coro: Awaitable[T]) -> T:
        future: concurrent.futures.Future[T] = asyncio.run_coroutine_threadsafe(coro, self._loop)  # type: ignore[arg-type]
        token = trio.lowlevel.current_trio_token()
        done = trio.Event()

        def wake(_: Any) -> None:
            try:
                token.run_sync_soon(done.set)
            except trio.RunFinishedError:  # the trio run is gone: nobody waits any more
                pass

        future.add_done_callback(wake)
        try:
            await done.wait()
        except BaseException:
            future.cancel()
            raise
        return future.result()

    async def publish_many(
        self, items: Sequence[tuple[str, bytes, Headers | None]], *, timeout: float = 30.0
    ) -> list[Any]:
        """Publishes ``(subject, payload, headers)`` items to JetStream in order, every
        publish sent before any ack is awaited; returns the acks (``PubAck``) in order.
        Raises the first failure (a timeout, no stream for a subject) after all were sent."""
        if not items:
            return []
        items = [(subject, self.scrubbed(payload), headers) for subject, payload, headers in items]

        async def send(nc: Any, js: Any) -> list[Any]:
            futures = [
                await js.publish_async(subject, payload, headers=headers)
                for subject, payload, headers in items
            ]
            # return_exceptions: every ack's outcome is retrieved here, even when the call
            # is cancelled or times out half way (else asyncio reports "exception was never
            # retrieved" for the acks that failed after we stopped waiting)
            acks = await asyncio.wait_for(asyncio.gather(*futures, return_exceptions=True), timeout)
            failed = next((a for a in acks if isinstance(a, BaseException)), None)
            if failed is not None:
                raise failed
            return list(acks)

        return await self.call(send)

    @asynccontextmanager
    async def subscribe(
        self, subject: str, *, queue: str = "", buffer: int = 100_000
    ) -> AsyncIterator[trio.MemoryReceiveChannel[Received]]:
        """A core-NATS subscription as a trio channel, for the ``async with`` block. Messages
        that arrive while trio is busy are handed over in one crossing. More than ``buffer``
        waiting messages is a slow consumer: the subscription ends with an error."""
        send, receive = trio.open_memory_channel[Received](buffer)
        token = trio.lowlevel.current_trio_token()
        pending: deque[Received] = deque()
        scheduled = False

        def hand_over() -> None:  # on the trio thread
            nonlocal scheduled
            scheduled = False
            while pending:
                try:
                    send.send_nowait(pending.popleft())
                except (trio.WouldBlock, trio.ClosedResourceError, trio.BrokenResourceError):
                    pending.clear()
                    send.close()
                    return

        async def on_message(msg: Any) -> None:  # on the asyncio thread
            nonlocal scheduled
            pending.append(Received(msg.subject, msg.data, msg.headers, msg.reply))
            if not scheduled:
                scheduled = True
                try:
                    token.run_sync_soon(hand_over)
                except trio.RunFinishedError:
                    pass

        async def sub(nc: Any, js: Any) -> Any:
            return await nc.subscribe(subject, queue=queue, cb=on_message)

        subscription = await self.call(sub)
        try:
            async with receive:
                yield receive
        finally:
            with trio.CancelScope(shield=True):
                await self._cross(subscription.unsubscribe())
            send.close()

    async def publish(
        self, subject: str, payload: bytes, *, headers: Headers | None = None, reply: str = ""
    ) -> None:
        """A core-NATS publish (no JetStream ack): control messages, heartbeats."""
        payload = self.scrubbed(payload)

        async def pub(nc: Any, js: Any) -> None:
            await nc.publish(subject, payload, reply=reply, headers=headers)

        await self.call(pub)

    async def request(self, subject: str, payload: bytes, *, timeout: float) -> bytes:
        """A core-NATS request; raises :class:`TimeoutError` when nobody answers in time."""

        async def req(nc: Any, js: Any) -> bytes:
            import nats.errors

            try:
                msg = await nc.request(subject, payload, timeout=timeout)
            except (nats.errors.TimeoutError, nats.errors.NoRespondersError) as exc:
                raise TimeoutError(f"no answer on {subject} within {timeout} s") from exc
            return bytes(msg.data)

        return await self.call(req)

    async def flush(self) -> None:
        await self.call(lambda nc, js: nc.flush())

    async def key_value(self, bucket: str) -> Any:
        """The JetStream KV bucket ``bucket``, created (history 1) when it does not exist yet;
        a handle for :meth:`swap_key` and for use inside :meth:`call`. Like the key
        operations, it rides out a server restart."""

        async def open_bucket(nc: Any, js: Any) -> Any:
            import nats.js.errors

            try:
                return await _ridden_out(lambda: js.key_value(bucket))
            except nats.js.errors.BucketNotFoundError:
                # Two processes creating it at once is fine: the same config is idempotent.
                return await _ridden_out(lambda: js.create_key_value(bucket=bucket, history=1))

        return await self.call(open_bucket)

    async def swap_key(
        self,
        kv: Any,
        key: str,
        change: Callable[[bytes | None], tuple[bytes | None, T]],
        *,
        backoff_s: float = 0.001,
        max_backoff_s: float = 0.05,
    ) -> T:
        """Compare-and-swap on one KV key, the whole loop in one crossing: reads the key
        (``None`` when absent), calls ``change(value) -> (new value, result)`` and writes the
        new value only if the key is still at the revision read (``kv.update(last=...)``;
        ``kv.create`` when it was absent); when another writer came first, waits a random
        time below a doubling bound (at most ``max_backoff_s``) and starts again. A new
        value of ``None`` writes nothing. Returns the ``result`` of the ``change`` that was
        written. ``change`` runs on the link's thread and may run several times: it must
        be a pure function of the value (its exceptions end the loop and are raised)."""

        async def loop(nc: Any, js: Any) -> T:
            import nats.js.errors

            for attempt in itertools.count():
                try:
                    entry = await _ridden_out(lambda: kv.get(key))
                    value, revision = entry.value, entry.revision
                except nats.js.errors.KeyNotFoundError:
                    value, revision = None, 0
                new, result = change(value)
                if new is None:
                    return result
                try:
                    if revision:
                        await _ridden_out(lambda: kv.update(key, new, last=revision))  # noqa: B023 (awaited here)
                    else:
                        await _ridden_out(lambda: kv.create(key, new))  # noqa: B023 (awaited here)
                    return result
                except nats.js.errors.KeyWrongLastSequenceError:
                    await asyncio.sleep(
                        random.uniform(0, min(max_backoff_s, backoff_s * 2 ** min(attempt, 20)))
                    )
            raise AssertionError("unreachable: itertools.count() does not end")

        return await self.call(loop)

    # -- single KV operations, one crossing each; the errors are the Link's own ---------

    async def get_key(self, kv: Any, key: str) -> tuple[bytes, int] | None:
        """``(value, revision)`` of ``key`` in the bucket handle ``kv``; ``None`` when absent."""

        async def fn(nc: Any, js: Any) -> tuple[bytes, int] | None:
            import nats.js.errors

            try:
                entry = await _ridden_out(lambda: kv.get(key))
            except nats.js.errors.KeyNotFoundError:
                return None
            return bytes(entry.value or b""), int(entry.revision or 0)

        return await self.call(fn)

    async def keys(self, kv: Any) -> list[str]:
        """The keys in the bucket handle ``kv`` (none when it holds none); a server that does
        not answer raises, it is not an empty bucket."""

        async def fn(nc: Any, js: Any) -> list[str]:
            import nats.js.errors

            try:
                return list(await kv.keys())
            except nats.js.errors.NoKeysError:
                return []

        return await self.call(fn)

    async def put_key(self, kv: Any, key: str, value: bytes) -> int:
        """Writes ``key`` whatever it holds; returns the new revision."""
        value = self.scrubbed(value)

        async def fn(nc: Any, js: Any) -> int:
            return int(await _ridden_out(lambda: kv.put(key, value)))

        return await self.call(fn)

    async def create_key(self, kv: Any, key: str, value: bytes) -> int:
        """Creates ``key`` (atomic); returns its revision, or raises :class:`KeyExists`."""
        value = self.scrubbed(value)

        async def fn(nc: Any, js: Any) -> int:
            import nats.js.errors

            try:
                return int(await _ridden_out(lambda: kv.create(key, value)))
            except nats.js.errors.KeyWrongLastSequenceError as exc:
                raise KeyExists(f"{key} exists already") from exc

        return await self.call(fn)

    async def update_key(self, kv: Any, key: str, value: bytes, *, last: int) -> int:
        """Writes ``key`` if it is still at revision ``last``; returns the new revision, or
        raises :class:`WrongRevision`."""
        value = self.scrubbed(value)

        async def fn(nc: Any, js: Any) -> int:
            import nats.js.errors

            try:
                return int(await _ridden_out(lambda: kv.update(key, value, last=last)))
            except nats.js.errors.KeyWrongLastSequenceError as exc:
                raise WrongRevision(f"{key} is no longer at revision {last}") from exc

        return await self.call(fn)

    async def delete_key(self, kv: Any, key: str, *, last: int) -> None:
        """Deletes ``key`` if it is still at revision ``last``, else raises :class:`WrongRevision`."""

        async def fn(nc: Any, js: Any) -> None:
            import nats.js.errors

            try:
                await _ridden_out(lambda: kv.delete(key, last=last))
            except nats.js.errors.KeyWrongLastSequenceError as exc:
                raise WrongRevision(f"{key} is no longer at revision {last}") from exc

        await self.call(fn)

    async def read_after(
        self, stream: str, subject: str, after: int, *, most: int = 256
    ) -> list[tuple[int, bytes]]:
        """Up to ``most`` messages of ``stream`` on ``subject`` (a filter) whose sequence is
        above ``after``, in stream order, as ``(seq, payload)``. Read by sequence, with no
        consumer: a caller that keeps the last sequence it took reads every message exactly
        once and in order, whatever happened to the connection meanwhile. While the server
        cannot be reached it returns what it read so far (maybe nothing): ask again."""

        async def fn(nc: Any, js: Any) -> list[tuple[int, bytes]]:
            import nats.js.errors

            out: list[tuple[int, bytes]] = []
            seq = after + 1
            while len(out) < most:
                try:
                    msg = await js.get_msg(stream, seq=seq, subject=subject, next=True)
                except nats.js.errors.NotFoundError:
                    break
                except _transient():
                    break  # reconnecting, or JetStream not ready again yet: ask again later
                out.append((int(msg.seq or 0), bytes(msg.data or b"")))
                seq = int(msg.seq or 0) + 1
            return out

        return await self.call(fn)

    async def last_seq(self, stream: str) -> int:
        """The sequence of the last message ``stream`` holds (0: none)."""

        async def fn(nc: Any, js: Any) -> int:
            return int((await js.stream_info(stream)).state.last_seq or 0)

        return await self.call(fn)

    async def stored(self, stream: str, subject: str, *, idle_s: float = 0.3) -> list[bytes]:
        """Every message ``stream`` holds on ``subject`` (a filter), in stream order, read by
        a consumer of its own (acked, then removed); ``[]`` when there is no such stream.
        The read ends when nothing came for ``idle_s``."""

        async def fn(nc: Any, js: Any) -> list[bytes]:
            import nats.errors
            import nats.js.errors

            try:
                sub = await js.pull_subscribe(subject, durable=None, stream=stream)
            except nats.js.errors.NotFoundError:
                return []
            out: list[bytes] = []
            try:
                while True:
                    try:
                        batch = await sub.fetch(256, timeout=idle_s)
                    except (nats.errors.TimeoutError, TimeoutError):
                        break
                    if not batch:
                        break
                    for msg in batch:
                        out.append(bytes(msg.data))
                        await msg.ack()
            finally:
                await sub.unsubscribe()
            return out

        return await self.call(fn)


@asynccontextmanager
async def open_link(
    url: str, *, name: str = "sopbus", connect_timeout: float = 5.0
) -> AsyncIterator[Link]:
    """Connects to the NATS server at ``url`` (``nats://host:port``) for the ``async with``
    block. Raises :class:`NatsUnavailable` with what to do when it cannot."""
    try:
        import nats  # only here: `sopbus` without --bus never loads the client
    except ModuleNotFoundError as exc:
        raise NatsUnavailable(
            f"--bus {url} needs the NATS client: pip install 'sopbus[nats]' ({exc})"
        ) from None

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name=f"nats-link {url}", daemon=True)
    thread.start()
    probe = Link(url, loop, thread, None, None)
    try:
        nc, js = await probe._cross(_connect(nats, url, name, connect_timeout))
    except BaseException as exc:
        _stop(loop, thread)
        if _unreachable(exc):
            raise NatsUnavailable(
                f"cannot reach a NATS server at {url}: {type(exc).__name__}: {exc}; start one "
                f"with JetStream (`nats-server -js`, version 2.10 or later) or fix the URL"
            ) from exc
        raise
    link = Link(url, loop, thread, nc, js)
    try:
        yield link
    finally:
        with trio.CancelScope(shield=True):
            try:
                await link._cross(nc.drain())
            except Exception:
                pass
        _stop(loop, thread)


async def _connect(nats: Any, url: str, name: str, connect_timeout: float) -> tuple[Any, Any]:
    """A connection and its JetStream context, made on the link's asyncio loop."""

    async def quiet(_: Exception) -> None:  # reconnect errors are reported by the calls
        return None

    # Reconnects without end once connected (a server restart is survived); the first
    # connection gets `connect_timeout` in all, or the client would retry it forever.
    nc = nats.NATS()
    try:
        # (the client's annotations say int; it takes float seconds)
        await asyncio.wait_for(
            nc.connect(
                url,
                name=name,
                connect_timeout=connect_timeout,
                allow_reconnect=True,
                max_reconnect_attempts=-1,
                reconnect_time_wait=0.2,
                error_cb=quiet,
            ),
            connect_timeout,
        )
    except BaseException:
        await nc.close()
        raise
    return nc, nc.jetstream()


def _stop(loop: asyncio.AbstractEventLoop, thread: threading.Thread) -> None:
    """Stop the link's loop and its thread (the loop is closed once the thread is gone)."""
    loop.call_soon_threadsafe(loop.stop)
    thread.join(timeout=5)
    if not thread.is_alive():
        loop.close()


def _unreachable(exc: BaseException) -> bool:
    """Whether a failed first connection means no server answers (as opposed to a bug)."""
    return isinstance(exc, (OSError, asyncio.TimeoutError, TimeoutError)) or type(
        exc
    ).__module__.startswith("nats")
