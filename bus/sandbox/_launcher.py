"""The launcher: what runs in the sandbox between its start and the exec of the code.

It sets every limit in the child itself, without a ``preexec_fn`` (unsafe in a threaded
parent such as trio's). In order: the rlimits; the parent-death signal (``local``: the child
dies with sopbus); dropping every capability (``local`` as root, so the child cannot read a
non-dumpable sopbus's ``/proc/<pid>/environ``); dropping to another user (``bwrap`` as root:
the code runs as a fresh unprivileged uid). Then the exec.

It is util-linux's ``prlimit`` and ``setpriv`` (small C programs that exec in place, a few
milliseconds) where they are installed, else a few lines of Python (``-I -S``), which cost
an interpreter start (10 ms on an idle machine, far more on a loaded one).
"""

from __future__ import annotations

import functools
import os
import shutil
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


@functools.cache
def util_linux() -> tuple[str, str] | None:
    """The paths of ``prlimit`` and ``setpriv``, or None when either is missing."""
    prlimit, setpriv = shutil.which("prlimit"), shutil.which("setpriv")
    return (prlimit, setpriv) if prlimit and setpriv else None


def own_processes() -> int:
    """How many processes this process's uid has now (``RLIMIT_NPROC`` counts them all)."""
    uid, n = os.getuid(), 0
    for name in os.listdir("/proc"):
        try:
            n += name.isdigit() and os.stat(f"/proc/{name}").st_uid == uid
        except OSError:
            pass
    return n


def launcher(
    limits: SandboxLimits,
    *,
    uid: int = -1,
    gid: int = -1,
    parent_pid: int = 0,
    drop_caps: bool = False,
    processes_now: int = 0,
    tools: tuple[str, str] | None = None,
) -> list[str]:
    """The argv that launches the code with these settings; append the code's argv.

    ``uid`` >= 0 switches to that uid and ``gid`` (from root); ``parent_pid`` > 0 sets the
    parent-death signal; ``drop_caps`` empties every capability set; ``processes_now`` is
    what ``RLIMIT_NPROC`` already counts for the uid the code runs as (the launcher in
    Python counts it itself). ``tools``: (prlimit, setpriv), default :func:`util_linux`.
    """
    tools = tools or util_linux()
    if tools is None:
        return _python_launcher(
            limits, uid=uid, gid=gid, parent_pid=parent_pid, drop_caps=drop_caps
        )
    prlimit, setpriv = tools
    args = [
        prlimit,
        f"--as={limits.memory_mb << 20}",
        f"--cpu={limits.cpu_s}:{limits.cpu_s + 1}",
        f"--fsize={limits.file_size_mb << 20}",
        "--core=0",
        f"--nproc={processes_now + limits.processes}",
        "--",
    ]
    priv = []
    if parent_pid > 0:
        priv += ["--pdeathsig", "KILL"]
    if drop_caps:
        priv += ["--bounding-set=-all", "--inh-caps=-all", "--ambient-caps=-all"]
    if uid >= 0:
        priv += [f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--inh-caps=-all"]
    if priv:
        args += [setpriv, *priv, "--no-new-privs", "--"]
    return args


def _python_launcher(
    limits: SandboxLimits, *, uid: int, gid: int, parent_pid: int, drop_caps: bool
) -> list[str]:
    return [
        sys.executable,
        "-I",
        "-S",
        "-c",
        LAUNCHER,
        str(limits.memory_mb << 20),
        str(limits.cpu_s),
        str(limits.file_size_mb << 20),
        str(limits.processes),
        str(uid),
        str(gid),
        str(parent_pid),
        str(int(drop_caps)),
        "--",
    ]
