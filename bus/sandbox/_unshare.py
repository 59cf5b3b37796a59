"""The local backend's one door to util-linux ``unshare``: which namespaces it gets here, and
the small init that runs first in a new pid namespace.

A pid namespace is what lets the local backend end a whole process tree: when the
namespace's first process dies the kernel kills every process in it, also one that called
``setsid`` and was orphaned (a session or process group is left with one call). The code is
not that first process, because the kernel shields a namespace's init from the signals it
has no handler for (``SIGXCPU`` of the CPU limit among them): :data:`INIT` forks the code,
reaps every orphan, and reports the code's wait status on a pipe (its own exit cannot carry
a signal: an init cannot be killed from inside its namespace).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from typing import NamedTuple

INIT = r"""
import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
fd, argv = int(sys.argv[1]), sys.argv[2:]
code = os.fork()
if code == 0:
    os.close(fd)  # the code must not forge its own status
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        sys.stderr.write("sandbox: cannot run %r: %s\n" % (argv[0], exc))
        os._exit(127 if isinstance(exc, FileNotFoundError) else 126)
while True:
    pid, status = os.wait()  # orphans are reparented here: reap them too
    if pid == code:
        break
os.write(fd, b"%d" % status)
os._exit(0)
"""

# The first that works: network and pid namespaces, as root, then in a user namespace of
# one's own; then the network alone; then the pid namespace alone.
_TRIES: tuple[tuple[str, ...], ...] = (
    ("--net", "--pid"),
    ("-r", "--net", "--pid"),
    ("--net",),
    ("-r", "--net"),
    ("--pid",),
    ("-r", "--pid"),
)


class Isolation(NamedTuple):
    """What ``unshare`` gives here: its argv prefix (empty when nothing works), whether it
    cuts the network and whether it opens a pid namespace, and how (or why not)."""

    prefix: tuple[str, ...]
    network: bool
    pid: bool
    reason: str


@functools.cache
def detect() -> Isolation:
    """Try each set of namespaces once per process; the first that runs ``true`` wins."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return Isolation((), False, False, "util-linux `unshare` is not on PATH")
    true = shutil.which("true") or "/bin/true"
    failures = []
    for flags in _TRIES:
        pid = "--pid" in flags
        prefix = (unshare, *flags, *(("--fork", "--kill-child") if pid else ()))
        said = f"`unshare {' '.join(flags)}`"
        try:
            done = subprocess.run([*prefix, true], capture_output=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired) as exc:
            failures.append(f"{said}: {exc}")
            continue
        if done.returncode == 0:
            return Isolation(prefix, "--net" in flags, pid, f"{said} works")
        failures.append(
            f"{said} exit {done.returncode}: {done.stderr.decode(errors='replace').strip()}"
        )
    return Isolation((), False, False, "; ".join(failures))


def init(status_fd: int) -> list[str]:
    """The argv of the namespace's init; append the code's argv."""
    return [sys.executable, "-I", "-S", "-c", INIT, str(status_fd)]


def read_status(fd: int) -> int | None:
    """The code's exit status as :mod:`subprocess` gives it, from the init's report; None
    when the init did not report (it was killed: the timeout, a size limit, cancelled)."""
    os.set_blocking(fd, False)
    try:
        data = os.read(fd, 64)
    except BlockingIOError:
        return None
    try:
        return os.waitstatus_to_exitcode(int(data))
    except ValueError:
        return None


def pdeath(parent_pid: int) -> list[str]:
    """A prefix that kills the command when ``parent_pid`` dies (``unshare`` itself must die
    with sopbus: its ``--kill-child`` then ends the namespace)."""
    setpriv = shutil.which("setpriv")
    if setpriv is not None:
        return [setpriv, "--pdeathsig", "KILL", "--"]
    return [sys.executable, "-I", "-S", "-c", _PDEATH, str(parent_pid)]


_PDEATH = r"""
import ctypes, os, signal, sys
ctypes.CDLL(None).prctl(ctypes.c_ulong(1), ctypes.c_ulong(signal.SIGKILL), *[ctypes.c_ulong(0)] * 3)
# PR_SET_PDEATHSIG above; then: did the parent die before it?
if os.getppid() != int(sys.argv[1]):
    os._exit(137)
os.execvp(sys.argv[2], sys.argv[2:])
"""
