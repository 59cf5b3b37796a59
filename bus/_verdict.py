"""A run's verdict: did the procedure do what it is for?

A run can end normally (idle, a stop condition) and still fail its purpose: QA's tests
failed, the checker never passed, the chat hit its message limit before the done token.
An SOP states its verdict as a :data:`Judge`, a function of what the run produced (a
:class:`RunRecord`) that returns a :class:`Verdict`, or ``None`` when it has nothing to
say. The run loop asks it once, at the end, and writes the answer into ``summary.json``
as ``"verdict": {"passed": ..., "reason": ...}`` (``null`` when the SOP states none), with
``"evidence"`` when the verdict names the artifact it rests on.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from pathlib import Path

import msgspec
from loguru import logger

from ._message import Message


class Verdict(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Whether a run did what its procedure is for."""

    passed: bool
    """True when the purpose was met (the tests passed, the gate passed, ...)."""
    reason: str
    """One sentence for people: what was checked and what was found."""
    evidence: str = ""
    """The artifact the verdict rests on, as a path under ``artifacts/`` (the test report,
    the gate's report); the run report's verdict links to it. Empty: none."""


class RunRecord(msgspec.Struct, frozen=True, kw_only=True):
    """What a run produced, as a verdict sees it."""

    end_reason: str
    """How the run ended: ``idle``, ``max_rounds``, ``stop_condition``, ``budget_exhausted``,
    ``error`` or ``cancelled``."""
    detail: str = ""
    """The end's own words (the stop condition's reason, the error)."""
    messages: tuple[Message, ...] = ()
    """Every message the run published, in publish order."""
    artifacts_dir: Path | None = None
    """The run's ``artifacts/`` directory (``None`` for a run without a store)."""

    def of(self, *actions: str) -> tuple[Message, ...]:
        """The messages caused by any of ``actions``, in publish order."""
        return tuple(m for m in self.messages if m.cause_by in actions)

    def last(self, *actions: str) -> Message | None:
        """The last message caused by any of ``actions``, or ``None``."""
        found = self.of(*actions)
        return found[-1] if found else None

    def cut(self, *actions: str) -> tuple[Message, ...]:
        """The messages caused by any of ``actions`` (all, when none is named) that carry an
        answer cut at ``max_tokens``: a verdict whose rule depends on one must not pass it."""
        found = self.of(*actions) if actions else self.messages
        return tuple(m for m in found if m.cut)

    def artifact(self, relpath: str) -> str | None:
        """The text of the artifact at ``relpath`` (under ``artifacts/``), or ``None``."""
        if self.artifacts_dir is None:
            return None
        path = self.artifacts_dir / relpath
        return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else None


Judge = Callable[[RunRecord], "Verdict | None"]
"""An SOP's verdict: what the run produced -> :class:`Verdict`, or ``None`` (no opinion)."""


def judge_run(judge: Judge | None, record: RunRecord) -> Verdict | None:
    """``judge``'s verdict on ``record``. A judge that raises gives a failed verdict that
    names the exception (and its traceback goes to the log): the summary is written
    either way, and a verdict that could not be reached is not a pass."""
    if judge is None:
        return None
    try:
        verdict = judge(record)
    except Exception as exc:
        logger.error("the verdict could not be reached:\n{}", traceback.format_exc())
        return Verdict(
            passed=False, reason=f"the verdict could not be reached: {type(exc).__name__}: {exc}"
        )
    if verdict is not None and not isinstance(verdict, Verdict):
        return Verdict(
            passed=False,
            reason=f"the SOP's verdict returned {type(verdict).__name__}, "
            f"not a Verdict(passed=..., reason=...) or None",
        )
    return verdict
