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

A response may ask for tools instead of answering: ``{ tool_calls = [{ name = "git.git_log",
arguments = { max_count = 5 } }] }`` (full tool names; ``arguments`` a table, or JSON text
to send arguments that are not). With responses ``[<tool_calls>, <answer>]`` an action with
tools runs one step of its tool loop (the tools really run) and then answers.

The first entry (in file order, files in the order given) that fits a request answers it;
a request that no entry fits gets a generated answer.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import msgspec

from .._errors import ConfigError
from .._protocol import LLMRequest, ToolCall
from .._util import read_user_toml

_json = msgspec.json.Encoder()


class Fixture(msgspec.Struct, frozen=True, kw_only=True):
    """One canned answer list from a fixture file (see the module docstring)."""

    action: str
    responses: tuple[str, ...]
    match: str | None = None
    role: str | None = None
    source: str = ""
    calls: tuple[tuple[ToolCall, ...], ...] = ()
    """Per response, the tool calls it asks for (empty: it answers); ``()`` when none does."""

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
    calls = tuple(_tool_calls(r, f"{place}.responses[{i}]") for i, r in enumerate(responses))
    for key in ("role", "match"):
        if key in entry and not isinstance(entry[key], str):
            raise ConfigError(f"{place}.{key} must be a string, got {entry[key]!r}")
    return Fixture(
        action=entry["action"],
        responses=texts,
        match=entry.get("match"),
        role=entry.get("role"),
        source=place,
        calls=calls if any(calls) else (),
    )


def _tool_calls(response: Any, place: str) -> tuple[ToolCall, ...]:
    """The tool calls a response asks for (see the module docstring), or ``()``."""
    if not isinstance(response, dict) or "tool_calls" not in response:
        return ()
    wanted = response["tool_calls"]
    if set(response) != {"tool_calls"} or not isinstance(wanted, list) or not wanted:
        raise ConfigError(
            f"{place}: a response that asks for tools is {{ tool_calls = [{{ name = "
            f'"SOURCE.TOOL", arguments = {{ ... }} }}] }} with at least one call and no other key'
        )
    return tuple(_tool_call(call, f"{place}.tool_calls[{i}]") for i, call in enumerate(wanted))


def _tool_call(call: Any, place: str) -> ToolCall:
    if not isinstance(call, dict) or not isinstance(call.get("name"), str):
        raise ConfigError(f'{place} must be a table with name = "SOURCE.TOOL" (and arguments)')
    unknown = sorted(set(call) - {"name", "arguments"})
    if unknown:
        raise ConfigError(
            f"{place} has unknown key(s) {', '.join(unknown)}; expected name, arguments"
        )
    arguments = call.get("arguments", {})
    text = arguments if isinstance(arguments, str) else _json.encode(arguments).decode()
    return ToolCall(id="", name=call["name"], arguments=text)
