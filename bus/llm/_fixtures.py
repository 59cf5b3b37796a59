"""Fixture files: canned answers that the simulated provider returns verbatim.

A scenario may name fixture files whose answers the simulator returns verbatim (still
counted in tokens). A fixture file is TOML and must say it holds simulated output::

    # SIMULATED OUTPUT: canned answers for sopbus's sim provider; no model wrote them.
    simulated = true
    idea = "Write a snake game"      # optional: the idea these answers were written for;
                                     # a run with another idea is warned (see idea_warnings)

    [[fixture]]
    action = "WritePRD"            # required: the action that asks
    role = "Alice"                 # optional: only when this role asks
    match = "snake game"           # optional: a substring the prompt must contain
    responses = [                  # used in order on successive matching calls;
      '{"title": "Snake"}',        # the last one repeats. A table is sent as JSON.
      { title = "Snake II", goals = ["speed"] },
    ]

The first entry (in file order, files in the order given) that fits a request answers it;
a request that no entry fits gets a generated answer.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import msgspec

from .._errors import ConfigError
from .._protocol import LLMRequest
from .._userfiles import read_user_toml

_json = msgspec.json.Encoder()


class Fixture(msgspec.Struct, frozen=True, kw_only=True):
    """One canned answer list from a fixture file (see the module docstring)."""

    action: str
    responses: tuple[str, ...]
    match: str | None = None
    role: str | None = None
    source: str = ""

    def fits(self, request: LLMRequest, prompt: str) -> bool:
        return (
            self.action == request.action
            and (self.role is None or self.role == request.role)
            and (self.match is None or self.match in prompt)
        )


def idea_warnings(idea: str | None, paths: Iterable[str | Path]) -> list[str]:
    """A warning for each fixture file written for another idea than ``idea``: the
    simulator answers from its fixtures whatever the idea, so a user's ``--idea`` would
    silently get the fixtures' project."""
    out = []
    for path in paths:
        written_for = _read(Path(path)).get("idea")
        if isinstance(written_for, str) and _words(written_for) != _words(idea or ""):
            out.append(
                f"the simulator answers from the fixture file {path}, written for the idea "
                f"{_short(written_for)!r}; this run's idea is {_short(idea or '')!r}, so "
                f"its canned answers are about the fixtures' idea, not this one (use "
                f"--provider openai to have a model work on it, or write fixtures for it)"
            )
    return out


def _words(text: str) -> list[str]:
    return text.split()


def _short(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def load_fixtures(paths: Iterable[str | Path]) -> tuple[Fixture, ...]:
    """The fixture entries of ``paths``, in order; a :class:`~sopbus.bus.ConfigError` names the file
    and entry of any mistake."""
    return tuple(fixture for path in paths for fixture in _load_file(Path(path)))


def _read(path: Path) -> dict[str, Any]:
    return read_user_toml(path, "fixture file")


def _load_file(path: Path) -> list[Fixture]:
    data = _read(path)
    unknown = sorted(set(data) - {"simulated", "idea", "fixture"})
    if unknown:
        raise ConfigError(
            f"fixture file {path} has unknown top-level key(s) {', '.join(unknown)}; "
            f"expected simulated, idea and [[fixture]] entries"
        )
    if "idea" in data and not isinstance(data["idea"], str):
        raise ConfigError(f"fixture file {path}: idea must be a string, got {data['idea']!r}")
    if data.get("simulated") is not True:
        raise ConfigError(
            f"fixture file {path} does not say `simulated = true` at the top; "
            "fixtures are simulated output and must be marked as such"
        )
    entries = data.get("fixture", [])
    if not isinstance(entries, list) or not entries:
        raise ConfigError(f"fixture file {path} has no [[fixture]] entries")
    return [_fixture(entry, f"{path}: fixture[{i}]") for i, entry in enumerate(entries)]


def _fixture(entry: Any, place: str) -> Fixture:
    if not isinstance(entry, dict):
        raise ConfigError(f"{place} must be a table")
    unknown = sorted(set(entry) - {"action", "role", "match", "responses"})
    if unknown:
        raise ConfigError(
            f"{place} has unknown key(s) {', '.join(unknown)}; "
            "expected action, role, match, responses"
        )
    responses = entry.get("responses")
    if not isinstance(entry.get("action"), str) or not isinstance(responses, list) or not responses:
        raise ConfigError(f'{place} needs action = "<Action>" and a non-empty responses = [...]')
    texts = tuple(r if isinstance(r, str) else _json.encode(r).decode() for r in responses)
    for key in ("role", "match"):
        if key in entry and not isinstance(entry[key], str):
            raise ConfigError(f"{place}.{key} must be a string, got {entry[key]!r}")
    return Fixture(
        action=entry["action"],
        responses=texts,
        match=entry.get("match"),
        role=entry.get("role"),
        source=place,
    )
