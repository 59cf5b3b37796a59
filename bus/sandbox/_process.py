"""Starting a sandbox's process, capturing its output, waiting for it and killing it.

The process is started from the thread that runs trio, not from a worker thread as
``trio.lowlevel.open_process`` does: ``PR_SET_PDEATHSIG`` (bubblewrap's ``--die-with-parent``,
the local launcher's own) fires when the *thread* that forked the child exits, and trio's
worker threads exit after 10 idle seconds, which would kill a longer run for no reason. The
fork costs a millisecond or two of the event loop.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import trio
from loguru import logger


class Capture:
    """Keeps the first ``cap`` bytes of a stream and counts the rest."""

    def __init__(self, cap: int):
        self.cap = cap
        self.data = bytearray()
        self.total = 0

    async def drain(self, stream: trio.abc.ReceiveStream) -> None:
        # Read to the end even past the cap: a writer blocked on a full pipe never exits.
        async with stream:
            while chunk := await stream.receive_some(1 << 16):
                self.total += len(chunk)
                self.data += chunk[: max(0, self.cap - len(self.data))]

    def text(self) -> str:
        text = self.data.decode("utf-8", errors="replace")
        if self.total > len(self.data):
            text += (
                f"\n[sandbox: output truncated: kept the first {len(self.data)} of "
                f"{self.total} bytes]\n"
            )
        return text


class Child:
    """A started process with its stdout and stderr as trio streams."""

    def __init__(
        self, argv: Sequence[str], *, cwd: Path, env: dict[str, str], pass_fds: Sequence[int] = ()
    ):
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        try:
            # Its own session: one killpg reaches everything that did not leave the group.
            self.popen = subprocess.Popen(
                list(argv),
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out_w,
                stderr=err_w,
                start_new_session=True,
                pass_fds=tuple(pass_fds),
            )
        except BaseException:
            os.close(out_r)
            os.close(err_r)
            raise
        finally:
            os.close(out_w)
            os.close(err_w)
        self.pid = self.popen.pid
        self.stdout = trio.lowlevel.FdStream(out_r)
        self.stderr = trio.lowlevel.FdStream(err_r)

    @property
    def returncode(self) -> int | None:
        return self.popen.returncode

    async def wait(self) -> int:
        """Wait until the process exits (and reap it); its status as :mod:`subprocess` says."""
        if self.popen.returncode is not None:
            return self.popen.returncode
        try:
            pidfd = os.pidfd_open(self.pid)
        except (AttributeError, OSError):  # an old kernel: poll instead
            while (status := self.popen.poll()) is None:
                await trio.sleep(0.02)
            return status
        try:
            await trio.lowlevel.wait_readable(pidfd)
        finally:
            os.close(pidfd)
        return self.popen.wait()

    def kill_group(self) -> bool:
        """SIGKILL the process group the child leads; False when the group is empty."""
        return kill_group(self.pid)


def kill_group(pgid: int) -> bool:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        return False
    return True


async def sweep_group(pgid: int, seconds: float = 5.0) -> None:
    """Kill the group until it is empty. The leader is reaped, but its children are reaped by
    init a moment after they die; a pgid cannot be reused while any member still exists."""
    deadline = trio.current_time() + seconds
    while kill_group(pgid):
        if trio.current_time() > deadline:
            logger.warning("sandbox: process group {} still has members after SIGKILL", pgid)
            return
        await trio.sleep(0.01)


async def run_child(
    child: Child,
    *,
    timeout_s: float,
    out: Capture,
    err: Capture,
    end_all: Callable[[], Awaitable[None]],
    watch: Callable[[], Awaitable[None]] | None = None,
) -> tuple[int | None, bool]:
    """Drain the child's output until it exits or ``timeout_s`` passes; then ``end_all``
    (shielded) kills whatever the run started. ``watch``, when it returns, ends the run the
    same way (a size limit passed). Returns (status or None, timed out)."""
    try:
        # The one place that owns the run's timeout: the limit is a value, applied here.
        with trio.move_on_after(timeout_s) as deadline:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(out.drain, child.stdout)
                nursery.start_soon(err.drain, child.stderr)
                async with trio.open_nursery() as waiting:
                    if watch is not None:
                        waiting.start_soon(_cancel_after, watch, waiting.cancel_scope)
                    await child.wait()
                    waiting.cancel_scope.cancel()
                # A finished run's background processes would hold the pipes open.
                await end_all()
    finally:
        with trio.CancelScope(shield=True):
            await end_all()
            await child.wait()
            for stream in (child.stdout, child.stderr):
                await stream.aclose()
    timed_out = deadline.cancelled_caught
    return (None if timed_out else child.returncode), timed_out


async def _cancel_after(watch: Callable[[], Awaitable[None]], scope: trio.CancelScope) -> None:
    await watch()
    scope.cancel()
