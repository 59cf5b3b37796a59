"""The stdio transport of the MCP client: a server's process, its stdin and its stdout as
the SDK's session streams, one JSON-RPC message a line.

It stands in for the SDK's ``stdio_client``, whose reader joins the pending text and each
new chunk into a new string, so a long line costs the square of its length (a 50 MB tool
result took 24 to 53 s). Here a line's chunks are kept in a list and only new data is
searched for the newline: a line costs its length. A line longer than
:data:`MAX_MESSAGE_BYTES` ends the session (the pending call fails with a
:class:`~sopbus.bus.ToolServerError` that names the server and the cap) and stops the server.
The rest is the SDK's: :class:`StdioServerParameters`, its message types, its process-group
kill, and the shutdown of the MCP spec (close stdin, wait, terminate, kill).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, suppress
from types import TracebackType
from typing import TextIO

import anyio
import mcp_types
import trio
from anyio.abc import AsyncResource, ByteReceiveStream, Process
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from loguru import logger
from mcp.client.stdio import FORCE_KILL_TIMEOUT, PROCESS_TERMINATION_TIMEOUT
from mcp.client.stdio import StdioServerParameters as StdioServerParameters
from mcp.os.posix.utilities import terminate_posix_process_tree
from mcp.shared.message import SessionMessage

MAX_MESSAGE_BYTES = 64 * 1024 * 1024
"""The longest line, one JSON-RPC message, read from a stdio server: 64 MiB. A tool result
is cut to its ``max_result_chars`` only once it has been read, so this bounds what a server
can make sopbus hold; a longer line ends that server's session."""

Streams = tuple[
    MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]
]
"""What the SDK's session reads (messages, and the lines that are none) and writes."""

_READ_BYTES = 1 << 16  # what a Linux pipe holds; os.read allocates this much for each read
_FLUSH_TIMEOUT_S = 0.5  # for the writer to pass on what the session sent, before stdin closes
_REAP_TIMEOUT_S = 2.0  # for the death of a killed server to be seen


class LineTooLong(Exception):
    """A line grew past the cap before its newline came."""

    def __init__(self, size: int, cap: int):
        super().__init__(f"a line of more than {size:,} bytes, over the cap of {cap:,}")
        self.size = size
        self.cap = cap


class Lines:
    """Splits a byte stream into its newline-ended lines, in time linear in its length.

    Each chunk is searched for newlines once, from where the last line ended; the parts of
    an unfinished line are kept apart and joined once, when its newline comes.
    """

    def __init__(self, cap: int):
        self._cap = cap
        self._parts: list[bytes] = []
        self._size = 0

    def feed(self, chunk: bytes) -> Iterator[bytes]:
        """The lines that ``chunk`` finishes, without their newline; raises
        :class:`LineTooLong` as soon as a line passes the cap (after the lines before it)."""
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            self._keep(chunk[start:end])
            line = b"".join(self._parts)
            self._parts.clear()
            self._size = 0
            yield line
            start = end + 1
        self._keep(chunk[start:])

    def _keep(self, part: bytes) -> None:
        self._size += len(part)
        if self._size > self._cap:
            raise LineTooLong(self._size, self._cap)
        if part:
            self._parts.append(part)


def size_text(size: int) -> str:
    """``64 MiB`` for a whole number of MiB, ``1,500 bytes`` otherwise."""
    return f"{size >> 20} MiB" if size and size % (1 << 20) == 0 else f"{size:,} bytes"


class StdioTransport(AbstractAsyncContextManager[Streams]):
    """One stdio server for the SDK's ``Client``: entering starts its process (in a session
    of its own, so that its children are stopped with it) and gives the session's streams;
    leaving stops it, bounded in time even when the caller is cancelled.

    ``failure`` says why the transport itself ended the session (a message over
    ``max_message_bytes``), ``None`` while it has not; calls the session fails after
    that should report it.
    """

    def __init__(
        self,
        name: str,
        params: StdioServerParameters,
        errlog: TextIO,
        *,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
    ):
        self.name = name
        self.failure: str | None = None
        self._params = params
        self._errlog = errlog
        self._cap = max_message_bytes
        self._opened: AbstractAsyncContextManager[Streams] | None = None

    async def __aenter__(self) -> Streams:
        if self._opened is not None:
            raise RuntimeError(f"the stdio transport of {self.name!r} is entered once")
        self._opened = self._open()
        return await self._opened.__aenter__()

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool | None:
        assert self._opened is not None
        return await self._opened.__aexit__(kind, error, traceback)

    @asynccontextmanager
    async def _open(self) -> AsyncIterator[Streams]:
        params = self._params
        process = await anyio.open_process(
            [params.command, *params.args],
            env=params.env,
            stderr=self._errlog,
            cwd=params.cwd,
            start_new_session=True,
        )
        # No await between the spawn and the nursery: a cancellation there would leak the
        # process. The piping is in _Pipes; this block only owns the tasks.
        pipes = _Pipes(self, process)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(pipes.read, nursery)
            nursery.start_soon(pipes.write)
            try:
                yield pipes.session_read, pipes.session_write
            finally:
                # Every wait in the shutdown is bounded, so shielding it cannot hang, and
                # a cancelled caller still leaves no server behind.
                with trio.CancelScope(shield=True):
                    await pipes.shutdown()
                nursery.cancel_scope.cancel()

    def _overflowed(self, too_long: LineTooLong) -> None:
        self.failure = (
            f"it sent one message of more than {size_text(too_long.cap)} (the cap on one "
            "message from a stdio server), so sopbus ended its session and stopped it; "
            "make the tool give back less (a result is cut to max_result_chars only after "
            "it is read)"
        )
        logger.warning("tool server {!r}: {}", self.name, self.failure)


class _Pipes:
    """The two pipe tasks of one server process, and its shutdown."""

    def __init__(self, transport: StdioTransport, process: Process):
        self._transport = transport
        self._process = process
        self._params = transport._params
        # Unbuffered, as in the SDK: the reader reads no further while a message waits for
        # the session, so a slow session holds the server back through the pipe.
        self._to_session, self.session_read = anyio.create_memory_object_stream[
            SessionMessage | Exception
        ](0)
        self.session_write, self._from_session = anyio.create_memory_object_stream[SessionMessage](
            0
        )
        self._writer_done = trio.Event()
        self._closing = False
        self._stopping: trio.Event | None = None

    async def read(self, nursery: trio.Nursery) -> None:
        """Pass each line of the server's stdout to the session, parsed; drain the rest."""
        assert self._process.stdout is not None
        stdout = self._process.stdout
        try:
            async with self._to_session:
                await self._pass_lines(stdout, nursery)
        except anyio.ClosedResourceError:
            pass  # the shutdown closed stdout under the read
        except (anyio.BrokenResourceError, ConnectionError) as error:
            if not self._closing:
                logger.warning("reading tool server {!r} failed: {}", self._transport.name, error)
        finally:
            await _drain(stdout)

    async def _pass_lines(self, stdout: ByteReceiveStream, nursery: trio.Nursery) -> None:
        lines = Lines(self._transport._cap)
        while True:
            try:
                chunk = await stdout.receive(_READ_BYTES)
            except anyio.EndOfStream:
                return  # the server closed its stdout; an unfinished line is no message
            try:
                for line in lines.feed(chunk):
                    if line and not line.isspace():
                        await self._to_session.send(self._parse(line))
            except LineTooLong as too_long:
                self._transport._overflowed(too_long)
                nursery.start_soon(self.stop)
                return
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                return  # the session is gone

    def _parse(self, line: bytes) -> SessionMessage | Exception:
        """One line as a message, or the reason it is none, for the session to hear of."""
        params = self._params
        try:
            text = line.decode(params.encoding, params.encoding_error_handler)
            return SessionMessage(
                mcp_types.jsonrpc_message_adapter.validate_json(text, by_name=False)
            )
        except ValueError as error:  # a decoding error, or pydantic's
            logger.warning(
                "tool server {!r} sent a line that is not a JSON-RPC message ({} bytes, "
                "starts {!r}): {}",
                self._transport.name,
                len(line),
                line[:120],
                error,
            )
            return error

    async def write(self) -> None:
        """Write each message of the session to the server's stdin, one a line."""
        assert self._process.stdin is not None
        params = self._params
        try:
            async with self._from_session:
                async for sent in self._from_session:
                    json = sent.message.model_dump_json(by_alias=True, exclude_unset=True)
                    data = (json + "\n").encode(params.encoding, params.encoding_error_handler)
                    await self._process.stdin.send(data)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            # The server stopped reading; end the session rather than let a call wait on.
            await self._to_session.aclose()
        finally:
            self._writer_done.set()

    async def shutdown(self) -> None:
        """Stop the traffic, let the writer flush, stop the server, close the streams."""
        self._closing = True
        # The reader goes on to drain: a server blocked writing its stdout cannot read the
        # end of its stdin.
        self.session_read.close()
        self.session_write.close()
        with trio.move_on_after(_FLUSH_TIMEOUT_S):
            await self._writer_done.wait()
        await self.stop()
        for stream in (self.session_read, self.session_write, self._to_session):
            await stream.aclose()
        await self._from_session.aclose()
        await trio.lowlevel.checkpoint()  # the pipe tasks leave by their except paths

    async def stop(self) -> None:
        """Close stdin, give the server its grace, then terminate and kill its process
        group; once, however often it is asked."""
        if self._stopping is not None:
            await self._stopping.wait()
            return
        self._stopping = trio.Event()
        process = self._process
        assert process.stdin is not None and process.stdout is not None
        try:
            await _close(process.stdin)
            if not await _exited(process, PROCESS_TERMINATION_TIMEOUT):
                await terminate_posix_process_tree(process, FORCE_KILL_TIMEOUT)
                if not await _exited(process, _REAP_TIMEOUT_S):
                    logger.warning(
                        "tool server {!r} (pid {}) is alive after its kill; left behind",
                        self._transport.name,
                        process.pid,
                    )
            # A child that survived its parent can hold stdout open: end the drain anyway.
            await _close(process.stdout)
        finally:
            self._stopping.set()


async def _exited(process: Process, timeout: float) -> bool:
    with trio.move_on_after(timeout):
        await process.wait()
    return process.returncode is not None


async def _close(stream: AsyncResource) -> None:
    with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await stream.aclose()


async def _drain(stdout: ByteReceiveStream) -> None:
    """Read and drop what the server still writes, so that it can exit; ends when its
    stdout ends or the stop closes it."""
    with trio.CancelScope(shield=True):
        with suppress(
            anyio.EndOfStream,
            anyio.ClosedResourceError,
            anyio.BrokenResourceError,
            ConnectionError,
            OSError,
        ):
            while True:
                await stdout.receive(_READ_BYTES)
