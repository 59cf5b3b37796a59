"""Run untrusted generated code (QA's RunCode, the code-and-run executor) in a scratch directory.

Isolated: the cwd (a fresh copy; the workspace is never written through it), the environment
(built from scratch, secret-named variables refused), rlimits (memory, CPU, file size, processes),
a timeout that SIGKILLs the process group, and the network where ``unshare --net`` works.
NOT isolated: the rest of the filesystem (same uid, root here), processes that ``setsid`` out of
the group, the kernel. It contains honest mistakes and keeps API keys out; it is not a security
boundary against a determined attacker.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import NamedTuple

import msgspec
import trio
from loguru import logger


class SandboxLimits(msgspec.Struct, frozen=True):
    """What one sandboxed run may use. Every field must be > 0.

    ``timeout_s`` is wall-clock time for the whole run (the process group is killed when it
    passes); ``cpu_s`` is CPU time (the kernel sends SIGXCPU); ``memory_mb`` caps the address
    space of each process; ``max_output_bytes`` applies to stdout and stderr separately;
    ``processes`` is how many more processes the run may start (not enforced for root).
    """

    timeout_s: float = 60
    memory_mb: int = 1024
    cpu_s: int = 60
    max_output_bytes: int = 1_000_000
    file_size_mb: int = 64
    processes: int = 256

    def __post_init__(self) -> None:
        for name in self.__struct_fields__:
            value = getattr(self, name)
            if not value > 0:  # written this way round so NaN fails too
                raise ValueError(f"SandboxLimits.{name} must be > 0, got {value!r}; "
                                 f"pass a positive {name}")


class SandboxResult(msgspec.Struct, frozen=True):
    """What a sandboxed run did.

    ``exit_code`` is the process's status (negative: killed by that signal, as in
    :mod:`subprocess`), or None when the timeout killed it (then ``timed_out`` is True).
    ``workdir`` is where it ran; that directory is gone when the result is returned (copy what
    you need with ``keep=``). ``network_isolated`` says whether the run had no network.
    """

    argv: tuple[str, ...]
    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool
    duration_s: float
    network_isolated: bool
    workdir: str


# Names that look like credentials. Broad on purpose (AUTH also refuses AUTHOR): a refused
# harmless name costs a rename, a leaked key costs money.
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|^OPENAI_", re.I)
_SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_SWEEP_SECONDS = 5.0

# Runs in the child between exec of the interpreter and exec of the user's argv, so the limits
# are set in the child without a preexec_fn (which is unsafe in a threaded parent such as trio's).
# argv: memory_bytes cpu_s file_bytes processes -- command...
_LAUNCHER = r"""
import os, resource, sys
def cap(kind, soft, hard=None):
    hard = soft if hard is None else hard
    old_hard = resource.getrlimit(kind)[1]
    if old_hard != resource.RLIM_INFINITY:
        soft, hard = min(soft, old_hard), min(hard, old_hard)
    resource.setrlimit(kind, (soft, hard))
def own_processes():
    uid, n = os.getuid(), 0
    for name in os.listdir("/proc"):
        try:
            n += name.isdigit() and os.stat("/proc/" + name).st_uid == uid
        except OSError:
            pass
    return n
memory, cpu, fsize, procs = map(int, sys.argv[1:5])
cap(resource.RLIMIT_AS, memory)
cap(resource.RLIMIT_CPU, cpu, cpu + 1)
cap(resource.RLIMIT_FSIZE, fsize)
cap(resource.RLIMIT_CORE, 0)
# RLIMIT_NPROC counts every process of the uid, so the budget goes on top of what runs now.
cap(resource.RLIMIT_NPROC, own_processes() + procs)
argv = sys.argv[6:]
try:
    os.execvp(argv[0], argv)
except OSError as exc:
    sys.stderr.write("sandbox: cannot run %r: %s\n" % (argv[0], exc))
    os._exit(127 if isinstance(exc, FileNotFoundError) else 126)
"""


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
        failures.append(f"`unshare {flags[0]}` exit {done.returncode}: "
                        f"{done.stderr.decode(errors='replace').strip()}")
    return _Isolation((), "; ".join(failures))


def _refuse_secrets(env: Mapping[str, str]) -> None:
    for name in env:
        if _SECRET_NAME.search(name):
            raise ValueError(f"environment variable {name!r} looks like a secret and is not "
                             f"passed to sandboxed code; generated code must not see API keys")
        if not name or "=" in name or "\0" in name:
            raise ValueError(f"environment variable name {name!r} is not valid")


def _environment(home: Path, tmp: Path, extra: Mapping[str, str]) -> dict[str, str]:
    env = {
        # The venv's bin first, so `python` and `pytest` are the ones sopbus runs with.
        "PATH": f"{os.path.dirname(sys.executable)}{os.pathsep}{_SYSTEM_PATH}",
        "HOME": str(home),
        "TMPDIR": str(tmp),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "PYTHONUNBUFFERED": "1",  # a killed run still shows what it printed
        "MPLBACKEND": "Agg",  # plots go to files; there is no display
        # Each BLAS/OpenMP thread reserves address space; one thread keeps RLIMIT_AS meaningful.
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }
    env.update(extra)
    return env


def _relative_path(name: str) -> PurePosixPath:
    path = PurePosixPath(name)
    if not path.parts or path.is_absolute() or ".." in path.parts:
        raise ValueError(f"file name {name!r} must be a relative path inside the sandbox "
                         f"(not absolute, no '..'), e.g. 'src/main.py'")
    return path


def _prepare(work: Path, workspace: Path | None, files: Mapping[PurePosixPath, str | bytes]) -> None:
    if workspace is not None:
        # symlinks=True: a link to a huge tree outside is copied as a link, not followed.
        shutil.copytree(workspace, work, symlinks=True)
    work.mkdir(exist_ok=True)
    for rel, content in files.items():
        target = work.joinpath(*rel.parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, str):
            target.write_text(content, encoding="utf-8")
        else:
            target.write_bytes(content)


def _keep(work: Path, keep: Path) -> None:
    try:
        shutil.copytree(work, keep, symlinks=True, dirs_exist_ok=True)
    except shutil.Error as exc:  # the code may have left unreadable files; keep the rest
        logger.warning("sandbox: some files were not kept in {}: {}", keep, exc)


class _Capture:
    """Keeps the first ``cap`` bytes of a stream and counts the rest."""

    def __init__(self, cap: int):
        self.cap = cap
        self.data = bytearray()
        self.total = 0

    async def drain(self, stream: trio.abc.ReceiveStream) -> None:
        # Read to the end even past the cap: a writer blocked on a full pipe never exits.
        while chunk := await stream.receive_some():
            self.total += len(chunk)
            self.data += chunk[: max(0, self.cap - len(self.data))]

    def text(self) -> str:
        text = self.data.decode("utf-8", errors="replace")
        if self.total > len(self.data):
            text += (f"\n[sandbox: output truncated: kept the first {len(self.data)} of "
                     f"{self.total} bytes]\n")
        return text


def _kill_group(pgid: int) -> bool:
    """SIGKILL every process in the group; False when the group is empty."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        return False
    return True


async def _sweep_group(pgid: int) -> None:
    # The leader is reaped, but its children are reaped by init a moment after they die; wait
    # until the group is empty so no process of the run outlives the call. (A pgid cannot be
    # reused while any member, zombie or not, still exists.)
    deadline = trio.current_time() + _SWEEP_SECONDS
    while _kill_group(pgid):
        if trio.current_time() > deadline:
            logger.warning("sandbox: process group {} still has members after SIGKILL", pgid)
            return
        await trio.sleep(0.01)


async def _reap(proc: trio.Process) -> None:
    """Kill what is left of the run and collect its exit status; runs shielded."""
    if proc.returncode is None:
        _kill_group(proc.pid)
    await proc.wait()
    await _sweep_group(proc.pid)
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            await stream.aclose()


async def _run(command: list[str], cwd: Path, env: dict[str, str],
               limits: SandboxLimits) -> tuple[int | None, _Capture, _Capture, bool]:
    out, err = _Capture(limits.max_output_bytes), _Capture(limits.max_output_bytes)
    proc = await trio.lowlevel.open_process(
        command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, start_new_session=True)  # own group: one killpg ends the run
    assert proc.stdout is not None and proc.stderr is not None
    try:
        # The one place that owns the run's timeout: the limit is a value, applied here.
        with trio.move_on_after(limits.timeout_s) as deadline:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(out.drain, proc.stdout)
                nursery.start_soon(err.drain, proc.stderr)
                await proc.wait()
                # A finished run's background children would hold the pipes open.
                _kill_group(proc.pid)
        finished = proc.returncode is not None
    finally:
        with trio.CancelScope(shield=True):
            await _reap(proc)
    return (proc.returncode if finished else None), out, err, deadline.cancelled_caught


async def run_sandboxed(
    argv: Sequence[str],
    *,
    workspace: Path | None = None,
    files: Mapping[str, str | bytes] | None = None,
    limits: SandboxLimits = SandboxLimits(),
    env: Mapping[str, str] | None = None,
    keep: Path | None = None,
) -> SandboxResult:
    """Run ``argv`` in a fresh scratch copy of ``workspace`` plus ``files``; never raises for
    what the code does (non-zero exit, timeout), only for a wrong call.

    ``python`` on the sandbox's PATH is the interpreter running sopbus (its venv, with pytest).
    ``env`` adds variables to a clean environment; a secret-looking name raises ValueError.
    ``keep``, if given, receives the scratch directory's final contents (plots, reports).
    The scratch directory is deleted before returning, also on timeout or cancellation.
    """
    command = [str(arg) for arg in argv]
    if not command:
        raise ValueError("argv is empty; pass the command to run, e.g. ['python', 'main.py']")
    extra_env = dict(env or {})
    _refuse_secrets(extra_env)
    to_write = {_relative_path(name): content for name, content in (files or {}).items()}
    if workspace is not None and not workspace.is_dir():
        raise ValueError(f"workspace {workspace} is not a directory")
    isolation = await trio.to_thread.run_sync(_detect_network_isolation)
    root = Path(await trio.to_thread.run_sync(functools.partial(
        tempfile.mkdtemp, prefix="sopbus-sandbox-")))
    work, tmp = root / "work", root / "tmp"
    try:
        tmp.mkdir()
        await trio.to_thread.run_sync(_prepare, work, workspace, to_write)
        launcher = [sys.executable, "-I", "-S", "-c", _LAUNCHER, str(limits.memory_mb << 20),
                    str(limits.cpu_s), str(limits.file_size_mb << 20), str(limits.processes), "--"]
        started = time.perf_counter()
        exit_code, out, err, timed_out = await _run(
            [*isolation.prefix, *launcher, *command], work, _environment(work, tmp, extra_env),
            limits)
        duration = time.perf_counter() - started
        if keep is not None:
            await trio.to_thread.run_sync(_keep, work, keep)
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(functools.partial(shutil.rmtree, root,
                                                            ignore_errors=True))
    return SandboxResult(argv=tuple(command), exit_code=exit_code, stdout=out.text(),
                         stderr=err.text(), timed_out=timed_out, duration_s=duration,
                         network_isolated=bool(isolation.prefix), workdir=str(work))
