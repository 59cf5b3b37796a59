"""The ``local`` backend: no namespaces but pid and network, the fallback where bubblewrap
is missing.

What it does: the code runs in a scratch directory with an environment built from nothing
(secret-named variables refused), under rlimits (memory, CPU, file size, processes), in its
own session, in a new pid namespace and cut from the network where ``unshare`` permits it
(as root; else in a user namespace of sopbus's own uid). sopbus marks itself non-dumpable,
so its ``/proc/<pid>/environ`` (which holds API keys) is readable only with CAP_SYS_PTRACE;
when sopbus runs as root the child drops every capability (empty bounding set,
``no_new_privs``) before the code starts, so it lacks CAP_SYS_PTRACE too. The run dies with
sopbus (``PR_SET_PDEATHSIG``), and at the end, on a timeout or on cancellation, the pid
namespace's first process is killed, and the kernel kills every process in it, ``setsid``
or not.

Under root the code runs as a fresh unprivileged uid (:mod:`._as_user`), so that
``RLIMIT_NPROC`` binds it (it does not bind uid 0), when its directories and its program
are reachable by another uid; else it stays uid 0, without capabilities.

What it does NOT stop: the code runs as sopbus's own user (or, under root, a fresh uid that
can still read every world-readable file), so it can read and write every file that user
can (``~/.ssh``), signal sopbus, and see every process. What it cannot bound, it says once
per run (:func:`unenforced`): ``processes`` under root when the code stays uid 0, and,
without a pid namespace, ``timeout_s`` for a process that left the session with
``setsid``; without ``unshare --net`` the network is open. It contains honest mistakes and
keeps API keys out; it is not a security boundary. Use ``bwrap``.
"""

from __future__ import annotations

import ctypes
import functools
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence

import trio

from . import _as_user, _unshare
from ._bwrap import fresh_uid
from ._env import environment
from ._launcher import launcher, own_processes
from ._process import Capture, Child, run_child, sweep_group
from ._scratch import Scratch
from ._types import SandboxLimits

_PR_SET_DUMPABLE = 4
UNENFORCED = "sandbox: the local backend does not enforce"


def _detect_network_isolation() -> _unshare.Isolation:
    return _unshare.detect()


def network_isolated() -> bool:
    return _unshare.detect().network


def unenforced(limits: SandboxLimits, stays_root: str | None = None) -> list[str]:
    """What this backend cannot enforce here, one note per limit, naming it and why;
    ``stays_root``: why the code runs as uid 0 under root (:func:`as_user`)."""
    notes = []
    if os.geteuid() == 0 and stays_root is not None:
        notes.append(
            f"{UNENFORCED} SandboxLimits.processes "
            f"({limits.processes}) under root: the kernel does not count root's processes "
            f"(RLIMIT_NPROC), and the code cannot run as another uid here: {stays_root}; "
            f"use the bwrap backend, or run sopbus as another user"
        )
    found = _unshare.detect()
    if not found.pid:
        notes.append(
            f"{UNENFORCED} SandboxLimits.timeout_s ({limits.timeout_s:g} s) on a process "
            f"that left the run's session with setsid: no pid namespace here "
            f"({found.reason}); use the bwrap backend"
        )
    return notes


def as_user(
    scratch: Scratch, argv: Sequence[str], extra_env: Mapping[str, str]
) -> tuple[int, str | None]:
    """The uid the code runs as (-1: sopbus's own), and why it stays uid 0 under root (None
    when it does not). Blocking disk work: call in a thread."""
    if os.geteuid() != 0:
        return -1, None
    _as_user.open_to_others(scratch)
    env = environment(home=str(scratch.home), tmp=str(scratch.tmp), extra=extra_env)
    reason = _as_user.blocker(scratch, argv, env)
    if reason is not None:
        return -1, reason
    uid = fresh_uid()
    scratch.hand_to(uid, uid)
    return uid, None


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
    uid: int = -1,
) -> tuple[int | None, Capture, Capture, bool]:
    """Run ``argv`` in ``scratch.work``; (status, stdout, stderr, timed out). ``watch``
    ends the run when it returns (its ``/tmp`` and home are in ``scratch``: it watches them).
    ``uid`` >= 0: run the code as that uid (:func:`as_user` handed it the scratch)."""
    found = await trio.to_thread.run_sync(_unshare.detect)
    make_undumpable()
    # A fresh uid has no process yet; one's own uid counts every process it has.
    now = 0 if uid >= 0 else await trio.to_thread.run_sync(own_processes)
    env = environment(home=str(scratch.home), tmp=str(scratch.tmp), extra=extra_env)
    status_r, status_w = os.pipe() if found.pid else (-1, -1)
    try:
        child = Child(
            _command(found, argv, limits, now, status_w, uid),
            cwd=scratch.work,
            env=env,
            pass_fds=(status_w,) if found.pid else (),
        )
    except BaseException:
        if found.pid:
            os.close(status_r)
        raise
    finally:
        if found.pid:
            os.close(status_w)
    out, err = Capture(limits.max_output_bytes), Capture(limits.max_output_bytes)

    async def end_all() -> None:
        # The group holds unshare and the namespace's init: killing them ends the namespace.
        child.kill_group()
        await child.wait()
        await sweep_group(child.pid)

    try:
        status, timed_out = await run_child(
            child, timeout_s=limits.timeout_s, out=out, err=err, end_all=end_all, watch=watch
        )
        if found.pid and status is not None:
            reported = _unshare.read_status(status_r)
            status = status if reported is None else reported
    finally:
        if found.pid:
            os.close(status_r)
    return status, out, err, timed_out


def _command(
    found: _unshare.Isolation,
    argv: Sequence[str],
    limits: SandboxLimits,
    processes_now: int,
    status_fd: int,
    uid: int = -1,
) -> list[str]:
    """With a pid namespace: sopbus's death kills ``unshare``, whose death kills the init,
    whose death ends the namespace; the code needs no parent-death signal of its own."""
    # Leaving uid 0 drops every capability; staying root, the launcher drops them itself.
    inner = functools.partial(
        launcher,
        limits,
        uid=uid,
        gid=uid,
        drop_caps=os.geteuid() == 0 and uid < 0,
        processes_now=processes_now,
    )
    if not found.pid:
        return [*found.prefix, *inner(parent_pid=os.getpid()), *argv]
    return [
        *_unshare.pdeath(os.getpid()),
        *found.prefix,
        *_unshare.init(status_fd),
        *inner(),
        *argv,
    ]
