"""Which backend runs a sandbox, where its scratch directories go, and the choice itself.

A run's settings are a frozen value. The assembly of a run scopes them to the run with
:func:`using` (a context variable, as :func:`decimal.localcontext` scopes a precision), so
the roles that run code (QA's pytest, the code executor, the gate's checker) need not pass
them by hand; a caller may also pass ``sandbox=`` to :func:`sopbus.bus.run_sandboxed`.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import msgspec
from loguru import logger

from .._errors import ConfigError
from . import _bwrap
from ._types import BACKENDS, DEFAULT_SCRATCH_MB, DEFAULT_TMP_MB, BackendName

UNISOLATED_WARNING = "model-written code runs without isolation; install bubblewrap"
FALLBACK_NOTE = "sandbox: auto chose the local backend"


class SandboxSettings(msgspec.Struct, frozen=True, kw_only=True):
    """``backend``: ``"bwrap"``, ``"local"``, or ``"auto"`` (bwrap when it works here, else
    local). ``scratch_root``: where scratch directories go (a run's ``.sandbox/``); None means
    the system's temporary directory. ``untrusted``: the code comes from a real model, so
    ``auto`` falling back to ``local`` warns. ``scratch_mb``: what the files of the working
    directory may total (a run that passes it is stopped, and at most that much is copied
    out with ``keep=``); ``tmp_mb``: the size of ``/tmp`` and of the home directory."""

    backend: BackendName = "auto"
    scratch_root: Path | None = None
    untrusted: bool = False
    scratch_mb: int = DEFAULT_SCRATCH_MB
    tmp_mb: int = DEFAULT_TMP_MB

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(
                f"sandbox backend {self.backend!r}: expected one of {', '.join(BACKENDS)}"
            )
        for name in ("scratch_mb", "tmp_mb"):
            if not getattr(self, name) > 0:
                raise ValueError(f"SandboxSettings.{name} must be > 0, got {getattr(self, name)!r}")


class _Scope:
    """The settings of one run, and whether that run has warned yet."""

    def __init__(self, settings: SandboxSettings):
        self.settings = settings
        self.warned = False
        self.said: set[str] = set()


# What was said outside any run: a library caller's loop of runs hears a limit once too.
_SAID_OUTSIDE: set[str] = set()

_current: contextvars.ContextVar[_Scope | None] = contextvars.ContextVar(
    "sopbus_sandbox", default=None
)


@contextmanager
def using(settings: SandboxSettings) -> Iterator[SandboxSettings]:
    """Run the block (and the tasks it starts) with these sandbox settings."""
    token = _current.set(_Scope(settings))
    try:
        yield settings
    finally:
        _current.reset(token)


def current() -> SandboxSettings:
    scope = _current.get()
    return scope.settings if scope is not None else SandboxSettings()


def say_once(note: str) -> bool:
    """Whether ``note`` is new in this run (then it is remembered); outside a run, in this
    process."""
    scope = _current.get()
    said = scope.said if scope is not None else _SAID_OUTSIDE
    new = note not in said
    said.add(note)
    return new


def check_backend(backend: BackendName, *, where: str = "[sandbox].backend") -> str:
    """The backend that will run code for ``backend``; :class:`~sopbus.bus.ConfigError` when
    ``bwrap`` is asked for and does not work here. Probes bubblewrap (once per process)."""
    found = _bwrap.probe()
    if backend == "bwrap" and found.bwrap is None:
        raise ConfigError(
            f'{where} = "bwrap" (or --sandbox bwrap), but {found.reason}; '
            f'or set it to "auto" to fall back to the unisolated local backend'
        )
    if backend == "local" or found.bwrap is None:
        return "local"
    return "bwrap"


def resolve(settings: SandboxSettings) -> str:
    """The backend to use now. When ``auto`` falls back to local it says so once per run: a
    warning for code a real model wrote, a note for the simulator's own scripts."""
    chosen = check_backend(settings.backend, where="sandbox backend")
    if chosen == "local" and settings.backend == "auto":
        scope = _current.get()
        if scope is None or not scope.warned:
            if settings.untrusted:
                logger.warning("{} ({})", UNISOLATED_WARNING, _bwrap.probe().reason)
            else:
                logger.info(
                    "{} ({}); the local backend runs code without isolation",
                    FALLBACK_NOTE,
                    _bwrap.probe().reason,
                )
            if scope is not None:
                scope.warned = True
    return chosen
