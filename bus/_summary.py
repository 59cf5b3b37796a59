"""``summary.json``: how a run ended, what it spent and what it was, as one typed value.

The run writes a :class:`RunSummary` when it ends (``sopbus resume`` finishes a run that
has none); ``sopbus runs``, ``show``, ``costs``, sweeps, the report, the trace and
:class:`sopbus.RunOutcome` read it through :func:`read_summary`. Summaries written by older
versions read too: a field they lack takes its default.

The verdict is also sealed in the log (``run_ended``): :func:`read_summary` takes that one
when the two disagree, so an edited ``summary.json`` cannot turn a failed run into a passed
one in ``sopbus runs`` or :class:`sopbus.RunOutcome` (``sopbus verify`` reports the edit).
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import msgspec

from ._chain import unseal
from ._util import EVENTS, SUMMARY
from ._verdict import Verdict


class RunSummary(msgspec.Struct, kw_only=True):
    """The end of a run. ``status`` is ``completed``, ``failed``, ``budget_exhausted`` or
    ``cancelled``; ``end_reason`` which ending (``idle``, ``max_rounds``, ``stop_condition``,
    ``budget_exhausted``, ``error``, ``cancelled``) and ``detail`` its own words. Money is
    exact: ``total_usd`` spent against the cap ``budget_usd``."""

    run_id: str = ""
    status: str
    end_reason: str
    detail: str = ""
    error: str | None = None
    mode: str = "rounds"
    rounds: int = 0
    max_rounds: int = 0
    messages: int = 0
    undelivered: int = 0
    verdict: Verdict | None = None
    """The SOP's verdict on the run; ``None`` when the SOP states none."""
    scenario: str = ""
    scenario_path: str = ""
    sop: str | None = None
    provider: str = ""
    model: str = ""
    seed: int = 0
    run_dir: str = ""
    total_usd: Decimal = Decimal(0)
    budget_usd: Decimal = Decimal(0)
    llm_calls: int = 0
    """Attempts sent to a provider (refused calls are not calls)."""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    overrun: dict[str, Any] | None = None
    """The first call whose reported usage could not be true, or ``None``."""
    started_at: float = 0.0
    ended_at: float = 0.0
    duration_s: float = 0.0
    taped_calls: int | None = None
    """Answers a resume, replay or fork took from the recording instead of a provider."""
    resumes: int | None = None
    """How many times ``sopbus resume`` continued the run (absent on a run never resumed)."""
    replay_of: str | None = None
    forked_from: str | None = None
    fork_round: int | None = None
    populations: dict[str, list[dict[str, Any]]] | None = None
    """Per population, its sums per round (``round``, ``woke``, ``acted``, ``failed``,
    ``mean``, ``min``, ``max``, ``bins``); ``None`` for a run without populations."""

    @property
    def simulated(self) -> bool:
        """The answers came from the embedded simulator: every figure is what the calls
        would have cost at the model's price."""
        return self.provider == "sim"

    @property
    def passed(self) -> bool | None:
        """The verdict's ``passed``; ``None`` when the SOP states no verdict."""
        return None if self.verdict is None else self.verdict.passed


# Where a run came from: written only when it applies, as before this type existed.
_ONLY_WHEN_SET = ("taped_calls", "resumes", "replay_of", "forked_from", "fork_round")


def encode_summary(summary: RunSummary) -> bytes:
    """``summary`` as ``summary.json`` keeps it: indented JSON, exact decimals."""
    data = msgspec.to_builtins(summary)
    for name in _ONLY_WHEN_SET:
        if data.get(name) is None:
            data.pop(name, None)
    return msgspec.json.format(msgspec.json.encode(data), indent=2)


def decode_summary(data: bytes) -> RunSummary:
    """A ``summary.json``'s bytes as a :class:`RunSummary` (``msgspec`` errors on damage)."""
    return msgspec.json.decode(data, type=RunSummary)


def read_summary(run_dir: Path) -> RunSummary | None:
    """The run's ``summary.json``, with the verdict sealed in its log where the two differ
    (:func:`sealed_summary`); ``None`` when the run has not finished (killed, still
    running, being replaced) or the file is damaged."""
    try:
        summary = decode_summary((run_dir / SUMMARY).read_bytes())
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None
    return sealed_summary(summary, run_dir)


def sealed_summary(summary: RunSummary, run_dir: Path) -> RunSummary:
    """``summary`` with the verdict its run's ``run_ended`` event seals, when the log has
    one that differs (an edited ``summary.json``); else ``summary`` itself."""
    sealed = sealed_verdict(run_dir)
    if sealed is _UNSEALED or sealed == summary.verdict:
        return summary
    return msgspec.structs.replace(summary, verdict=sealed)  # type: ignore[arg-type]


_UNSEALED = object()
_TAIL = 1 << 18  # run_ended holds at most a traceback: this covers it many times over


def sealed_verdict(run_dir: Path) -> Verdict | object | None:
    """The verdict the last line of ``events.jsonl`` (its ``run_ended``) seals, read from
    the file's end; ``_UNSEALED`` when there is none (an unfinished run, a log written
    before verdicts were sealed, or a last line too long to be a ``run_ended``)."""
    try:
        with open(run_dir / EVENTS, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - _TAIL))
            tail = f.read()
    except OSError:
        return _UNSEALED
    lines = tail.split(b"\n")
    if len(lines) < 3 and size > _TAIL:
        return _UNSEALED
    body = unseal(lines[-2]) if len(lines) >= 2 else None
    try:
        event = msgspec.json.decode(body) if body is not None else None
    except msgspec.DecodeError:
        return _UNSEALED
    if not isinstance(event, dict) or event.get("kind") != "run_ended" or "verdict" not in event:
        return _UNSEALED
    try:
        return msgspec.convert(event["verdict"], Verdict | None)
    except msgspec.ValidationError:
        return _UNSEALED
