"""``sopbus`` as a user runs it: ``python -m sopbus`` in a subprocess of the test's interpreter.

``env`` lays variables over the test process's environment (``None`` as a value removes
that variable); ``COLUMNS`` is removed unless ``columns`` is given, so tables are as wide as
they are for a user without a terminal, whatever the test runner's terminal is.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from .paths import ROOT

ARGV = (sys.executable, "-m", "sopbus")


def environ(
    env: Mapping[str, str | None] | None = None, columns: int | None = None
) -> dict[str, str]:
    """The environment a ``sopbus`` subprocess gets (see the module docstring)."""
    merged: dict[str, str | None] = {
        **os.environ,
        "COLUMNS": None if columns is None else str(columns),
    }
    merged.update(env or {})
    return {k: v for k, v in merged.items() if v is not None}


def sopbus(
    *args: str | Path,
    cwd: Path = ROOT,
    env: Mapping[str, str | None] | None = None,
    columns: int | None = None,
    stdin: int | IO[Any] | None = subprocess.DEVNULL,
    timeout: float = 300,
) -> subprocess.CompletedProcess[str]:
    """Runs ``sopbus ARGS`` in ``cwd`` to its end; its output is captured as text."""
    return subprocess.run(
        [*ARGV, *map(str, args)],
        cwd=cwd,
        env=environ(env, columns),
        stdin=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def start(
    *args: str | Path,
    cwd: Path = ROOT,
    env: Mapping[str, str | None] | None = None,
    stdout: int | None = subprocess.PIPE,
    stderr: int | None = subprocess.PIPE,
    text: bool = False,
) -> subprocess.Popen[Any]:
    """Starts ``sopbus ARGS`` in ``cwd`` in the background (the test waits for it or kills it)."""
    return subprocess.Popen(
        [*ARGV, *map(str, args)], cwd=cwd, env=environ(env), stdout=stdout, stderr=stderr, text=text
    )
