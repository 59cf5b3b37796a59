"""``run_sandboxed``: one run of a command in a fresh scratch directory, on a backend."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath

import trio

from . import _bwrap, _local
from ._env import refuse_secrets
from ._files import copy_tree, relative_path, write_files
from ._process import Capture
from ._scratch import Scratch, sweep_stale
from ._settings import SandboxSettings, current, resolve
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
    command = [str(arg) for arg in argv]
    if not command:
        raise ValueError("argv is empty; pass the command to run, e.g. ['python', 'main.py']")
    extra_env = dict(env or {})
    refuse_secrets(extra_env)
    to_write = {relative_path(name): content for name, content in (files or {}).items()}
    if workspace is not None and not workspace.is_dir():
        raise ValueError(f"workspace {workspace} is not a directory")
    backend, scratch = await trio.to_thread.run_sync(
        _prepare, sandbox or current(), workspace, to_write
    )
    try:
        started = time.perf_counter()
        runner = _bwrap.run if backend == "bwrap" else _local.run
        exit_code, out, err, timed_out = await runner(scratch, command, limits, extra_env)
        duration = time.perf_counter() - started
        if keep is not None:
            await trio.to_thread.run_sync(lambda: copy_tree(scratch.work, keep, collecting=True))
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(scratch.remove)
    isolated = backend == "bwrap" or _local.network_isolated()
    return SandboxResult(
        argv=tuple(command),
        exit_code=exit_code,
        stdout=_fixed_paths(out, scratch),
        stderr=_fixed_paths(err, scratch),
        timed_out=timed_out,
        duration_s=duration,
        network_isolated=isolated,
        workdir=SANDBOX_DIR,
        backend=backend,
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
