"""The run store: one directory per run, everything the run did, written as it happens.

``runs/<run_id>/`` holds ``scenario.toml`` (the scenario as run), ``events.jsonl`` (every
message, delivery, LLM call and artifact, in order), ``costs.jsonl`` (the cost ledger),
``artifacts/`` (the files the actions wrote), ``summary.json`` (status, end reason and
totals) and ``calls.jsonl`` (every LLM answer, a replay cassette: see :mod:`sopbus.bus.llm._tape`).

Flush policy of ``events.jsonl``: the records of one publish (its messages) are kept in
memory until the publish is done, then written as one sealed batch with one ``os.write``
(:meth:`RunStore.flush`, which the run loop calls; at most 1024 records wait, a larger
publish is written in batches of that size). Every other event is written at once, after
whatever waits. In ``rounds`` mode a round's messages also wait for its ``round_ended``,
which the run loop logs as soon as the round's turns are done, before the next round's
turns start: they are written together, one write per round, however short the round (a
``round_started`` is logged only for a round that logs more than its messages, just before
the first such event). So a killed run keeps every line of every completed publish and of
every ended round, and every LLM call, reservation, artifact and note as soon as it is
logged; a kill can cut only the write under way, a torn tail that :func:`drop_torn_tail`
removes. The ledger and ``calls.jsonl`` are written line by line.

The messages of one publish are logged at one time, so only the first of them carries
``t``; :func:`sopbus.bus.read_events` gives the others the ``t`` of the line before them.

A resumed run (``sopbus resume``) opens its directory again with :meth:`RunStore.open`;
:func:`drop_torn_tail` first cuts off a line a killed writer left half-written. While a
run executes it holds a lock on its directory (:meth:`RunStore.lock`), so that a resume
cannot start on a run that is still going.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import time
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from .._errors import ConfigError, ModelOutputError
from .._events import (
    ArtifactWritten,
    LLMCalled,
    MessagePublished,
    MessageUndelivered,
    Note,
    RoundEnded,
    RoundStarted,
)
from .._summary import RunSummary, encode_summary
from .._util import (
    ARTIFACTS,
    CALLS,
    COSTS,
    EVENTS,
    SCENARIO,
    SUMMARY,
    JsonlWriter,
    Redactor,
    try_lock,
)

_WAITING = (MessagePublished, MessageUndelivered)  # records that wait for the end of their publish
_BATCH = 1024  # at most this many records wait: a bound on memory and on the length of a seal


_clock = time.time


def _ms(t: float) -> float:
    """``t`` to the millisecond: what a reader can use, and what keeps the log short (LLM
    calls carry their own latency). ``round(t, 3)`` at a third of the cost; the hot
    :meth:`RunStore.log_all` inlines it."""
    return int(t * 1000 + 0.5) / 1000


def _now() -> float:
    """The time of an event (see :func:`_ms`)."""
    return _ms(_clock())


def _round_started(opening: tuple[int, tuple[str, ...], float]) -> RoundStarted:
    rnd, turns, started = opening
    return RoundStarted(round=rnd, turns=turns, t=_ms(started))


def new_run_id(name: str) -> str:
    """``20261130-023512-software-company-3f2a``: sortable by start, readable, unique."""
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:40] or "run"
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{slug}-{secrets.token_hex(2)}"


class RunStore:
    """Writes one run's directory. Implements :class:`sopbus.bus.TurnServices` for the roles and
    is the event sink of the Environment and the call sink of the gateway."""

    def __init__(self, run_dir: Path, run_id: str):
        self.run_dir = run_dir
        self.run_id = run_id
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / ARTIFACTS).mkdir(exist_ok=True)
        self._events = JsonlWriter(run_dir / EVENTS)
        self._costs = JsonlWriter(run_dir / COSTS)
        self._calls: JsonlWriter | None = None  # opened at the first answer
        self._lock_fd = -1
        self._waiting: list[Any] = []
        self._opening: tuple[int, tuple[str, ...], float] | None = None  # see open_round
        self.redactor = Redactor()  # see hide

    @classmethod
    def create(cls, runs_dir: Path, name: str, *, run_id: str | None = None) -> RunStore:
        if runs_dir.exists() and not runs_dir.is_dir():
            raise ConfigError(
                f"the runs directory {runs_dir} is a file, not a directory; point --runs-dir "
                f"(or [run].runs_dir in the scenario) at a directory, or move the file away"
            )
        run_id = run_id or new_run_id(name)
        return cls(runs_dir / run_id, run_id)

    @classmethod
    def open(cls, run_dir: Path) -> RunStore:
        """The store of an existing run directory, appending to its files (the run id is
        the directory's name)."""
        return cls(run_dir, run_dir.name)

    def lock(self) -> None:
        """Marks the run as executing until :meth:`close` (an advisory lock on its
        directory, which the kernel drops if the process dies); a :class:`~sopbus.bus.ConfigError`
        when another process holds it."""
        fd = try_lock(self.run_dir)
        if fd is None:
            raise ConfigError(
                f"run {self.run_id} is still executing in another process "
                f"({self.run_dir}); wait for it to end, or stop it first"
            )
        self._lock_fd = fd

    def hide(self, secrets: tuple[str, ...]) -> None:
        """Blanks each of ``secrets`` (credentials from the base URL, the API key), in
        every form a server may echo it in (:class:`~sopbus.bus._util._redact.Redactor`), as
        ``***`` in everything written from now on: events, ledger, answers, artifacts,
        summary, scenario."""
        self.redactor = Redactor(secrets)
        scrub = self.redactor.data if self.redactor else None
        self._events.scrub = self._costs.scrub = scrub
        if self._calls is not None:
            self._calls.scrub = scrub

    def redact(self, text: str) -> str:
        """``text`` with the secrets given to :meth:`hide` blanked."""
        return self.redactor.text(text)

    @property
    def artifacts_dir(self) -> Path:
        return self.run_dir / ARTIFACTS

    def log(self, event: Any) -> None:
        """Appends one event record, giving it the time. A message waits for :meth:`flush`;
        any other event is written at once (module docstring)."""
        kind = type(event)
        if self._opening is not None and kind not in _WAITING:
            opening, self._opening = self._opening, None
            if kind is not RoundEnded:
                self._waiting.append(_round_started(opening))
        event.t = _now()
        self._waiting.append(event)
        if kind not in _WAITING or len(self._waiting) >= _BATCH:
            self.flush()

    def log_all(self, events: list[Any]) -> None:
        """Appends the records of one publish (messages), which wait for :meth:`flush`. They
        were logged at one time, which only the first of them carries (module docstring)."""
        if not events:
            return
        events[0].t = int(_clock() * 1000 + 0.5) / 1000  # _now()
        waiting = self._waiting
        waiting += events
        if len(waiting) >= _BATCH:
            self.flush()

    def open_round(self, round: int, turns: tuple[str, ...]) -> None:
        """Notes that round ``round`` starts with the turns of ``turns``: its
        ``round_started`` record (with the time now) is logged just before the first event
        of the round that is neither a message nor its ``round_ended``, and not at all if
        there is none (a quiet round)."""
        self._opening = (round, turns, _clock())

    def flush(self) -> None:
        """Writes the records that wait as one sealed batch (or batches of 1024)."""
        if self._waiting:
            waiting, self._waiting = self._waiting, []
            for start in range(0, len(waiting), _BATCH):
                self._events.write_all(waiting[start : start + _BATCH])

    def record_call(self, line: Any) -> None:
        """The gateway's sink: one ledger line, and the same call in the event log."""
        self._costs.write(line)
        self.log(LLMCalled(round=line.round, role=line.role, action=line.action, call=line))

    def record_answer(self, record: Any) -> None:
        """One answered LLM call into ``calls.jsonl`` (the call log's sink)."""
        if self._calls is None:
            self._calls = JsonlWriter(self.run_dir / CALLS)
            self._calls.scrub = self._events.scrub
        self._calls.write(record)

    def write_artifact(self, relpath: str, data: str | bytes, *, role: str, round: int) -> Path:
        path = self.artifacts_dir / safe_relpath(relpath)
        path.parent.mkdir(parents=True, exist_ok=True)
        raw = self.redactor.data(data.encode() if isinstance(data, str) else data)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(raw)
        os.replace(tmp, path)  # a reader never sees half a file
        self.log(
            ArtifactWritten(
                round=round,
                role=role,
                path=str(path.relative_to(self.artifacts_dir)),
                sha256=hashlib.sha256(raw).hexdigest(),
                size=len(raw),
            )
        )
        return path

    def emit(self, kind: str, data: Mapping[str, Any], *, role: str, round: int) -> None:
        self.log(Note(kind=kind, round=round, role=role, data=dict(data)))

    def scenario_digest(self, text: str) -> str:
        """The SHA-256 of ``scenario.toml`` as :meth:`write_scenario` writes ``text``:
        ``run_started`` records it, so ``sopbus verify`` finds the file edited or replaced."""
        return hashlib.sha256(self.redact(text).encode()).hexdigest()

    def write_scenario(self, text: str) -> None:
        path = self.run_dir / SCENARIO
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(self.redact(text).encode())  # the bytes scenario_digest hashed
        os.replace(tmp, path)  # a resume killed here keeps the copy it resumed from

    def write_summary(self, summary: RunSummary) -> None:
        path = self.run_dir / SUMMARY
        tmp = path.with_suffix(".tmp")
        tmp.write_text(self.redact(encode_summary(summary).decode()))
        os.replace(tmp, path)

    def close(self) -> None:
        self.flush()
        self._events.close()
        self._costs.close()
        if self._calls is not None:
            self._calls.close()
        if self._lock_fd >= 0:
            os.close(self._lock_fd)  # releases the lock
            self._lock_fd = -1


def is_locked(run_dir: Path) -> bool:
    """Whether a process is executing the run in ``run_dir`` now (see :meth:`RunStore.lock`)."""
    fd = try_lock(run_dir)
    if fd is None:
        return True
    os.close(fd)  # drops the lock just taken
    return False


def drop_torn_tail(path: Path) -> int:
    """Cuts off an unterminated last line of the JSON-lines file ``path`` (what a writer
    killed mid-line leaves); returns the bytes dropped (0 for a whole or missing file)."""
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return 0
    try:
        size = os.fstat(fd).st_size
        end = size
        while end > 0:
            start = max(0, end - 65536)
            cut = os.pread(fd, end - start, start).rfind(b"\n")
            if cut >= 0:
                end = start + cut + 1
                break
            end = start
        if end < size:
            os.ftruncate(fd, end)
        return size - end
    finally:
        os.close(fd)


def safe_relpath(relpath: str) -> PurePosixPath:
    """A path inside ``artifacts/``; a model that names ``../x`` or ``/etc/x`` is refused."""
    path = PurePosixPath(relpath.replace("\\", "/"))
    if not relpath or path.is_absolute() or ".." in path.parts:
        raise ModelOutputError(
            f"artifact path {relpath!r} leaves the run's artifacts/ directory; "
            f"use a relative path without '..'"
        )
    return path
