"""The lines of a run's recording, ``calls.jsonl``: answered calls, tool calls, tool lists.

Both the tape (resume, replay, fork; :mod:`sopbus.bus.llm._tape`) and the replay provider's
cassettes (:mod:`sopbus.bus.llm._replay`) read them, so they live below both.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import msgspec

from .._chain import records_of
from .._protocol import Completion, ToolCall, ToolOutput, ToolSpec
from ..money import LedgerLine


class CallRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One answered call in ``calls.jsonl`` (a :class:`sopbus.bus.llm._replay.CassetteLine` and more)."""

    key: str
    role: str
    action: str
    completion: Completion
    round: int = 0
    attempt: int = 1
    call: int = 0  # the id of its llm_reserved event; 0 for a replayed answer (no reservation)
    ledger: LedgerLine | None = None


class BatchRecord(CallRecord, frozen=True, kw_only=True, tag_field="kind", tag="batch"):
    """The calls of one batch of a population's agents (:meth:`sopbus.bus.Gateway.complete_many`)
    in one line: ``key`` is the fingerprint of the batch's requests (:func:`batch_key`),
    ``role`` the population, ``ledger`` the batch's line (its ``batch`` columns say which
    agent asked and what each call cost), ``texts`` each call's answer, ``finish`` each
    call's finish reason where one was not ``stop`` (index -> reason), and ``completion``
    the batch's usage summed (its text empty)."""

    texts: list[str]
    finish: dict[int, str] = msgspec.field(default_factory=dict)


class ToolRecord(msgspec.Struct, frozen=True, kw_only=True, tag_field="kind", tag="tool"):
    """One tool call in ``calls.jsonl``: who asked (``round``, ``role``, ``action``), the call
    (``call``: its id, full name and arguments text), what came back (``output``), how long
    it took, and the ledger line of a paid call with ``reservation``, the id of the
    ``llm_reserved`` event its price was held by (so a resume knows it was not lost)."""

    round: int
    role: str
    action: str
    call: ToolCall
    output: ToolOutput
    duration_ms: float = 0.0
    ledger: LedgerLine | None = None
    reservation: int = 0


class ToolList(msgspec.Struct, frozen=True, kw_only=True, tag_field="kind", tag="tools"):
    """The tools one source offered the run (its specs with the source's own names) and its
    price per call: what a replay offers the model without starting the source."""

    source: str
    specs: tuple[ToolSpec, ...]
    price_per_call: Decimal | None = None


class _Kind(msgspec.Struct):
    kind: str = ""


_kind_of = msgspec.json.Decoder(_Kind).decode
_call_of = msgspec.json.Decoder(CallRecord).decode
_batch_of = msgspec.json.Decoder(BatchRecord).decode
_tool_of = msgspec.json.Decoder(ToolRecord).decode
_list_of = msgspec.json.Decoder(ToolList).decode


class Recording(msgspec.Struct, frozen=True):
    """What ``calls.jsonl`` holds: the answers, the tool calls, the tool lists."""

    calls: list[CallRecord]  # a population's batches are BatchRecords among them
    tools: list[ToolRecord]
    lists: list[ToolList]


def read_recording(path: Path) -> Recording:
    """The lines of a recording (``calls.jsonl``, or a cassette) by kind; none when absent."""
    found = Recording([], [], [])
    if not path.is_file():
        return found
    for raw in records_of(path.read_bytes()):
        kind = _kind_of(raw).kind
        if kind == "tool":
            found.tools.append(_tool_of(raw))
        elif kind == "tools":
            found.lists.append(_list_of(raw))
        elif kind == "batch":
            found.calls.append(_batch_of(raw))
        else:
            found.calls.append(_call_of(raw))
    return found
