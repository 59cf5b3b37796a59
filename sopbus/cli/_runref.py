"""Finding a run from what a user typed for ``RUN``, and reading what it says about itself.

``RUN`` is one of: ``last`` (the run of ``--runs-dir`` started most recently), ``last~N``
(the N-th run before it: ``sopbus diff last~1 last`` compares the last two), a run id
under ``--runs-dir`` (or a prefix of exactly one), or the path of a run directory. A run
directory is one that holds ``events.jsonl``: the run store creates it before anything
else, so even a run killed in its first round is found.

What cannot be resolved is a :class:`~sopbus.bus.ConfigError` (exit 2) that says what was looked
for, where, and what is there. Stdlib-only at module level, like every command module.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sopbus.bus import EVENTS, ConfigError

DEFAULT_RUNS_DIR = "runs"

LAST = "last"


def is_run_dir(path: Path) -> bool:
    return (path / EVENTS).is_file()


def check_runs_dir(runs_dir: Path) -> None:
    """A ``--runs-dir`` that names a file is the user's mistake, said as such (exit 2)."""
    if runs_dir.exists() and not runs_dir.is_dir():
        raise ConfigError(
            f"--runs-dir {runs_dir} is a file, not a directory of runs; point --runs-dir "
            f"at the directory your runs went to (default: {DEFAULT_RUNS_DIR})"
        )


def run_dirs(runs_dir: Path) -> list[Path]:
    """The run directories in ``runs_dir``, newest first (by start time)."""
    check_runs_dir(runs_dir)
    if not runs_dir.is_dir():
        return []
    found = [p for p in runs_dir.iterdir() if p.is_dir() and is_run_dir(p)]
    return sorted(found, key=lambda p: (started_at(p), p.name), reverse=True)


def resolve_run(ref: str, runs_dir: Path) -> Path:
    """The directory of the run ``ref`` names (see the module docstring)."""
    check_runs_dir(runs_dir)
    back = _back_from_last(ref)
    if back is not None:
        return _before_last(runs_dir, ref, back)
    for candidate in (runs_dir / ref, Path(ref)):
        if is_run_dir(candidate):
            return candidate
    runs = run_dirs(runs_dir)
    prefixed = [p for p in runs if p.name.startswith(ref)]
    if len(prefixed) == 1:
        return prefixed[0]
    if not runs:
        raise ConfigError(_no_runs(runs_dir, f"run {ref!r}"))
    raise ConfigError(_no_such_run(ref, runs_dir, runs, prefixed))


def _back_from_last(ref: str) -> int | None:
    """How far ``ref`` counts back from the last run (``last`` 0, ``last~2`` 2), or None."""
    if ref == LAST:
        return 0
    word, tilde, count = ref.partition("~")
    return int(count) if word == LAST and tilde and count.isdigit() else None


def _before_last(runs_dir: Path, ref: str, back: int) -> Path:
    runs = run_dirs(runs_dir)
    if not runs:
        raise ConfigError(_no_runs(runs_dir, "the last run" if back == 0 else f"run {ref!r}"))
    if back >= len(runs):
        raise ConfigError(
            f"no run {ref!r}: {runs_dir}/ holds {len(runs)} run(s), so the oldest is "
            f"'{LAST}~{len(runs) - 1}' (list them with `sopbus runs --runs-dir {runs_dir}`)"
        )
    return runs[back]


# What a run writes besides its event log: a directory holding one of them and no
# events.jsonl is a run whose log was removed, which `verify` reports (exit 1), not a
# directory that is no run at all (exit 2).
_RUN_FILES = ("summary.json", "scenario.toml", "costs.jsonl", "calls.jsonl", "events.*.jsonl")


def remains_of_run(ref: str, runs_dir: Path) -> Path | None:
    """The directory ``ref`` names (by id under ``runs_dir``, or as a path) when it holds a
    run's files but no ``events.jsonl``; else None."""
    for candidate in (runs_dir / ref, Path(ref)):
        if candidate.is_dir() and any(any(candidate.glob(name)) for name in _RUN_FILES):
            return candidate
    return None


def _no_runs(runs_dir: Path, wanted: str) -> str:
    state = "is empty" if runs_dir.is_dir() else "does not exist"
    return (
        f"cannot find {wanted}: {runs_dir}/ {state} (no directory with {EVENTS} in it); "
        f"start one with `sopbus run SCENARIO --runs-dir {runs_dir}`, or point "
        f"--runs-dir at the directory your runs went to"
    )


def _no_such_run(ref: str, runs_dir: Path, runs: list[Path], prefixed: list[Path]) -> str:
    if prefixed:
        names = ", ".join(p.name for p in prefixed[:5])
        return (
            f"run {ref!r} is ambiguous in {runs_dir}/: it starts {len(prefixed)} run ids "
            f"({names}); give more of the id"
        )
    from difflib import get_close_matches

    near = get_close_matches(ref, [p.name for p in runs], n=1, cutoff=0.6)
    hint = f" (did you mean {near[0]!r}?)" if near else ""
    recent = ", ".join(p.name for p in runs[:3])
    return (
        f"no run {ref!r}{hint}: looked for {runs_dir / ref}/ and for a run directory "
        f"{ref}/ ({EVENTS} in neither); the most recent runs in {runs_dir}/ are {recent}, "
        f"or say '{LAST}' (list them with `sopbus runs --runs-dir {runs_dir}`)"
    )


def first_event(run_dir: Path) -> dict[str, Any] | None:
    """The first line of ``events.jsonl`` (the ``run_started`` record), read alone."""
    try:
        with open(run_dir / EVENTS, "rb") as f:
            line = f.readline()
    except OSError:
        return None
    if not line.endswith(b"\n"):  # torn: the run died while writing it
        return None
    record = json.loads(line)
    return record if isinstance(record, dict) else None


def started_at(run_dir: Path) -> float:
    """When the run started (Unix time): from its summary, else its first event, else the
    directory's modification time."""
    from sopbus.bus import read_summary

    summary = read_summary(run_dir)
    if summary is not None and summary.started_at:
        return summary.started_at
    first = first_event(run_dir)
    if first is not None and isinstance(first.get("t"), (int, float)):
        return float(first["t"])
    return run_dir.stat().st_mtime


def console() -> Any:
    """The rich console the commands print their tables to. Piped into a file or another
    program it is wide (rich would assume 80 columns and squeeze run ids into "…");
    on a terminal it is the terminal's width."""
    from rich.console import Console

    return Console(width=200) if _piped() else Console()


def _piped() -> bool:
    """Output goes to a file or another program and no width was given (``COLUMNS``)."""
    import os
    import sys

    return not sys.stdout.isatty() and "COLUMNS" not in os.environ


UNWRAPPED = 100_000
"""The width of a plain line piped into a file or another program: it is not wrapped."""


def line_width() -> int:
    """The width plain lines (a verdict, a path, a progress line) wrap at: the terminal's
    (or ``COLUMNS``); piped, none, so a script that greps a line finds it whole."""
    return UNWRAPPED if _piped() else int(console().width)
