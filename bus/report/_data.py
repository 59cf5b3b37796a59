"""A run directory read back for the report: summary, roles, messages with their deliveries,
the cost ledger, the tool calls, artifacts and the roles' own events.

Everything is read through the run store's own readers (:func:`sopbus.bus.read_events`,
:func:`sopbus.bus.decode_event` and the event types, :func:`sopbus.bus.money.load_ledger`), so a change
of the file formats reaches the report without a second parser to keep in step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import _events as ev
from .._errors import ConfigError
from .._message import Message
from .._summary import RunSummary, read_summary
from .._util import EVENTS
from ..money import TOOL_PROVIDER, LedgerLine, load_ledger

UNDELIVERED = "(undelivered)"


@dataclass(frozen=True)
class Posted:
    """One published message: ``recipients`` (empty when undelivered), ``reason`` (why it
    reached nobody, else ``None``), ``t`` (seconds after the run started)."""

    message: Message
    recipients: tuple[str, ...]
    reason: str | None
    t: float


@dataclass(frozen=True)
class Call:
    """One ledger line placed on the clock: ``start``/``end`` in seconds after the run
    started, and ``mark``: ``"retry"`` (the attempt before it failed), ``"repair"`` (the
    answer before it was invalid) or ``""`` (a first attempt)."""

    line: LedgerLine
    start: float
    end: float
    mark: str


@dataclass(frozen=True)
class ToolMark:
    """One tool call (a ``tool_called`` event of the tool loop) placed on the clock:
    ``start``/``end`` in seconds after the run started; ``data`` is the event's ``data``
    (call, action, server, tool, arguments, duration_ms, result_chars, cut, error,
    cost_usd, replayed)."""

    n: int
    round: int
    role: str
    start: float
    end: float
    data: dict[str, Any]

    @property
    def name(self) -> str:
        return f"{self.data['server']}.{self.data['tool']}"


@dataclass
class RunData:
    """What the report shows of one run directory (see :func:`read_run`)."""

    run_dir: Path
    summary: RunSummary | None
    started: ev.RunStarted | None = None
    ended: ev.RunEnded | None = None
    roles: list[ev.RoleJoined] = field(default_factory=list)
    posted: list[Posted] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    tools: list[ToolMark] = field(default_factory=list)
    artifacts: dict[str, ev.ArtifactWritten] = field(default_factory=dict)
    notes: list[dict[str, Any]] = field(default_factory=list)
    t0: float = 0.0

    @property
    def llm_calls(self) -> list[Call]:
        """The ledger's model calls: a paid tool's line (provider ``tool``) is drawn as
        its tool call, not as a model call."""
        return [c for c in self.calls if c.line.provider != TOOL_PROVIDER]

    @property
    def mode(self) -> str:
        return (
            self.started.mode if self.started else (self.summary.mode if self.summary else "rounds")
        )

    def lanes(self) -> list[str]:
        """Senders from outside the team (``Boss``) first, then the roles in declared order."""
        team = [r.name for r in self.roles]
        outside = [p.message.sent_from for p in self.posted if p.message.sent_from not in team]
        return [*dict.fromkeys(outside), *team]


def read_run(run_dir: Path) -> RunData:
    """The run in ``run_dir``; a :class:`~sopbus.bus.ConfigError` when it holds no event log."""
    if not (run_dir / EVENTS).is_file():
        raise ConfigError(
            f"{run_dir} is not a run directory: it has no {EVENTS}; give a run "
            f"id, a run directory or 'last'"
        )
    data = RunData(run_dir=run_dir, summary=read_summary(run_dir))
    for raw in ev.read_events(run_dir / EVENTS):
        _take(data, ev.decode_event(raw))
    data.calls = _calls(load_ledger(run_dir), data.t0)
    return data


def _take(data: RunData, event: Any) -> None:
    if isinstance(event, ev.RunStarted):
        data.started, data.t0 = event, data.t0 or event.t
    elif isinstance(event, ev.RoleJoined):
        data.roles.append(event)
    elif isinstance(event, ev.MessagePublished):
        data.posted.append(Posted(event.message, event.recipients, None, event.t - data.t0))
    elif isinstance(event, ev.MessageUndelivered):
        data.posted.append(Posted(event.message, (), event.reason, event.t - data.t0))
    elif isinstance(event, ev.ArtifactWritten):
        data.artifacts[event.path] = event  # the last write of a path is what is on disk
    elif isinstance(event, ev.RunEnded):
        data.ended = event
    elif _is_tool_call(event):
        data.tools.append(_tool_mark(len(data.tools) + 1, event, data.t0))
    elif isinstance(event, dict) and event.get("kind") not in ("llm_reserved",):
        data.notes.append(event)


def _is_tool_call(event: Any) -> bool:
    # A role's own tool_called (the book doctor's) has no server: it stays a role event.
    return (
        isinstance(event, dict)
        and event.get("kind") == "tool_called"
        and "server" in event.get("data", {})
    )


def _tool_mark(n: int, event: dict[str, Any], t0: float) -> ToolMark:
    """A tool call ends when its event is written and lasted ``duration_ms``."""
    info = event["data"]
    end = max(0.0, event["t"] - t0) if t0 else 0.0
    start = max(0.0, end - float(info.get("duration_ms") or 0) / 1000)
    return ToolMark(n, int(event.get("round", 0)), str(event.get("role", "")), start, end, info)


def _calls(lines: list[LedgerLine], t0: float) -> list[Call]:
    """The ledger lines as bars: a call ends at its ``t`` and lasted ``latency_ms``; a
    batch line is its calls, each a bar as long as the batch."""
    last: dict[tuple[str, str, int], str] = {}
    calls = []
    for line in (one for batch in lines for one in batch.each_call()):
        key = (line.role, line.action, line.round)
        mark = "" if line.attempt <= 1 else "retry" if last.get(key) == "error" else "repair"
        last[key] = line.outcome
        end = line.t - t0 if t0 else 0.0
        calls.append(Call(line, max(0.0, end - line.latency_ms / 1000), max(0.0, end), mark))
    return calls
