"""Shared by the sandbox tests: skipping without bubblewrap, finding processes by a marker
in their command line, and a code-and-run scenario whose coder writes given scripts.

A process is found from outside by a unique marker in its argv (``/proc/<pid>/cmdline``):
inside a pid namespace a process's own pid means nothing out here, so "the child is gone"
is checked by "no live process carries its marker".
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest

from sopbus.bus.sandbox._bwrap import INSTALL, probe

from .cli import start

MARK = "# SIMULATED OUTPUT: canned answers for a test; no model wrote them.\nsimulated = true\n"

needs_bwrap = pytest.mark.skipif(probe().bwrap is None, reason=INSTALL)


def live_processes_with(marker: str) -> list[int]:
    """Pids of live (non-zombie) processes whose command line contains ``marker``."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline:
            found.append(int(name))
    return found


def wait_for(condition: Callable[[], bool], seconds: float = 30.0) -> bool:
    """Poll ``condition`` until it holds or ``seconds`` pass; whether it held. (A bound on
    waiting for an outcome, not an assertion on speed.)"""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def code_run_scenario(
    tmp: Path,
    scripts: Sequence[str],
    *,
    backend: str = "auto",
    timeout_s: float = 30,
    provider: str = "sim",
    base_url: str = "",
    max_attempts: int | None = None,
) -> Path:
    """A code-and-run scenario file whose coder writes ``scripts`` in order (sim provider),
    runs under ``tmp/runs``, with ``[sandbox] backend``; returns the file's path."""
    tmp.mkdir(parents=True, exist_ok=True)
    answers = ", ".join(json.dumps(json.dumps({"plan": "p", "code": c})) for c in scripts)
    (tmp / "fixtures.toml").write_text(
        MARK + f'[[fixture]]\naction = "WriteScript"\nresponses = [{answers}]\n'
    )
    path = tmp / "scenario.toml"
    path.write_text(f"""
[scenario]
name = "sandbox-test"
sop = "code_and_run"
idea = "do the task"
[run]
max_rounds = {2 * len(scripts) + 2}
runs_dir = {json.dumps(str(tmp / "runs"))}
[llm]
provider = "{provider}"
{f'base_url = "{base_url}"' if base_url else ""}
max_tokens = 2000
fixtures = ["fixtures.toml"]
[sandbox]
backend = "{backend}"
[sop]
max_attempts = {max_attempts or len(scripts)}
timeout_s = {timeout_s}
""")
    return path


def sopbus_started(
    *args: str | Path, env: Mapping[str, str] | None = None
) -> subprocess.Popen[str]:
    """``sopbus ARGS`` started in the background (to be killed by the test)."""
    return start(*args, env=env, text=True)


def run_dirs(tmp: Path) -> list[Path]:
    return sorted(p for p in (tmp / "runs").iterdir() if p.is_dir())


def files_containing(root: Path, needle: str) -> list[Path]:
    """Every file under ``root`` (links not followed) whose bytes contain ``needle``."""
    hits = []
    for base, _dirs, names in os.walk(root):
        for name in names:
            path = Path(base, name)
            if not path.is_symlink() and needle.encode() in path.read_bytes():
                hits.append(path)
    return hits
