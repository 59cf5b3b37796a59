"""The ``local`` backend: no namespaces, the fallback where bubblewrap is missing.

What it does: the code runs in a scratch directory with an environment built from nothing
(secret-named variables refused), under rlimits (memory, CPU, file size, processes), in its
own session, cut from the network where ``unshare --net`` works. sopbus marks itself
non-dumpable, so its ``/proc/<pid>/environ`` (which holds API keys) is readable only with
CAP_SYS_PTRACE; when sopbus runs as root the child drops every capability (empty bounding
set, ``no_new_privs``) before the code starts, so it lacks CAP_SYS_PTRACE too. The child dies
with sopbus (``PR_SET_PDEATHSIG``), and at the end, on a timeout or on cancellation, its whole
process group is killed.

What it does NOT stop: the code runs as sopbus's own user (root stays uid 0, without
capabilities), so it can read and write every file that user can (``/etc/shadow`` for root,
``~/.ssh``), signal sopbus, and see every process; a process that calls ``setsid`` leaves the
group and outlives the run, and grandchildren outlive a killed sopbus; without
``unshare --net`` the network is open; ``RLIMIT_NPROC`` does not bind root. It contains honest
mistakes and keeps API keys out; it is not a security boundary. Use ``bwrap``.
"""

from __future__ import annotations

import ctypes
import functools
import os
import shutil
import subprocess
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import NamedTuple

import trio

from ._env import environment
from ._launcher import launcher, own_processes
from ._process import Capture, Child, run_child, sweep_group
from ._scratch import Scratch
from ._types import SandboxLimits

_PR_SET_DUMPABLE = 4


class _Isolation(NamedTuple):
    prefix: tuple[str, ...]  # prepended to the command; empty when the network stays on
    reason: str  # how isolation works, or why it does not


@functools.cache
def _detect_network_isolation() -> _Isolation:
    """Try ``unshare --net`` (root), then ``unshare -rn`` (unprivileged user namespace)."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return _Isolation((), "util-linux `unshare` is not on PATH")
    true = shutil.which("true") or "/bin/true"
    failures = []
    for flags in (("--net",), ("-rn",)):
        prefix = (unshare, *flags)
        try:
            done = subprocess.run([*prefix, true], capture_output=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired) as exc:
            failures.append(f"`unshare {flags[0]}`: {exc}")
            continue
        if done.returncode == 0:
            return _Isolation(prefix, f"`unshare {flags[0]}` works")
        failures.append(
            f"`unshare {flags[0]}` exit {done.returncode}: "
            f"{done.stderr.decode(errors='replace').strip()}"
        )
    return _Isolation((), "; ".join(failures))


def network_isolated() -> bool:
    return bool(_detect_network_isolation().prefix)


@functools.cache
def make_undumpable() -> bool:
    """Mark this process non-dumpable (once): other processes of its user without
    CAP_SYS_PTRACE can no longer read its ``/proc/<pid>/environ``, ``mem`` or ``fd``."""
    libc = ctypes.CDLL(None, use_errno=True)
    return bool(
        libc.prctl(
            _PR_SET_DUMPABLE,
            ctypes.c_ulong(0),
            ctypes.c_ulong(0),
            ctypes.c_ulong(0),
            ctypes.c_ulong(0),
        )
        == 0
    )


async def run(
    scratch: Scratch,
    argv: Sequence[str],
    limits: SandboxLimits,
    extra_env: Mapping[str, str],
    watch: Callable[[], Awaitable[None]] | None = None,
) -> tuple[int | None, Capture, Capture, bool]:
    """Run ``argv`` in ``scratch.work``; (status, stdout, stderr, timed out). ``watch``
    ends the run when it returns (its ``/tmp`` and home are in ``scratch``: it watches them)."""
    isolation = await trio.to_thread.run_sync(_detect_network_isolation)
    make_undumpable()
    now = await trio.to_thread.run_sync(own_processes)
    inner = launcher(limits, parent_pid=os.getpid(), drop_caps=os.geteuid() == 0, processes_now=now)
    env = environment(home=str(scratch.home), tmp=str(scratch.tmp), extra=extra_env)
    child = Child([*isolation.prefix, *inner, *argv], cwd=scratch.work, env=env)
    out, err = Capture(limits.max_output_bytes), Capture(limits.max_output_bytes)

    async def end_all() -> None:
        child.kill_group()
        await child.wait()
        await sweep_group(child.pid)

    status, timed_out = await run_child(
        child, timeout_s=limits.timeout_s, out=out, err=err, end_all=end_all, watch=watch
    )
    return status, out, err, timed_out
