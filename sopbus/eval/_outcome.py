"""What became of one task of an eval: the score of its answer and the run that gave it.

A task's ``kind`` is ``passed`` or why not:

* ``wrong``: the answer was scored and did not pass;
* ``error``: the run failed, or gave no answer at the place the scenario declares;
* ``timeout``: the answer's check ran out of time;
* ``cut_off``: the run stopped at one of its own limits (round limit, its own budget, an
  answer cut at ``max_tokens``) and its answer did not pass;
* ``refused``: the eval's cap refused a call of the run (counted, not scored);
* ``not_run``: the cap was spent before the task started (counted, not scored).

The last two are outside the score: it covers the tasks the money reached.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Literal

import msgspec

Kind = Literal["passed", "wrong", "error", "timeout", "cut_off", "refused", "not_run"]
KINDS: tuple[Kind, ...] = ("passed", "wrong", "error", "timeout", "cut_off", "refused", "not_run")
FAILURES: tuple[Kind, ...] = KINDS[1:]
UNSCORED: frozenset[str] = frozenset({"refused", "not_run"})


class Scored(msgspec.Struct, frozen=True, kw_only=True):
    """A scorer's verdict on one answer."""

    passed: bool
    kind: Kind
    detail: str = ""
    score: float | None = None  # a judge's score (0 to 1), with its reasons in detail


class TaskResult(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One line of ``results.jsonl``: a task of one scenario in one epoch."""

    scenario: str
    task_id: str
    epoch: int
    kind: Kind
    passed: bool = False
    detail: str = ""
    score: float | None = None
    run_id: str | None = None
    judge_run_id: str | None = None
    usd: Decimal = Decimal(0)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    wall_s: float = 0.0
    end_reason: str | None = None
    simulated: bool = False

    @property
    def scored(self) -> bool:
        return self.kind not in UNSCORED
