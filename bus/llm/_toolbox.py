"""A run's tools: the sources, which tools an action's patterns name, and each call of one,
recorded, priced and answered from a recording where the run has one.

A call's way: the name must be one the action offered and its arguments a JSON object (else
the model gets an error result, and nothing runs); a recording (resume, replay, fork) answers
it if it can; otherwise the source runs it, under a reservation of its price when it has one
(:meth:`sopbus.bus.Gateway.paid_tool`). Each call writes a :class:`~sopbus.bus.llm._tape.ToolRecord`
into ``calls.jsonl`` and then a ``tool_called`` event (fields in docs/reference/events.md).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Any

import msgspec
import trio

from .._errors import ConfigError
from .._events import Note
from .._protocol import ToolCall, ToolSpec
from .._util import closest, reached
from ._books import round_ms
from ._gateway import Gateway
from ._tape import EVERY_ROUND, RunLog, Tape, ToolList, ToolRecord
from ._tools import ToolOutput, ToolSource

TOOL_CALLED = "tool_called"


def resolve(
    patterns: Iterable[str], sources: Mapping[str, Sequence[ToolSpec]], *, where: str
) -> tuple[ToolSpec, ...]:
    """The tools ``patterns`` name (``SOURCE.TOOL`` or ``SOURCE.*``) with their full names,
    in the order named, each once; an unknown source or tool is a
    :class:`~sopbus.bus.ConfigError` at ``where`` with the closest names."""
    out: dict[str, ToolSpec] = {}
    for pattern in patterns:
        server, dot, name = pattern.partition(".")
        if not dot or not server or not name:
            raise ConfigError(
                f"{where}: {pattern!r} is not a tool name; write SOURCE.TOOL "
                f'("git.git_log", "py.word_count") or SOURCE.* ("git.*")'
            )
        specs = sources.get(server)
        if specs is None:
            raise ConfigError(_unknown("tool source", server, sources, where, pattern))
        chosen = list(specs) if name == "*" else [s for s in specs if s.name == name]
        if not chosen:
            names = [s.name for s in specs]
            raise ConfigError(_unknown(f"tool of {server}", name, names, where, pattern))
        for spec in chosen:
            full = f"{server}.{spec.name}"
            out.setdefault(full, msgspec.structs.replace(spec, name=full))
    return tuple(out.values())


def _unknown(what: str, name: str, known: Iterable[str], where: str, pattern: str) -> str:
    known = sorted(known)
    close = closest(name, known, cutoff=0.6)
    hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
    listing = ", ".join(known[:20]) + (", ..." if len(known) > 20 else "")
    return (
        f"{where}: unknown {what} {name!r} in {pattern!r}{hint}; known: {listing or '(none)'}. "
        f"Fix the name, or declare the source ([mcp.NAME] in the scenario, @sopbus.tool in Python)"
    )


class ToolBox:
    """The run's tools for its turns (see the module docstring).

    ``sources`` run the calls; ``lists`` are the tool lists of sources that are not running
    (a replay's, from the recording): their tools can be offered, never called. ``tape``
    answers calls first; with ``free`` (replay, fork) a taped result is written into this
    run's recording again; ``taped_through`` is the last round whose calls all come from it.
    """

    def __init__(
        self,
        sources: Sequence[ToolSource],
        *,
        gateway: Gateway,
        store: RunLog,
        lists: Sequence[ToolList] = (),
        tape: Tape | None = None,
        free: bool = False,
        taped_through: int = 0,
    ):
        self._sources = {source.name: source for source in sources}
        self._lists = {found.source: found for found in lists}
        for source in sources:
            specs = tuple(source.specs())
            self._lists[source.name] = ToolList(
                source=source.name, specs=specs, price_per_call=source.price_per_call
            )
        self._gateway, self._store, self._tape = gateway, store, tape
        self._free, self._taped_through = free, taped_through
        self.calls = 0  # calls answered, from a source or the tape

    @property
    def listed(self) -> Mapping[str, Sequence[ToolSpec]]:
        """Each source's tools, by source name."""
        return {name: found.specs for name, found in self._lists.items()}

    def record_lists(self) -> None:
        """Writes each source's tool list into the run's recording (before any call)."""
        for found in self._lists.values():
            self._store.record_answer(found)

    def specs(self, patterns: Sequence[str], *, where: str) -> tuple[ToolSpec, ...]:
        return resolve(patterns, self.listed, where=where)

    async def call(
        self, call: ToolCall, *, offered: Sequence[str], role: str, action: str, round: int
    ) -> ToolOutput:
        """The result of ``call`` (module docstring); raises :class:`sopbus.bus.ToolServerError`
        when its source fails, :class:`sopbus.bus.BudgetExhausted` when its price does not fit."""
        self.calls += 1
        refused = _refusal(call, offered)
        if refused is not None:
            shown = ToolRecord(round=round, role=role, action=action, call=call, output=refused)
            self._event(shown, role, replayed=False, cost=None)
            return refused
        taped = self._tape.take_tool(call, round, role) if self._tape is not None else None
        if taped is not None:
            return self._replayed(taped, role)
        if round <= self._taped_through:
            raise ConfigError(self._untaped(call, role, action, round))
        return await self._live(call, role=role, action=action, round=round)

    def _replayed(self, taped: ToolRecord, role: str) -> ToolOutput:
        if self._free:
            self._store.record_answer(msgspec.structs.replace(taped, ledger=None, reservation=0))
        cost = taped.ledger.cost_usd if taped.ledger is not None and not self._free else None
        self._event(taped, role, replayed=True, cost=cost)
        return taped.output

    def _untaped(self, call: ToolCall, role: str, action: str, round: int) -> str:
        taped = (
            "a replay takes every tool result from it"
            if self._taped_through >= EVERY_ROUND
            else f"rounds up to {self._taped_through} take their tool results from it"
        )
        return (
            f"the recording has no result for {role!r}'s call of {call.name} in {action!r} in "
            f"round {round} ({taped}, with no tool call); the recorded run did not make that "
            f"call, or made it with other arguments"
        )

    async def _live(self, call: ToolCall, *, role: str, action: str, round: int) -> ToolOutput:
        server, _, tool = call.name.partition(".")
        source = self._sources.get(server)
        if source is None:  # offered from a replay's list, but a live call reached it
            raise ConfigError(
                f"{role}'s {action} called {call.name}, but the tool source {server!r} is not "
                f"running in this run (a replay starts no tool server)"
            )
        arguments = msgspec.json.decode(call.arguments or "{}")  # _refusal checked it is an object
        start = trio.current_time()
        kept: list[ToolRecord] = []

        async def run() -> ToolOutput:
            return await source.call(tool, arguments)

        def record(output: ToolOutput | None, line: Any, reservation: int) -> None:
            if output is not None:
                kept.append(
                    self._record(call, output, start, role, action, round, line, reservation)
                )

        if source.price_per_call:
            price = Decimal(source.price_per_call)
            output = await self._gateway.paid_tool(
                price, run, tool=call.name, role=role, action=action, round=round, record=record
            )
            (taped,) = kept
        else:
            output = await run()
            taped = self._record(call, output, start, role, action, round, None)
        self._event(
            taped, role, replayed=False, cost=taped.ledger.cost_usd if taped.ledger else None
        )
        return output

    def _record(
        self,
        call: ToolCall,
        output: ToolOutput,
        start: float,
        role: str,
        action: str,
        round: int,
        line: Any,
        reservation: int = 0,
    ) -> ToolRecord:
        taped = ToolRecord(
            round=round,
            role=role,
            action=action,
            call=call,
            output=output,
            duration_ms=round_ms(trio.current_time() - start),
            ledger=line,
            reservation=reservation,
        )
        self._store.record_answer(taped)
        reached("tool:recorded")  # in calls.jsonl, not yet in the event log
        return taped

    def _event(self, taped: ToolRecord, role: str, *, replayed: bool, cost: Any) -> None:
        server, _, tool = taped.call.name.partition(".")
        output = taped.output
        self._store.log(
            Note(
                kind=TOOL_CALLED,
                t=time.time(),
                round=taped.round,
                role=role,
                data={
                    "call": taped.call.id,
                    "action": taped.action,
                    "server": server,
                    "tool": tool,
                    "arguments": taped.call.arguments,
                    "duration_ms": taped.duration_ms,
                    "result_chars": output.chars or len(output.text),
                    "cut": output.cut,
                    "error": output.text[:300] if output.is_error else None,
                    "cost_usd": cost,
                    "replayed": replayed,
                },
            )
        )


def _refusal(call: ToolCall, offered: Sequence[str]) -> ToolOutput | None:
    """The error result of a call that cannot run (not offered, arguments not an object)."""
    if call.name not in offered:
        close = closest(call.name, list(offered), cutoff=0.6)
        hint = f" Did you mean {close[0]}?" if close else ""
        text = f"Error: there is no tool {call.name!r}.{hint} The tools are: {', '.join(offered)}."
        return ToolOutput(text=text, is_error=True, chars=len(text))
    try:
        arguments = msgspec.json.decode(call.arguments or "{}")
    except msgspec.DecodeError as error:
        text = f"Error: the arguments of {call.name} are not valid JSON ({error}); send an object."
        return ToolOutput(text=text, is_error=True, chars=len(text))
    if not isinstance(arguments, dict):
        text = f"Error: the arguments of {call.name} must be a JSON object, got {call.arguments!r}."
        return ToolOutput(text=text, is_error=True, chars=len(text))
    return None
