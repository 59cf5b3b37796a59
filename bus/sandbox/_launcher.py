"""The launcher: a few lines of Python that run inside the sandbox before the code.

It runs between the exec of the interpreter and the exec of the code's argv, so every limit
is set in the child itself, without a ``preexec_fn`` (unsafe in a threaded parent such as
trio's). In order: the parent-death signal (``local``: the child dies with sopbus), dropping
every capability (``local`` as root: ``/proc/<sopbus>/environ`` of a non-dumpable sopbus is
then unreadable), dropping to another user (``bwrap`` as root: the code runs as ``nobody``),
the rlimits, then the exec.
"""

from __future__ import annotations

import sys

from ._types import SandboxLimits

LAUNCHER = r"""
import ctypes, os, resource, signal, sys
memory, cpu, fsize, procs, uid, gid, pdeath, nocaps = map(int, sys.argv[1:9])
argv = sys.argv[10:]
if pdeath or nocaps:
    libc = ctypes.CDLL(None, use_errno=True)
    def prctl(*args):
        return libc.prctl(*[ctypes.c_ulong(a) for a in args + (0,) * (5 - len(args))])
if pdeath:
    prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != pdeath:  # the parent died before the line above
        os._exit(137)
if nocaps:
    for cap in range(64):
        prctl(24, cap)  # PR_CAPBSET_DROP; unknown caps fail, harmlessly
    prctl(47, 4)  # PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL
    prctl(38, 1)  # PR_SET_NO_NEW_PRIVS
    # With an empty bounding set the exec below leaves uid 0 without any capability.
if uid >= 0:
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)  # leaving uid 0 drops every capability
def cap(kind, soft, hard=None):
    hard = soft if hard is None else hard
    old_hard = resource.getrlimit(kind)[1]
    if old_hard != resource.RLIM_INFINITY:
        soft, hard = min(soft, old_hard), min(hard, old_hard)
    resource.setrlimit(kind, (soft, hard))
def own_processes():
    me, n = os.getuid(), 0
    for name in os.listdir("/proc"):
        try:
            n += name.isdigit() and os.stat("/proc/" + name).st_uid == me
        except OSError:
            pass
    return n
cap(resource.RLIMIT_AS, memory)
cap(resource.RLIMIT_CPU, cpu, cpu + 1)
cap(resource.RLIMIT_FSIZE, fsize)
cap(resource.RLIMIT_CORE, 0)
# RLIMIT_NPROC counts every process of the uid, so the budget goes on top of what runs now.
cap(resource.RLIMIT_NPROC, own_processes() + procs)
try:
    os.execvp(argv[0], argv)
except OSError as exc:
    sys.stderr.write("sandbox: cannot run %r: %s\n" % (argv[0], exc))
    os._exit(127 if isinstance(exc, FileNotFoundError) else 126)
"""


def launcher(limits: SandboxLimits, *, python: str = sys.executable, uid: int = -1,
             gid: int = -1, parent_pid: int = 0, drop_caps: bool = False) -> list[str]:
    """The argv that runs the launcher with these settings; append the code's argv.

    ``parent_pid`` > 0 sets the parent-death signal (and checks the parent is that pid).
    """
    return [python, "-I", "-S", "-c", LAUNCHER, str(limits.memory_mb << 20), str(limits.cpu_s),
            str(limits.file_size_mb << 20), str(limits.processes), str(uid), str(gid),
            str(parent_pid), str(int(drop_caps)), "--"]
