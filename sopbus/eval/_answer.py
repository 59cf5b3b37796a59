"""A run's answer, read from the place its scenario's ``[eval].answer`` declares."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sopbus.bus import EVENTS, read_events

# The run directory's folder of files the actions wrote (the store's layout).
_ARTIFACTS = "artifacts"


def read_answer(run_dir: Path, place: str) -> str | None:
    """The answer at ``place`` (``last_message``, ``artifact:NAME``, ``output:Action.field``),
    or ``None`` when the run left nothing there."""
    kind, _, where = place.partition(":")
    if kind == "artifact":
        path = run_dir / _ARTIFACTS / where
        inside = path.resolve().is_relative_to((run_dir / _ARTIFACTS).resolve())
        return (
            path.read_text(encoding="utf-8", errors="replace")
            if inside and path.is_file()
            else None
        )
    messages = [
        r["message"]
        for r in read_events(run_dir / EVENTS)
        if r.get("kind") in ("message_published", "message_undelivered")
    ]
    messages = [m for m in messages if m.get("cause_by") != "UserRequirement"]
    if kind == "last_message":
        return str(messages[-1].get("content", "")) if messages else None
    action, _, field = where.partition(".")
    for message in reversed(messages):
        if message.get("cause_by") == action:
            return _field(message.get("payload"), field)
    return None


def _field(payload: Any, dotted: str) -> str | None:
    for part in dotted.split("."):
        if not isinstance(payload, dict) or part not in payload:
            return None
        payload = payload[part]
    return payload if isinstance(payload, str) else json.dumps(payload)


def read_payload(run_dir: Path, action: str) -> dict[str, Any] | None:
    """The payload of the last message ``action`` produced in the run, or ``None``."""
    for record in reversed(list(read_events(run_dir / EVENTS))):
        message = record.get("message") or {}
        if message.get("cause_by") == action and isinstance(message.get("payload"), dict):
            return dict(message["payload"])
    return None
