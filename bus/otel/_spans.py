"""A run directory as a tree of spans: the run, its rounds, the turns, the LLM calls and
the tool calls.

Built from the run's own files (``events.jsonl`` and the ledger ``costs.jsonl``), so a
trace sent when the run ends (``sopbus run --otel``) and one sent later from the log
(``sopbus export-otel RUN``) are the same. Nothing here talks to OpenTelemetry; see
:mod:`sopbus.bus.otel._export` for that.

Times are wall-clock seconds. An LLM call runs from its ledger line's ``t`` less its
``latency_ms`` to ``t``. A round runs from ``round_started`` to ``round_ended`` (a round that
logged nothing but its messages has no ``round_started``: it runs from the event before
its ``round_ended``, which names its turns). A turn is
one role acting on its news in one round: in ``rounds`` mode from the round's start to the
end of the role's last call in it (the round ends when its slowest turn does); in
``events`` mode from the role's first call to its last call or its last publish. Call
attributes follow the OpenTelemetry GenAI semantic conventions (``gen_ai.*``), plus the
call's cost and the run's budget (``sopbus.*``). A tool call of a tool loop (its
``tool_called`` event, ended at the event's ``t`` after ``duration_ms``) is an
``execute_tool {tool}`` span beside the model calls of its turn, with the conventions'
``gen_ai.tool.*`` attributes; an error result makes its status an error with ``error.type``
``tool_error``. A paid tool's ledger line is that span's cost, not a model call.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._events import read_events
from .._summary import read_summary
from .._util import COSTS, EVENTS, read_jsonl
from ..money import TOOL_PROVIDER

TOOL_ERROR = "tool_error"  # error.type of a tool call whose result is an error


@dataclass
class Span:
    """One span to export: ``start`` and ``end`` in seconds since the epoch; ``error`` makes
    its status an error with that description."""

    name: str
    start: float
    end: float
    attributes: dict[str, Any] = field(default_factory=dict)
    children: list[Span] = field(default_factory=list)
    error: str | None = None

    def walk(self) -> list[Span]:
        """This span and all below it, parents before children."""
        return [self, *(s for child in self.children for s in child.walk())]


def run_trace(run_dir: Path) -> Span:
    """The span tree of the run in ``run_dir`` (see the module docstring)."""
    events = _opened(list(read_events(run_dir / EVENTS)))
    calls = list(read_jsonl(run_dir / COSTS)) if (run_dir / COSTS).exists() else []
    started = next(e for e in events if e["kind"] == "run_started")
    ended = next((e for e in reversed(events) if e["kind"] == "run_ended"), events[-1])
    root = _run_span(started, ended, run_dir)
    made = [c for c in calls if c["outcome"] != "refused" and c["provider"] != TOOL_PROVIDER]
    turns = _turns(started["mode"], events, made)
    rounds = _rounds(events)
    for turn in turns.values():
        parent = rounds.get(turn.attributes["sopbus.round"], root)
        parent.children.append(turn)
    root.children.extend(sorted(rounds.values(), key=lambda s: s.start))
    for span in root.walk():
        span.children.sort(key=lambda s: (s.start, s.name))
    return root


def _run_span(started: dict[str, Any], ended: dict[str, Any], run_dir: Path) -> Span:
    settings = started.get("settings", {})
    summary = read_summary(run_dir)
    attributes = {
        "sopbus.run_id": started["run_id"],
        "sopbus.scenario": started["scenario"],
        "sopbus.mode": started["mode"],
        "sopbus.seed": started["seed"],
        "sopbus.end_reason": ended.get("reason", "unknown"),
        "sopbus.budget_usd": str(summary.budget_usd if summary else settings.get("budget_usd", "")),
        "sopbus.total_usd": str(summary.total_usd) if summary else "",
        "gen_ai.system": str(settings.get("provider", "")),
        "gen_ai.request.model": str(settings.get("model", "")),
    }
    failed = ended.get("reason") == "error"
    return Span(
        f"sopbus run {started['scenario']}",
        started["t"],
        ended["t"],
        attributes,
        error=(ended.get("error") or ended.get("detail") or "error") if failed else None,
    )


def _opened(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``events`` with a ``round_started`` put back before each ``round_ended`` that has
    none, timed when the round before it ended (rounds follow one another)."""
    out: list[dict[str, Any]] = []
    started: set[int] = set()
    boundary = events[0]["t"] if events else 0.0
    for event in events:
        if event["kind"] == "round_started":
            started.add(event["round"])
        elif event["kind"] == "round_ended":
            if event["round"] not in started:
                out.append(
                    {
                        "kind": "round_started",
                        "round": event["round"],
                        "turns": event.get("turns", []),
                        "t": boundary,
                    }
                )
            boundary = event["t"]
        out.append(event)
    return out


def _rounds(events: list[dict[str, Any]]) -> dict[int, Span]:
    spans: dict[int, Span] = {}
    for event in events:
        if event["kind"] == "round_started":
            spans[event["round"]] = Span(
                f"round {event['round']}",
                event["t"],
                event["t"],
                {"sopbus.round": event["round"], "sopbus.turns": list(event["turns"])},
            )
        elif event["kind"] == "round_ended" and event["round"] in spans:
            spans[event["round"]].end = event["t"]
            spans[event["round"]].attributes["sopbus.published"] = event["published"]
    return spans


def _turns(
    mode: str, events: list[dict[str, Any]], calls: list[dict[str, Any]]
) -> dict[tuple[str, int], Span]:
    starts = {e["round"]: e["t"] for e in events if e["kind"] == "round_started"}
    members = {e["name"] for e in events if e["kind"] == "role_joined"}
    turns: dict[tuple[str, int], Span] = {}

    def turn(role: str, rnd: int, at: float) -> Span:
        if (role, rnd) not in turns:
            begin = starts.get(rnd, at) if mode == "rounds" else at
            turns[role, rnd] = Span(
                f"turn {role}",
                begin,
                max(begin, at),
                {"sopbus.role": role, "sopbus.round": rnd, "sopbus.published": 0},
            )
        return turns[role, rnd]

    for event in events:
        if event["kind"] == "round_started":
            for role in event["turns"]:
                turn(role, event["round"], event["t"])
    spans = [(line["role"], line["round"], _call_span(line)) for line in calls]
    spans += [(e["role"], e["round"], _tool_span(e)) for e in events if _is_tool_call(e)]
    for role, rnd, call in spans:
        owner = turn(role, rnd, call.start)
        owner.children.append(call)
        owner.start, owner.end = min(owner.start, call.start), max(owner.end, call.end)
    for event in events:
        kind = event["kind"]
        if kind in ("message_published", "message_undelivered"):
            _published(turns, turn, mode, members, event)
        elif kind == "turn_failed" and (event["role"], event["round"]) in turns:
            turns[event["role"], event["round"]].error = event["error"]
    return turns


def _published(
    turns: dict[tuple[str, int], Span],
    turn: Any,
    mode: str,
    members: set[str],
    event: dict[str, Any],
) -> None:
    """Counts a message on the turn that published it; in events mode a turn ends with its
    last publish (in rounds mode everything is published when the round ends)."""
    message = event["message"]
    key = (message["sent_from"], message["round"])
    if mode == "events" and key[0] in members and key[1] > 0:
        owner = turn(*key, event["t"])
        owner.end = max(owner.end, event["t"])
    if key in turns:
        turns[key].attributes["sopbus.published"] += 1


def _call_span(line: dict[str, Any]) -> Span:
    end = float(line["t"])
    start = end - float(line.get("latency_ms", 0.0)) / 1000
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.system": line["provider"],
        "gen_ai.request.model": line["model"],
        "gen_ai.response.model": line["model"],
        "gen_ai.usage.input_tokens": line["prompt_tokens"],
        "gen_ai.usage.output_tokens": line["completion_tokens"],
        "sopbus.role": line["role"],
        "sopbus.action": line["action"],
        "sopbus.round": line["round"],
        "sopbus.attempt": line["attempt"],
        "sopbus.outcome": line["outcome"],
        "sopbus.cached_tokens": line.get("cached_tokens", 0),
        "sopbus.cost_usd": str(line["cost_usd"]),
        "sopbus.total_usd": str(line["total_usd"]),
        "sopbus.budget_usd": str(line["budget_usd"]),
    }
    failed = line["outcome"] not in ("ok", "replayed")
    return Span(
        f"chat {line['model']}",
        start,
        end,
        attributes,
        error=f"outcome {line['outcome']}" if failed else None,
    )


def _is_tool_call(event: dict[str, Any]) -> bool:
    # A role's own tool_called (the book doctor's) has no server: it is no tool loop's call.
    return event["kind"] == "tool_called" and "server" in event.get("data", {})


def _tool_span(event: dict[str, Any]) -> Span:
    data = event["data"]
    end = float(event["t"])
    error = data.get("error")
    attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": data["tool"],
        "gen_ai.tool.call.id": data["call"],
        "gen_ai.tool.type": "function",
        "sopbus.role": event["role"],
        "sopbus.action": data.get("action", ""),
        "sopbus.round": event["round"],
        "sopbus.tool.server": data["server"],
        "sopbus.tool.duration_ms": float(data.get("duration_ms") or 0),
        "sopbus.tool.result_chars": int(data.get("result_chars") or 0),
        "sopbus.tool.cut": bool(data.get("cut")),
        "sopbus.tool.replayed": bool(data.get("replayed")),
        "sopbus.cost_usd": str(data["cost_usd"]) if data.get("cost_usd") is not None else "0",
        "error.type": TOOL_ERROR if error else None,
    }
    return Span(
        f"execute_tool {data['tool']}",
        end - float(data.get("duration_ms") or 0) / 1000,
        end,
        attributes,
        error=str(error) if error else None,
    )
