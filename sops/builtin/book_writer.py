"""Blackboard book writer: six workers that react to writes on a shared board.

No worker calls another and no pipeline is declared: each worker watches board slots
(``Board.word_count``, ``Board.material``, ...) and fires when its condition holds for a
heading (see ``sopbus.roles.book._workers``). The SOP writes the outline onto the board (round 0)
and the run goes until no condition holds (idle). The book, with its outline, is
``artifacts/book.md``.

``[sop]`` options (paths relative to the scenario file)::

    outline = "data/book_writer/outline.toml"     # required: title and [[heading]] entries
    notes = "data/book_writer/notes.toml"         # knowledge notes ([[note]]); "" for none
    policies = "data/book_writer/policies.toml"   # author policies ([[policy]]); "" for none
    notes_per_heading = 3    # notes gathered as one heading's material, at most
    split_chars = 2000       # content longer than this (and no subheadings) is split
    max_revisions = 1        # the evaluation worker fires while revision_count < this
    max_split_depth = 1      # 1: only top-level headings are split
    word_tolerance = 0.25    # the verdict's tolerance on word targets: 0.25 is ±25%

The outline file::

    title = "A Reader's Companion to Journey to the West"
    [[heading]]
    title = "The Stone Monkey"
    requirement = "How Sun Wukong is born and becomes king"   # optional
    words = 600                                              # optional word-count requirement

A user's edits are board writes: ``[[inject]]`` entries in the scenario (or in a file given
to ``sopbus run --inject FILE``) with ``cause_by = "Board.<slot>"`` and
``payload = { heading = "...", value = ... }`` (``content`` is the value when the payload
has none). They are processed by the same triggers as the workers' writes.

The verdict is the SOP's purpose, the book as the outline asks for it: every heading of
the outline was written (it has content, or each of its subheadings has), and every heading
with a ``words`` target has that many words within ``word_tolerance`` (its own text and its
subheadings', counted in the text, not in the ``word_count`` slot). A run that went idle
with chapters empty, short or twice too long has failed; the reason names each chapter that
missed, by how much.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

from sopbus.bus import ConfigError, Message, RunRecord, Verdict, read_user_toml
from sopbus.roles.book import (
    WORKERS,
    Board,
    BoardKeeper,
    BoardView,
    WriterSettings,
    load_notes,
    load_policies,
    word_count,
    write_message,
)

from .. import _sop
from .._sop import SopContext, Team

Positive = Annotated[int, msgspec.Meta(ge=1)]
OUTLINE_SENDER = "Outline"
"""The sender of the board's first writes (the outline), published before round 1."""


class WriterOptions(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    outline: str
    notes: str = ""
    policies: str = ""
    notes_per_heading: Positive = 3
    split_chars: Positive = 2000
    max_revisions: Positive = 1
    max_split_depth: Positive = 1
    word_tolerance: Annotated[float, msgspec.Meta(ge=0, le=1)] = 0.25


class OutlineHeading(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    title: str
    requirement: str = ""
    words: Annotated[int, msgspec.Meta(ge=0)] = 0


class Outline(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    title: str
    heading: tuple[OutlineHeading, ...]


def load_outline(path: str, ctx: SopContext) -> Outline:
    file = ctx.resolve(path)
    data = read_user_toml(file, "outline named at $.sop.outline")
    try:
        outline = msgspec.convert(data, Outline)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"{file}: {exc}") from None
    titles = [h.title.strip() for h in outline.heading]
    if not titles or len(set(titles)) != len(titles) or not all(titles):
        raise ConfigError(
            f"{file}: the outline needs at least one [[heading]], each with a "
            f"distinct, non-empty title; got {titles}"
        )
    return outline


def outline_writes(outline: Outline, sender: str) -> list[Message]:
    """The board's first writes: each heading's requirement and length, then its word
    count 0 (the write that wakes the material worker)."""
    out = []
    for h in outline.heading:
        title = h.title.strip()
        if h.requirement:
            out.append(write_message(title, "requirement", h.requirement, sender=sender))
        if h.words:
            out.append(write_message(title, "word_count_requirement", h.words, sender=sender))
        out.append(write_message(title, "word_count", 0, sender=sender))
    return out


def build(ctx: SopContext) -> Team:
    o = ctx.options_as(WriterOptions)
    outline = load_outline(o.outline, ctx)
    settings = WriterSettings(
        notes=load_notes(ctx.resolve(o.notes)) if o.notes else (),
        policies=load_policies(ctx.resolve(o.policies)) if o.policies else (),
        notes_per_heading=o.notes_per_heading,
        split_chars=o.split_chars,
        max_revisions=o.max_revisions,
        max_split_depth=o.max_split_depth,
    )
    board = Board(title=outline.title, brief=ctx.scenario.idea or "")
    keeper = BoardKeeper(board=board, llm_defaults=ctx.llm_defaults)
    workers = [
        cls(board=board, settings=settings, rank=i, llm_defaults=ctx.llm_defaults)
        for i, cls in enumerate(WORKERS, start=1)
    ]
    board.writers.add(OUTLINE_SENDER)
    seed = outline_writes(outline, sender=OUTLINE_SENDER)
    board.seed(seed)
    return Team(
        roles=[keeper, *workers],
        seed=seed,
        finish=keeper.finish,
        verdict=lambda record: book_written(
            board, outline, record, tolerance=o.word_tolerance, book_file=keeper.book_file
        ),
    )


def book_written(
    board: Board,
    outline: Outline,
    record: RunRecord,
    *,
    tolerance: float = 0.25,
    book_file: str = "book.md",
) -> Verdict:
    """The book writer's verdict: every outline heading has text (in ``book_file``) and
    each one with a ``words`` target is within ``tolerance`` of it (0.25: ±25%)."""
    view = board.view()
    headings = [(h.title.strip(), h.words) for h in outline.heading]
    empty = [t for t, _ in headings if not _written(view, t, set())]
    counts = {t: words_under(view, t) for t, _ in headings}
    missed = [
        (t, counts[t], target)
        for t, target in headings
        if target and t not in empty and abs(counts[t] - target) > tolerance * target
    ]
    return _judged(headings, counts, empty, missed, tolerance, record, book_file)


def _judged(
    headings: list[tuple[str, int]],
    counts: dict[str, int],
    empty: list[str],
    missed: list[tuple[str, int, int]],
    tolerance: float,
    record: RunRecord,
    book_file: str,
) -> Verdict:
    targets = [(t, target) for t, target in headings if target]
    which = "each" if len(targets) == len(headings) else f"the {len(targets)} with a target"
    rule = (
        f"written, {which} within ±{tolerance * 100:g}% of its word target"
        if targets
        else "written"
    )
    totals = (
        f"; {sum(counts[t] for t, _ in targets):,} of "
        f"{sum(target for _, target in targets):,} words in all"
        if targets
        else ""
    )
    if not empty and not missed:
        return Verdict(
            passed=True,
            reason=f"all {len(headings)} headings of the outline are {rule}{totals} ({book_file})",
            evidence=book_file,
        )
    problems = [_miss(t, n, target) for t, n, target in missed]
    if empty:
        problems.append(f"no text: {', '.join(empty)}")
    return Verdict(
        passed=False,
        reason=f"{len(empty) + len(missed)} of {len(headings)} headings fail the rule "
        f"(every heading {rule}): {'; '.join(problems)}{totals} "
        f"(the run ended: {record.end_reason})",
        evidence=book_file,
    )


def words_under(view: BoardView, heading: str) -> int:
    """The words of ``heading``'s text and of its subheadings', counted in the text."""
    return sum(word_count(view[h].content) for h in view.subtree(heading))


def _miss(title: str, words: int, target: int) -> str:
    off = (words - target) / target
    return f"{title} has {words:,} of {target:,} words ({off:+.0%})"


def _written(view: BoardView, heading: str, seen: set[str]) -> bool:
    if heading in seen:
        return False
    seen.add(heading)
    if view[heading].content.strip():
        return True
    children = view.children(heading)
    return bool(children) and all(_written(view, c, seen) for c in children)


SOP = _sop.SOP(
    name="book_writer",
    description="a blackboard book writer: six workers react to "
    "board writes until no trigger fires; the book goes to artifacts/book.md",
    build=build,
)
