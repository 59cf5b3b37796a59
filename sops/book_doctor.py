"""Bounded book doctor: one role answers a question about a long book with read-only tools,
within hard bounds, and proposes a validated plan (nothing is applied).

The question is the scenario's idea. ``[sop]`` options (paths relative to the scenario)::

    book = "data/journey_west"     # required: the book's data directory (see roles.book._data)
    max_steps = 4                  # decision steps (model answers), 3 to 5
    max_tool_calls = 4             # tools run, 3 to 5
    max_request_chars = 32000      # characters per request, 24,000 to 64,000
    max_result_chars = 6000        # one tool result is cut to this (500 to a third of the cap)
    max_new_chapters = 3           # new chapters one plan may add

See ``sopbus.roles.book._doctor`` for the protocol, the trimming and the fail-closed rule.
The verdict: a plan was proposed (only a plan that passed validation is ever published).
"""

from __future__ import annotations

from typing import Annotated

import msgspec

from sopbus.bus import ConfigError, RunRecord, Verdict
from sopbus.roles.book._data import load_book
from sopbus.roles.book._doctor import (
    CHAR_RANGE,
    STEP_RANGE,
    TOOL_RANGE,
    BookDoctor,
    DoctorBounds,
    ProposePlan,
)

from . import _sop
from ._sop import SopContext, Team


class DoctorOptions(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    book: str
    max_steps: Annotated[int, msgspec.Meta(ge=STEP_RANGE[0], le=STEP_RANGE[1])] = 4
    max_tool_calls: Annotated[int, msgspec.Meta(ge=TOOL_RANGE[0], le=TOOL_RANGE[1])] = 4
    max_request_chars: Annotated[int, msgspec.Meta(ge=CHAR_RANGE[0], le=CHAR_RANGE[1])] = 32_000
    max_result_chars: Annotated[int, msgspec.Meta(ge=500)] = 6_000
    max_new_chapters: Annotated[int, msgspec.Meta(ge=0)] = 3


def build(ctx: SopContext) -> Team:
    o = ctx.options_as(DoctorOptions)
    if not ctx.scenario.idea:
        raise ConfigError(
            f"{ctx.scenario.path}: the book doctor answers the question in "
            f'[scenario].idea; write one (or pass --idea "...")'
        )
    try:
        bounds = DoctorBounds(
            max_steps=o.max_steps,
            max_tool_calls=o.max_tool_calls,
            max_request_chars=o.max_request_chars,
            max_result_chars=o.max_result_chars,
            max_new_chapters=o.max_new_chapters,
        )
    except ConfigError as exc:
        raise ConfigError(f"{ctx.scenario.path}: [sop]: {exc}") from None
    book = load_book(ctx.resolve(o.book))
    return Team(
        roles=[BookDoctor(book=book, bounds=bounds, llm_defaults=ctx.llm_defaults)],
        verdict=valid_plan,
    )


_STEPS = ("suggestions", "adjustment_list", "new_chapters")  # each names a chapter (validated)


def valid_plan(record: RunRecord) -> Verdict:
    """The book doctor's verdict: a validated plan was proposed (``plan.md``) with at least
    one step, each of which names a chapter of the book (the validator checks the names)."""
    plan = record.last(ProposePlan.name)
    if plan is not None:
        payload = plan.payload if isinstance(plan.payload, dict) else {}
        steps = sum(len(payload.get(k) or []) for k in _STEPS)
        if steps == 0:
            # A plan is for changing the book: one with nothing to do is a diagnosis only.
            return Verdict(
                passed=False,
                reason="the plan proposes no step: no suggestion, adjustment or new chapter "
                "names a chapter of the book",
                evidence="plan.md",
            )
        return Verdict(
            passed=True,
            reason=f"a validated plan was proposed (plan.md): "
            f"{len(payload.get('suggestions', []))} suggestion(s), "
            f"{len(payload.get('adjustment_list', []))} adjustment(s), "
            f"{len(payload.get('new_chapters', []))} new chapter(s)",
            evidence="plan.md",
        )
    why = record.detail or record.end_reason
    return Verdict(passed=False, reason=f"no valid plan was proposed: {why}")


SOP = _sop.SOP(
    name="book_doctor",
    description="a bounded book doctor: answers a question about a "
    "long book with read-only tools within step, tool and size bounds, and proposes a "
    "validated plan (never applied)",
    build=build,
)
