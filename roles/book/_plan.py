"""The book doctor's answer: a plan, the protocol it is wrapped in, and the plan's validator.

Nothing in a plan is applied: it is written as an artifact for the user to confirm. The
validator keeps it safe to confirm: written chapters are never overwritten (they get
suggestions only), new chapters go only where no written chapter would be renumbered, and
not too many are added. Only unwritten (0-word) planned chapters go on the adjustment list.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from ._data import BookData
from ._tools import TOOLS, ToolArgs


class Suggestion(BaseModel):
    """Advice for a chapter (written or planned); never applied automatically."""

    chapter: int
    note: str


class ChapterChange(BaseModel):
    """A change to an unwritten (0-word) planned chapter: a new title and/or summary."""

    chapter: int
    title: str | None = None
    summary: str | None = None
    reason: str


class NewChapter(BaseModel):
    """A chapter to insert after chapter ``after``."""

    after: int
    title: str
    summary: str
    reason: str


class Plan(BaseModel):
    diagnosis: str = Field(description="the answer to the question, with its cause")
    evidence: list[str] = Field(default_factory=list, description="what the tools showed")
    suggestions: list[Suggestion] = Field(default_factory=list)
    adjustments: list[ChapterChange] = Field(default_factory=list)
    new_chapters: list[NewChapter] = Field(default_factory=list)


class Decision(BaseModel):
    """One answer of the model: ``{"type": "tool_call", "tool": ..., "args": {...},
    "reason": ...}`` or ``{"type": "final", "plan": {...}}``."""

    type: Literal["tool_call", "final"]
    # Any name is accepted (an unknown one is answered as a tool error), but the schema
    # lists the real ones, so structured outputs and the simulator pick from them.
    tool: str | None = Field(default=None, json_schema_extra={"enum": [*TOOLS, None]})
    args: ToolArgs | None = None
    reason: str = ""
    plan: Plan | None = None


def decision_problem(decision: Decision) -> str | None:
    """What makes a well-formed answer unusable, or ``None``."""
    if decision.type == "tool_call" and not decision.tool:
        return 'a tool_call needs "tool" (one of the listed tools)'
    if decision.type == "final" and decision.plan is None:
        return 'a final answer needs "plan"'
    return None


def validate_plan(plan: Plan, book: BookData, *, max_new_chapters: int) -> list[str]:
    """Every reason ``plan`` is unsafe, each with its fix; empty when it may be proposed."""
    errors: list[str] = []
    last, numbers = book.last_written, [c.number for c in book.chapters]
    for s in plan.suggestions:
        if book.chapter(s.chapter) is None:
            errors.append(
                f"suggestion for chapter {s.chapter}: no such chapter "
                f"(chapters are {numbers[0]} to {numbers[-1]})"
            )
    seen: set[int] = set()
    for a in plan.adjustments:
        errors.extend(_adjustment_problems(a, book, seen))
    if len(plan.new_chapters) > max_new_chapters:
        errors.append(
            f"{len(plan.new_chapters)} new chapters proposed; at most "
            f"{max_new_chapters} may be added in one plan: keep the most needed"
        )
    for n in plan.new_chapters:
        if n.after < last:
            errors.append(
                f'new chapter "{n.title}" after chapter {n.after}: unsafe position, it '
                f"would renumber written chapters {n.after + 1} to {last}; insert after "
                f"chapter {last} or later"
            )
        elif n.after > numbers[-1]:
            errors.append(
                f'new chapter "{n.title}" after chapter {n.after}: there is no chapter '
                f"{n.after}; the last is {numbers[-1]}"
            )
    return errors


def _adjustment_problems(a: ChapterChange, book: BookData, seen: set[int]) -> list[str]:
    chapter = book.chapter(a.chapter)
    if chapter is None:
        return [f"adjustment of chapter {a.chapter}: no such chapter"]
    if chapter.written:
        return [
            f"adjustment of chapter {a.chapter}: it is written ({chapter.words:,} words) and "
            f"may not be overwritten; move the change to suggestions"
        ]
    problems = []
    if a.chapter in seen:
        problems.append(f"chapter {a.chapter} is adjusted twice; merge the changes into one")
    seen.add(a.chapter)
    if a.title is None and a.summary is None:
        problems.append(
            f"adjustment of chapter {a.chapter} changes nothing; give a title or a summary"
        )
    return problems


def plan_document(plan: Plan, book: BookData, question: str) -> dict[str, Any]:
    """The plan as the artifact keeps it: proposed, not applied, with the automatic
    adjustment list (only unwritten planned chapters) apart from the suggestions."""
    return {
        "book": book.title,
        "question": question,
        "status": "proposed",
        "applied": False,
        "needs_confirmation": True,
        "diagnosis": plan.diagnosis,
        "evidence": plan.evidence,
        "suggestions": [s.model_dump() for s in plan.suggestions],
        "adjustment_list": [a.model_dump() for a in plan.adjustments],
        "new_chapters": [n.model_dump() for n in plan.new_chapters],
    }


def plan_markdown(doc: dict[str, Any]) -> str:
    lines = [
        f"# Book doctor: {doc['book']}",
        "",
        f"**Question:** {doc['question']}",
        "",
        "_Proposed plan. Nothing has been applied; confirm before changing the outline._",
        "",
        "## Diagnosis",
        "",
        doc["diagnosis"],
        "",
    ]
    if doc["evidence"]:
        lines += ["## Evidence", "", *[f"- {e}" for e in doc["evidence"]], ""]
    lines += ["## Suggestions (for you to consider; never applied automatically)", ""]
    lines += [f"- Chapter {s['chapter']}: {s['note']}" for s in doc["suggestions"]] or ["- none"]
    lines += ["", "## Adjustment list (unwritten planned chapters only)", ""]
    for a in doc["adjustment_list"]:
        change = "; ".join(f"{k}: {a[k]}" for k in ("title", "summary") if a.get(k))
        lines.append(f"- Chapter {a['chapter']}: {change} ({a['reason']})")
    if not doc["adjustment_list"]:
        lines.append("- none")
    lines += ["", "## New chapters", ""]
    lines += [
        f"- After chapter {n['after']}: {n['title']}: {n['summary']} ({n['reason']})"
        for n in doc["new_chapters"]
    ] or ["- none"]
    return "\n".join(lines) + "\n"
