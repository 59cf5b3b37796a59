"""Which files the tools of ``sopbus mcp`` may read.

The caller of a tool is a program, often a model steered by what it reads (an IDE agent is
open to prompt injection), not the user at a terminal; so a scenario path it gives is
taken only under the server's roots: the shipped scenarios, the folders the server was
started with (``--scenario-dir``, repeatable), and the ``scenario.toml`` sopbus wrote into
each run of ``--runs-dir`` (not the run's artifacts, which a model may have written). A run
is read only from ``--runs-dir``. A path is checked as written (``..`` folded, before the
file system is asked, so a refusal says nothing of what exists outside) and again with its
links resolved (a link in a root that leads out is refused). A refusal names the roots
and the fix, and no error that reaches the client quotes a line or a byte of a file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol

from sopbus.bus import EVENTS, SCENARIO, ConfigError


class ServerSettings(Protocol):
    """What of the server's settings (``_mcp_tools.ServerSettings``) the roots come from."""

    @property
    def runs_dir(self) -> Path: ...
    @property
    def scenario_dirs(self) -> tuple[Path, ...]: ...


MAX_REF_CHARS = 4096
"""The longest scenario or run reference taken: Linux's PATH_MAX. A longer string is no
path (a 100,000-character one once ended in a traceback)."""
SUFFIX = ".toml"


def checked_ref(ref: str, what: str) -> None:
    """``ref`` as a tool argument that names a file: bounded and free of NUL characters
    (neither can be a path; the message does not echo a string that long)."""
    if len(ref) > MAX_REF_CHARS:
        raise ConfigError(
            f"{what}: {len(ref)} characters, longer than any path (at most {MAX_REF_CHARS}); "
            f"give a shipped scenario's name (list_examples) or a file's path"
        )
    if "\0" in ref:
        raise ConfigError(f"{what} {ref!r}: holds a NUL character, which no path can")


def scenario_file(ref: str, settings: ServerSettings) -> Path:
    """The scenario file ``ref`` names (a shipped name, or a path relative to the server's
    working directory) when it is under the server's roots; a ConfigError otherwise."""
    from sopbus._examples import is_name, shipped_scenario

    checked_ref(ref, "scenario")
    path = Path(os.path.abspath(ref))
    allowed = scenario_allowed(path, settings)
    if is_name(ref) and not (allowed and _exists(path)):
        return shipped_scenario(ref)  # an unknown name: the CLI's error, with close names
    if not allowed:
        raise ConfigError(_outside(ref, settings))
    if not _exists(path):
        raise ConfigError(
            f"{ref}: no such scenario file ({path} is not there); give the name of a shipped "
            f"scenario (list_examples) or the path of a scenario file"
        )
    real = path.resolve()
    if not scenario_allowed(real, settings):
        raise ConfigError(_outside(ref, settings, f"it is a link to {real}, outside them"))
    if not real.is_file():
        raise ConfigError(
            f"{ref}: not a scenario file ({path} is not a regular file); give the path of a "
            f"scenario file or a shipped scenario's name (list_examples)"
        )
    return Path(ref)


def scenario_allowed(path: Path, settings: ServerSettings) -> bool:
    """Whether ``path`` (absolute) is a ``.toml`` file under one of the server's roots."""
    if path.suffix.lower() != SUFFIX:
        return False
    from sopbus._examples import shipped_dir

    if any(_under(path, root) for root in (shipped_dir(), *settings.scenario_dirs)):
        return True
    # A run's own scenario.toml, one level below --runs-dir; nothing else of a run.
    return path.name == SCENARIO and _under(path.parent, settings.runs_dir, depth=1)


def run_dir(ref: str, settings: ServerSettings) -> Path:
    """The run ``ref`` names (as ``--runs-dir``'s commands take it), when it is one of the
    server's runs directory; a ConfigError otherwise."""
    from ._runref import LAST, resolve_run

    checked_ref(ref, "run")
    runs = settings.runs_dir
    if ref != LAST and _has_folder(ref):
        candidates = (Path(os.path.abspath(ref)), Path(os.path.abspath(runs / ref)))
        if not any(_under(c, runs, depth=1) for c in candidates):
            raise ConfigError(_run_outside(ref, runs))
    found = resolve_run(ref, runs)
    if not _under(found.resolve(), runs, depth=1):
        raise ConfigError(_run_outside(ref, runs))
    return found


def _under(path: Path, root: Path, depth: int | None = None) -> bool:
    """Whether ``path`` is inside ``root`` (as given, or with its links resolved), at
    exactly ``depth`` levels when one is given."""
    for base in {Path(os.path.abspath(root)), root.resolve()}:
        if path.is_relative_to(base) and path != base:
            if depth is None or len(path.relative_to(base).parts) == depth:
                return True
    return False


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except OSError:  # a name too long for the file system: nothing is there
        return False


def _has_folder(ref: str) -> bool:
    return "/" in ref or os.sep in ref or ref in (".", "..")


def _roots(settings: ServerSettings) -> str:
    from sopbus._examples import shipped_dir

    dirs = [str(shipped_dir()), *map(str, settings.scenario_dirs)]
    return f"{', '.join(dirs)} and the runs of {settings.runs_dir}"


def _outside(ref: str, settings: ServerSettings, why: str = "") -> str:
    because = f" ({why})" if why else ""
    return (
        f"{ref}: not a scenario this server reads{because}: it takes .toml files under "
        f"{_roots(settings)}; give a shipped scenario's name (list_examples), or restart "
        f"`sopbus mcp` with --scenario-dir for the folder the scenario is in"
    )


def _run_outside(ref: str, runs: Path) -> str:
    return (
        f"run {ref!r}: not a run of this server's runs directory {runs}/ (the tools read "
        f"runs there only, a folder holding {EVENTS}); give a run id or 'last', or restart "
        f"`sopbus mcp` with --runs-dir for the folder the run is in"
    )
