"""The text of the calls in flight, as it arrives: what the live view shows with ``stream``.

A provider that streams (``openai`` with ``stream = true``; the simulator with ``stream =
true`` and a latency, which it then spends delivering the answer piece by piece) feeds each
piece here; the live view of ``sopbus run`` reads :meth:`LiveText.lines` a few times a
second and shows the latest line of every call in flight, concurrent calls each on its own
line. Nothing here reaches the log or the ledger: a streamed call is ledgered and recorded
exactly as the same call without streaming.
"""

from __future__ import annotations

from dataclasses import dataclass

from .._protocol import LLMRequest


@dataclass
class _InFlight:
    who: str
    line: str = ""


class LiveText:
    """Calls in flight and the latest line of each (see the module docstring)."""

    def __init__(self) -> None:
        self._calls: dict[int, _InFlight] = {}
        self._next = 0

    def open(self, request: LLMRequest) -> int:
        """A call starts streaming; returns its key for :meth:`feed` and :meth:`close`."""
        self._next += 1
        self._calls[self._next] = _InFlight(f"{request.role}: {request.action}")
        return self._next

    def feed(self, call: int, piece: str) -> None:
        """More text of ``call``; only its latest line is kept."""
        entry = self._calls.get(call)
        if entry is None:
            return
        _head, newline, tail = piece.rpartition("\n")
        entry.line = tail if newline else entry.line + piece

    def close(self, call: int) -> None:
        self._calls.pop(call, None)

    def lines(self) -> list[str]:
        """``"role: action | latest line"`` for each call in flight, oldest first."""
        return [f"{e.who} | {e.line.strip()}" for e in self._calls.values()]
