"""The ``bwrap`` backend: the one module that talks to bubblewrap.

Each run gets new mount, pid, ipc, uts, net and cgroup namespaces (cgroup only where the
kernel permits it; :func:`probe` says which were granted). Inside, the root is an empty
tmpfs with: ``/usr`` (and the ``/bin``, ``/lib`` links or directories), a few files of ``/etc``
the loader needs, the interpreter's prefix and sopbus's venv, all read-only at their own
paths; the scratch directory read-write at ``/sandbox`` (the working directory, the only
writable place that outlives the run); a fresh tmpfs of ``tmp_mb`` at ``/tmp`` and at
``/home/sandbox``; a fresh ``/proc`` (it shows only the sandbox's processes) and a minimal
``/dev``. The environment is
cleared and only the allow-listed variables are set. ``--new-session`` keeps the code off
sopbus's terminal; ``--die-with-parent`` kills the sandbox when sopbus dies, also by
``kill -9``. The run ends by killing the namespace's first process, and the kernel then kills
every process in the namespace, ``setsid`` or not.

Who the code runs as: when sopbus is not root, bubblewrap creates a user namespace (mapped to
sopbus's own uid, no capabilities, nested user namespaces refused with ``--disable-userns``).
When sopbus runs as root, a user namespace would map the code to the real root (whom the
kernel exempts from ``RLIMIT_NPROC`` and who owns every system file), so instead no user
namespace is created: bubblewrap keeps only CAP_SETUID and CAP_SETGID, and the launcher
switches to a fresh unprivileged uid for the run (no capabilities left, ``no_new_privs``) before
the code starts. Not isolated: the kernel itself (a kernel bug is an escape), and the files
bound read-only can be read (the system's ``/usr``, sopbus's interpreter and venv).
"""

from __future__ import annotations

import functools
import json
import os
import random
import shutil
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

import trio

from ._env import environment
from ._launcher import launcher, own_processes
from ._process import Capture, Child, run_child, sweep_group
from ._scratch import Scratch
from ._types import DEFAULT_TMP_MB, SANDBOX_DIR, SANDBOX_HOME, SANDBOX_TMP, SandboxLimits

INSTALL = "install bubblewrap (apt-get install bubblewrap)"
_NAMESPACES = ("--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net")
_TOP_LEVEL = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "alternatives")
# Fresh uids for runs under root come from here: far above any account's uid and below the
# 32-bit "no uid" values, so a run owns nothing on the host and no other run shares its uid.
_UID_BASE, _UID_SPAN = 1 << 30, 1 << 24


class Probe(NamedTuple):
    """Whether bubblewrap works here: its path (None when it does not), the namespace flags
    the kernel granted, and why it does not work (empty when it does)."""

    bwrap: str | None
    namespaces: tuple[str, ...]
    reason: str


@functools.cache
def probe() -> Probe:
    """Try bubblewrap once per process with every namespace, then without the cgroup one."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return Probe(None, (), f"bwrap is not on PATH; {INSTALL}")
    failures = []
    for cgroup in (("--unshare-cgroup",), ()):
        namespaces = (*_user_namespace(), *_NAMESPACES, *cgroup)
        argv = [bwrap, *namespaces, "--ro-bind", "/usr", "/usr", *_top_level(), "--", "true"]
        try:
            done = subprocess.run(argv, capture_output=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return Probe(None, (), f"bwrap did not run: {exc}")
        if done.returncode == 0:
            return Probe(bwrap, namespaces, "")
        failures.append(done.stderr.decode(errors="replace").strip())
    return Probe(None, (), f"bwrap fails here: {failures[-1]}")


def _user_namespace() -> tuple[str, ...]:
    return () if os.geteuid() == 0 else ("--unshare-user", "--disable-userns")


def _top_level() -> list[str]:
    """``/bin``, ``/lib``...: recreated as links where the host has links (merged /usr)."""
    args: list[str] = []
    for path in _TOP_LEVEL:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    return args


def _python_binds() -> list[str]:
    """The interpreter's prefix, the venv and the package directories on its path, read-only
    at their own paths, with the directories above them created searchable (bubblewrap
    makes them 0700 otherwise)."""
    # The venv as written (PATH names its bin) and as resolved, the base interpreter's prefix.
    wanted = {os.path.realpath(p) for p in (sys.base_prefix, sys.prefix)}
    wanted.add(os.path.abspath(sys.prefix))
    wanted.add(os.path.dirname(os.path.dirname(os.path.realpath(sys.executable))))
    # Package directories a .pth file of the venv adds (a shared environment's, a system
    # dist-packages): the interpreter inside looks for pytest there too.
    wanted |= {
        os.path.realpath(p)
        for p in sys.path
        if os.path.basename(p.rstrip("/")) in ("site-packages", "dist-packages")
        and os.path.isdir(p)
    }
    roots = sorted(p for p in wanted if not p.startswith("/usr/") and p != "/usr")
    roots = [p for p in roots if not any(p.startswith(q + "/") for q in roots)]
    args: list[str] = []
    made: set[str] = set()
    for root in roots:
        for parent in reversed(Path(root).parents[:-1]):
            if str(parent) not in made:
                made.add(str(parent))
                args += ["--perms", "0755", "--dir", str(parent)]
        args += ["--ro-bind", root, root]
    return args


def command(
    found: Probe,
    scratch: Scratch,
    argv: Sequence[str],
    limits: SandboxLimits,
    env: Mapping[str, str],
    info_fd: int,
    uid: int,
    processes_now: int,
    tmp_mb: int = DEFAULT_TMP_MB,
) -> list[str]:
    """The full bwrap command line for one run; ``/tmp`` and the home directory are tmpfs
    mounts of ``tmp_mb`` each (a tmpfs takes memory, and without a size it may take half)."""
    size = ["--size", str(tmp_mb << 20)]
    assert found.bwrap is not None
    args = [
        found.bwrap,
        *found.namespaces,
        "--die-with-parent",
        "--new-session",
        "--hostname",
        "sandbox",
        "--clearenv",
    ]
    if uid >= 0:  # root: no user namespace; keep only what the launcher needs to leave root
        args += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    args += ["--ro-bind", "/usr", "/usr", *_top_level()]
    # Directories bubblewrap creates on its own are 0700: unsearchable for the code's uid.
    args += ["--perms", "0755", "--dir", "/etc", "--perms", "0755", "--dir", "/home"]
    for name in _ETC:
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    # The fresh /tmp first, the interpreter after: a venv under /tmp (a clone in /tmp, a
    # test's copy) is bound inside it; mounted the other way round, the tmpfs hid it.
    args += [*size, "--perms", "1777", "--tmpfs", SANDBOX_TMP]
    args += _python_binds()
    args += [
        "--bind",
        str(scratch.work),
        SANDBOX_DIR,
        "--chdir",
        SANDBOX_DIR,
        *size,
        "--perms",
        "1777",
        "--tmpfs",
        SANDBOX_HOME,
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--info-fd",
        str(info_fd),
    ]
    for name, value in env.items():
        args += ["--setenv", name, value]
    inner = launcher(limits, uid=uid, gid=uid, processes_now=processes_now)
    return [*args, "--", *inner, *argv]


def fresh_uid() -> int:
    """A uid for one run under root (see the module docstring)."""
    return _UID_BASE + random.randrange(_UID_SPAN)


async def run(
    scratch: Scratch,
    argv: Sequence[str],
    limits: SandboxLimits,
    extra_env: Mapping[str, str],
    watch: Callable[[], Awaitable[None]] | None = None,
    tmp_mb: int = DEFAULT_TMP_MB,
) -> tuple[int | None, Capture, Capture, bool]:
    """Run ``argv`` in a new sandbox on ``scratch``; (status, stdout, stderr, timed out).
    ``watch`` ends the run when it returns."""
    found = await trio.to_thread.run_sync(probe)
    uid = fresh_uid() if os.geteuid() == 0 else -1
    if uid >= 0:
        await trio.to_thread.run_sync(scratch.hand_to, uid, uid)
    # A fresh uid has no process yet; the user's own uid counts its processes outside too
    # (on kernels before 5.14, where a user namespace does not count apart).
    now = 0 if uid >= 0 else await trio.to_thread.run_sync(own_processes)
    env = environment(home=SANDBOX_HOME, tmp=SANDBOX_TMP, extra=extra_env)
    info_r, info_w = os.pipe()
    try:
        child = Child(
            command(found, scratch, argv, limits, env, info_w, uid, now, tmp_mb),
            cwd=scratch.path,
            env={},
            pass_fds=(info_w,),
        )
    except BaseException:
        os.close(info_r)
        raise
    finally:
        os.close(info_w)
    info = _Info(info_r)
    out, err = Capture(limits.max_output_bytes), Capture(limits.max_output_bytes)

    async def end_all() -> None:
        await info.read()
        if child.returncode is None and info.child_pid:
            # The namespace's first process: when it dies the kernel kills the rest.
            _kill(info.child_pid)
        with trio.move_on_after(2):
            await child.wait()
        child.kill_group()
        await child.wait()
        await sweep_group(child.pid)

    try:
        status, timed_out = await run_child(
            child, timeout_s=limits.timeout_s, out=out, err=err, end_all=end_all, watch=watch
        )
    finally:
        info.close()
    return _signal_status(status), out, err, timed_out


def _signal_status(status: int | None) -> int | None:
    """bubblewrap's init reports a command killed by signal N as exit status 128 + N (the
    shell's convention); shown as -N, as :mod:`subprocess` shows a signal."""
    if status is not None and 128 < status < 128 + 65:
        return 128 - status
    return status


class _Info:
    """bubblewrap's ``--info-fd`` report: the pid (in our namespace) of the sandbox's init."""

    def __init__(self, fd: int):
        self._stream = trio.lowlevel.FdStream(fd)
        self.child_pid = 0
        self._done = False

    async def read(self) -> None:
        if self._done:
            return
        data = bytearray()
        # bubblewrap writes the report once the namespace exists and then closes the pipe.
        with trio.move_on_after(5):
            while chunk := await self._stream.receive_some(4096):
                data += chunk
        self._done = True
        try:
            self.child_pid = int(json.loads(data)["child-pid"])
        except (ValueError, KeyError, TypeError):
            self.child_pid = 0

    def close(self) -> None:
        self._stream.close()


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
