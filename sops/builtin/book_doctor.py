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
The verdict is the SOP's purpose, a plan to change the book: a validated plan was proposed
(only such a plan is ever published) with at least one step that names a chapter of the
book: a suggestion with a note, or an adjustment with a title or summary, for an existing
chapter number, or a titled new chapter after an existing one. A plan with no step, or whose
steps name no chapter of the book or say nothing (empty notes and titles), fails.
"""

from __future__ import annotations

from typing import Annotated, Any, NamedTuple

import msgspec

from sopbus.bus import ConfigError, RunRecord, Verdict
from sopbus.roles.book import (
    CHAR_RANGE,
    STEP_RANGE,
    TOOL_RANGE,
    BookData,
    BookDoctor,
    DoctorBounds,
    ProposePlan,
    load_book,
)

from .. import _sop
from .._sop import SopContext, Team


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
        verdict=lambda record: valid_plan(record, book),
    )


class _StepKind(NamedTuple):
    noun: str
    chapter_key: str  # the field that names a chapter of the book
    says: tuple[str, ...]  # fields of which at least one must say what to do


_STEPS = {
    "suggestions": _StepKind("suggestion(s)", "chapter", ("note",)),
    "adjustment_list": _StepKind("adjustment(s)", "chapter", ("title", "summary")),
    "new_chapters": _StepKind("new chapter(s)", "after", ("title",)),
}
"""The step lists of a plan document (``roles.book._plan.plan_document``)."""

RULE = "a plan passes with at least one step that names a chapter of the book"


def valid_plan(record: RunRecord, book: BookData) -> Verdict:
    """The book doctor's verdict: a validated plan was proposed (``plan.md``) with at least
    one step that names a chapter of ``book`` (see the module docstring)."""
    plan = record.last(ProposePlan.name)
    if plan is None:
        why = record.detail or record.end_reason
        return Verdict(passed=False, reason=f"no valid plan was proposed: {why}")
    payload = plan.payload if isinstance(plan.payload, dict) else {}
    counted = {kind: named_steps(payload, kind, book) for kind in _STEPS}
    named = sum(counted.values())
    steps = sum(len(_entries(payload, kind)) for kind in _STEPS)
    kinds = ", ".join(f"{counted[kind]} {step.noun}" for kind, step in _STEPS.items())
    if named == 0:
        what = (
            "the plan (plan.md) proposes no step (no suggestion, adjustment or new chapter)"
            if steps == 0
            else f"none of the plan's {steps} step(s) (plan.md) names a chapter of the book "
            f"with something to do"
        )
        return Verdict(passed=False, reason=f"{what}: {RULE} ({_span(book)})", evidence="plan.md")
    ignored = (
        f"; {steps - named} other step(s) name no chapter of the book or say nothing, "
        f"and do not count"
        if named < steps
        else ""
    )
    return Verdict(
        passed=True,
        reason=f"a validated plan was proposed (plan.md) with {named} step(s) that name a "
        f"chapter of the book: {kinds}{ignored}",
        evidence="plan.md",
    )


def named_steps(payload: dict[str, Any], kind: str, book: BookData) -> int:
    """How many ``kind`` steps of a plan document name a chapter of ``book`` and say what to
    do: a suggestion's note, an adjustment's title or summary, a new chapter's title."""
    numbers = {c.number for c in book.chapters}
    step = _STEPS[kind]
    return sum(
        1
        for entry in _entries(payload, kind)
        if _number(entry.get(step.chapter_key)) in numbers
        and any(_text(entry.get(field)) for field in step.says)
    )


def _entries(payload: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    entries = payload.get(kind)
    return [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []


def _number(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text(value: object) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _span(book: BookData) -> str:
    numbers = [c.number for c in book.chapters]
    return f"its chapters are {numbers[0]} to {numbers[-1]}"


SOP = _sop.SOP(
    name="book_doctor",
    description="a bounded book doctor: answers a question about a "
    "long book with read-only tools within step, tool and size bounds, and proposes a "
    "validated plan (never applied)",
    build=build,
)
