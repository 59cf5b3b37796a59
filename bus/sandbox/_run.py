"""``run_sandboxed``: one run of a command in a fresh scratch directory, on a backend."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath

import msgspec
import trio
from loguru import logger

from . import _bwrap, _local
from ._env import refuse_secrets
from ._files import copy_tree, relative_path, write_files
from ._process import Capture
from ._quota import Quota, Watch, mb
from ._scratch import Scratch, sweep_stale
from ._settings import SandboxSettings, current, resolve, say_once
from ._types import SANDBOX_DIR, SANDBOX_HOME, SANDBOX_TMP, SandboxLimits, SandboxResult


async def run_sandboxed(
    argv: Sequence[str],
    *,
    workspace: Path | None = None,
    files: Mapping[str, str | bytes] | None = None,
    limits: SandboxLimits = SandboxLimits(),
    env: Mapping[str, str] | None = None,
    keep: Path | None = None,
    sandbox: SandboxSettings | None = None,
) -> SandboxResult:
    """Run ``argv`` in a fresh scratch copy of ``workspace`` plus ``files``; never raises for
    what the code does (non-zero exit, timeout), only for a wrong call.

    ``python`` on the sandbox's PATH is the interpreter running sopbus (its venv, with pytest).
    ``env`` adds variables to a clean environment; a secret-looking name raises ValueError.
    ``keep``, if given, receives the scratch directory's final contents (plots, reports).
    ``sandbox`` chooses the backend and the scratch root (default: the run's settings, see
    :func:`sopbus.bus.sandbox.using`). Files are copied in and out without following links. The
    scratch directory is deleted before returning, also on timeout or cancellation.
    """
    command, extra_env, to_write = _checked_call(argv, workspace, files, env)
    settings = sandbox or current()
    backend, scratch = await trio.to_thread.run_sync(_prepare, settings, workspace, to_write)
    watch = Watch(_quotas(backend, scratch, settings))
    # No single file may pass what the whole directory may hold.
    biggest = max(settings.scratch_mb, settings.tmp_mb)
    limits = msgspec.structs.replace(limits, file_size_mb=min(limits.file_size_mb, biggest))
    try:
        uid, notes = await trio.to_thread.run_sync(
            _unbound, backend, limits, scratch, command, extra_env
        )
        started = time.perf_counter()
        if backend == "bwrap":
            ran = await _bwrap.run(scratch, command, limits, extra_env, watch, settings.tmp_mb)
        else:
            ran = await _local.run(scratch, command, limits, extra_env, watch, uid)
        exit_code, out, err, timed_out = ran
        duration = time.perf_counter() - started
        if stopped := watch.note():
            notes.append(stopped)
        if keep is not None and (dropped := await _kept(scratch, keep, settings)):
            notes.append(dropped)
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(scratch.remove)
    _warn(notes)
    isolated = backend == "bwrap" or _local.network_isolated()
    stderr = _fixed_paths(err, scratch) + (f"\n[{stopped}]\n" if stopped else "")
    return SandboxResult(
        argv=tuple(command),
        exit_code=exit_code,
        stdout=_fixed_paths(out, scratch),
        stderr=stderr,
        timed_out=timed_out,
        duration_s=duration,
        network_isolated=isolated,
        workdir=SANDBOX_DIR,
        backend=backend,
        notes=tuple(notes),
    )


def _unbound(
    backend: str,
    limits: SandboxLimits,
    scratch: Scratch,
    command: Sequence[str],
    extra_env: Mapping[str, str],
) -> tuple[int, list[str]]:
    """The uid local runs the code as (-1: sopbus's own; bwrap picks its own), and what the
    backend cannot bound here: said, not listed as applied (once per run)."""
    if backend == "bwrap":
        return -1, []
    uid, stays_root = _local.as_user(scratch, command, extra_env)
    return uid, _local.unenforced(limits, stays_root)


def _warn(notes: list[str]) -> None:
    for note in notes:
        # A limit not enforced is the same sentence on every run of a scenario: said once.
        if not note.startswith(_local.UNENFORCED) or say_once(note):
            logger.warning(note)


def _checked_call(
    argv: Sequence[str],
    workspace: Path | None,
    files: Mapping[str, str | bytes] | None,
    env: Mapping[str, str] | None,
) -> tuple[list[str], dict[str, str], dict[PurePosixPath, str | bytes]]:
    """The command, the extra environment and the files to write, each checked: a wrong
    call raises ValueError before any scratch directory exists."""
    command = [str(arg) for arg in argv]
    if not command:
        raise ValueError("argv is empty; pass the command to run, e.g. ['python', 'main.py']")
    extra_env = dict(env or {})
    refuse_secrets(extra_env)
    to_write = {relative_path(name): content for name, content in (files or {}).items()}
    if workspace is not None and not workspace.is_dir():
        raise ValueError(f"workspace {workspace} is not a directory")
    return command, extra_env, to_write


async def _kept(scratch: Scratch, keep: Path, settings: SandboxSettings) -> str | None:
    """Copy the scratch directory's final contents to ``keep``, up to the scratch quota; a
    note naming what was dropped past it, or ``None``."""
    budget = settings.scratch_mb << 20
    dropped = await trio.to_thread.run_sync(
        lambda: copy_tree(scratch.work, keep, collecting=True, budget=budget)
    )
    return _dropped_note(dropped, budget) if dropped else None


def _quotas(backend: str, scratch: Scratch, settings: SandboxSettings) -> list[Quota]:
    """What the watch measures: the working directory, and on the local backend the
    ``/tmp`` and home it lends the code (bwrap mounts those as tmpfs of that size)."""
    quotas = [Quota(scratch.work, settings.scratch_mb << 20, "[sandbox].scratch_mb")]
    if backend != "bwrap":
        quotas += [
            Quota(d, settings.tmp_mb << 20, "[sandbox].tmp_mb") for d in (scratch.tmp, scratch.home)
        ]
    return quotas


def _dropped_note(dropped: list[PurePosixPath], budget: int) -> str:
    names = ", ".join(str(p) for p in dropped[:5]) + (", ..." if len(dropped) > 5 else "")
    return (
        f"sandbox: kept at most {mb(budget)} of the run's files ([sandbox].scratch_mb); "
        f"dropped {len(dropped)} that did not fit: {names}"
    )


def _prepare(
    settings: SandboxSettings, workspace: Path | None, files: Mapping[PurePosixPath, str | bytes]
) -> tuple[str, Scratch]:
    """The backend, and a fresh scratch directory holding the workspace's copy and ``files``
    (stale directories of killed runs removed first). One thread hop for all the disk work."""
    backend = resolve(settings)
    root = settings.scratch_root or Path(tempfile.gettempdir()) / "sopbus-sandbox"
    sweep_stale(root)
    scratch = Scratch(root)
    try:
        if workspace is not None:
            copy_tree(workspace, scratch.work, collecting=False)
        write_files(scratch.work, files)
    except BaseException:
        scratch.remove()
        raise
    return backend, scratch


def _fixed_paths(capture: Capture, scratch: Scratch) -> str:
    """The output with the scratch directory's random host paths shown as the sandbox's
    fixed ones (the local backend prints them; bwrap's code never sees them)."""
    text = capture.text()
    for host, fixed in (
        (scratch.work, SANDBOX_DIR),
        (scratch.home, SANDBOX_HOME),
        (scratch.tmp, SANDBOX_TMP),
        (scratch.path, SANDBOX_DIR),
    ):
        for spelling in dict.fromkeys((str(host), str(host.resolve()))):
            text = text.replace(spelling, fixed)
    return text
