"""The run store: one directory per run, everything the run did, written as it happens.

``runs/<run_id>/`` holds ``scenario.toml`` (the scenario as run), ``events.jsonl`` (every
message, delivery, LLM call and artifact, in order), ``costs.jsonl`` (the cost ledger),
``artifacts/`` (the files the actions wrote) and ``summary.json`` (status, end reason and
totals). Lines are flushed one by one, so a killed run keeps all it had written.
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

import msgspec

from ._errors import ModelOutputError
from ._events import ArtifactWritten, LLMCalled, Note
from ._jsonl import JsonlWriter, encode_json

EVENTS = "events.jsonl"
COSTS = "costs.jsonl"
SUMMARY = "summary.json"
SCENARIO = "scenario.toml"
ARTIFACTS = "artifacts"


def new_run_id(name: str) -> str:
    """``20261130-023512-software-company-3f2a``: sortable by start, readable, unique."""
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:40] or "run"
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{slug}-{secrets.token_hex(2)}"


class RunStore:
    """Writes one run's directory. Implements :class:`bus.TurnServices` for the roles and
    is the event sink of the Environment and the call sink of the gateway."""

    def __init__(self, run_dir: Path, run_id: str):
        self.run_dir = run_dir
        self.run_id = run_id
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / ARTIFACTS).mkdir(exist_ok=True)
        self._events = JsonlWriter(run_dir / EVENTS)
        self._costs = JsonlWriter(run_dir / COSTS)
        self._seq = 0

    @classmethod
    def create(cls, runs_dir: Path, name: str, *, run_id: str | None = None) -> RunStore:
        run_id = run_id or new_run_id(name)
        return cls(runs_dir / run_id, run_id)

    @property
    def artifacts_dir(self) -> Path:
        return self.run_dir / ARTIFACTS

    def log(self, event: Any) -> None:
        """Appends one event record, giving it the next sequence number and the time."""
        self._seq += 1
        event.seq = self._seq
        event.t = time.time()
        self._events.write(event)

    def record_call(self, line: Any) -> None:
        """The gateway's sink: one ledger line, and the same call in the event log."""
        self._costs.write(line)
        self.log(LLMCalled(round=line.round, role=line.role, action=line.action, call=line))

    def write_artifact(self, relpath: str, data: str | bytes, *, role: str, round: int) -> Path:
        path = self.artifacts_dir / _safe_relpath(relpath)
        path.parent.mkdir(parents=True, exist_ok=True)
        raw = data.encode() if isinstance(data, str) else data
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(raw)
        os.replace(tmp, path)  # a reader never sees half a file
        self.log(ArtifactWritten(round=round, role=role, path=str(path.relative_to(self.artifacts_dir)),
                                 sha256=hashlib.sha256(raw).hexdigest(), size=len(raw)))
        return path

    def emit(self, kind: str, data: Mapping[str, Any], *, role: str, round: int) -> None:
        self.log(Note(kind=kind, round=round, role=role, data=dict(data)))

    def write_scenario(self, text: str) -> None:
        (self.run_dir / SCENARIO).write_text(text)

    def write_summary(self, summary: Mapping[str, Any]) -> None:
        path = self.run_dir / SUMMARY
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(msgspec.json.format(encode_json(dict(summary)), indent=2))
        os.replace(tmp, path)

    def close(self) -> None:
        self._events.close()
        self._costs.close()


def _safe_relpath(relpath: str) -> PurePosixPath:
    """A path inside ``artifacts/``; a model that names ``../x`` or ``/etc/x`` is refused."""
    path = PurePosixPath(relpath.replace("\\", "/"))
    if not relpath or path.is_absolute() or ".." in path.parts:
        raise ModelOutputError(f"artifact path {relpath!r} leaves the run's artifacts/ directory; "
                               f"use a relative path without '..'")
    return path
