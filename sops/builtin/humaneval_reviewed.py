"""HumanEval, reviewed: an engineer, a reviewer and a tester that runs the tests it writes.

MetaGPT's executable-feedback ablation on the bus. The idea is a HumanEval prompt.
``FunctionEngineer`` writes a draft (``WriteFunction``); ``FunctionReviewer`` reviews it
against the docstring and sends the review back; the engineer revises it, or passes it on
unchanged when the review found nothing (``ReviseFunction``); ``FunctionTester`` writes
pytest tests from the prompt once, runs them in the sandbox (QA's ``RunCode``), and sends a
failed run back to the engineer for another revision, at most ``max_fix_rounds`` times.
Then the tester publishes the code it last tested (``SubmitFunction``): the run's last
message, its content the code, also the artifact ``solution.py``.

The verdict: the tester's last run of its own tests passed. (The eval scores the answer
with the dataset's tests; the tester's tests are the team's own, and can be wrong.)

Options (the scenario's ``[sop]`` table)::

    [sop]
    review = true          # the reviewer reads the draft first (false: tests only)
    max_fix_rounds = 2     # revisions driven by failed tests
    test_timeout_s = 30    # wall clock of one pytest run in the sandbox
    test_memory_mb = 1024
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from sopbus.bus import RunRecord, Verdict
from sopbus.roles.company import (
    FunctionEngineer,
    FunctionReviewer,
    FunctionTester,
    ReviseFunction,
    RunCode,
    SubmitFunction,
    WriteFunction,
)

from .. import _sop
from .._sop import SopContext, Team

ENGINEER, REVIEWER, TESTER = "Engineer", "Reviewer", "Tester"


class ReviewedOptions(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The ``[sop]`` table of ``humaneval_reviewed`` (see the module docstring)."""

    review: bool = True
    max_fix_rounds: Annotated[int, msgspec.Meta(ge=0, le=10)] = 2
    test_timeout_s: Annotated[float, msgspec.Meta(gt=0, le=3600)] = 30.0
    test_memory_mb: Annotated[int, msgspec.Meta(ge=64)] = 1024


def build(ctx: SopContext) -> Team:
    o = ctx.options_as(ReviewedOptions)
    common: dict[str, Any] = {"llm_defaults": ctx.llm_defaults, "registry": ctx.registry}
    # Without a reviewer the tester takes the draft itself.
    code = (ReviseFunction.name,) if o.review else (WriteFunction.name, ReviseFunction.name)
    tester = FunctionTester(
        name=TESTER,
        watch=("UserRequirement", *code),
        max_fix_rounds=o.max_fix_rounds,
        test_timeout_s=o.test_timeout_s,
        test_memory_mb=o.test_memory_mb,
        **common,
    )
    engineer = FunctionEngineer(name=ENGINEER, **common)
    reviewer = [FunctionReviewer(name=REVIEWER, **common)] if o.review else []
    return Team(roles=[engineer, *reviewer, tester], verdict=tests_passed)


def tests_passed(record: RunRecord) -> Verdict:
    """The reviewed verdict: the tester's last run of its tests passed."""
    runs = [m.payload for m in record.of(RunCode.name) if isinstance(m.payload, dict)]
    if record.last(SubmitFunction.name) is None or not runs:
        return Verdict(passed=False, reason=f"no answer was tested ({record.end_reason})")
    last = runs[-1]
    if last.get("passed"):
        return Verdict(
            passed=True, reason=f"the tester's tests passed on run {len(runs)} ({last['totals']})"
        )
    return Verdict(
        passed=False,
        reason=f"the tester's tests still failed after {len(runs)} run(s) ({last.get('totals')})",
    )


SOP = _sop.SOP(
    name="humaneval_reviewed",
    description="HumanEval reviewed: engineer, reviewer and a tester that runs its own tests "
    "in the sandbox, with up to two fix rounds (MetaGPT's executable feedback)",
    build=build,
)
