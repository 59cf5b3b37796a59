"""The blackboard book writer's workers and the board's keeper.

Each worker watches the board slots that can wake it and, for every heading a write in its
news touched, checks its condition on the board (as of the start of the round, plus its
news; see ``sopbus.roles.book._board``). When the condition holds it asks its model and writes back::

    worker            wakes on a write to   fires when (for that heading)
    MaterialWorker    word_count            word_count == 0
    ContentWorker     material              material is not empty
    EvaluationWorker  content               content is not empty and revision_count < max_revisions
    StrategyWorker    evaluation            evaluation is not empty
    RevisionWorker    strategy              strategy is not empty
    SplitWorker       content               len(content) > split_chars, no subheadings,
                                            and the heading is above max_split_depth

Before each model call the author's policies that match the heading are looked up and put
into the prompt (and the lookup is logged as a ``policies_looked_up`` event). The run ends
when no condition holds any more: no worker publishes, the bus goes idle.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import msgspec
import trio
from pydantic import BaseModel, Field

from sopbus.bus import ChatMessage, Message, Turn

from .._llm import ask_model
from .._role import Role
from ._board import (
    Board,
    BoardError,
    BoardView,
    Heading,
    child_key,
    read_write,
    slot_action,
    write_message,
)
from ._notes import Note, Policy, matching_notes, policies_for, policy_text

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class WriterSettings:
    """What the workers share besides the board: the scenario's notes and policies and the
    thresholds of the triggers."""

    notes: tuple[Note, ...] = ()
    policies: tuple[Policy, ...] = ()
    notes_per_heading: int = 3
    split_chars: int = 2000
    max_revisions: int = 1
    max_split_depth: int = 1


def word_count(text: str) -> int:
    return len(re.findall(r"\S+", text))


# -- what the models answer ---------------------------------------------------------------


class MaterialNeeds(BaseModel):
    questions: list[str] = Field(
        min_length=1, max_length=6, description="what the writer must know to write this heading"
    )


class GatheredMaterial(BaseModel):
    material: str = Field(description="facts, scenes and details that answer the questions")


class Draft(BaseModel):
    content: str = Field(description="the heading's text, in Markdown paragraphs, no heading line")


class Evaluation(BaseModel):
    evaluation: str = Field(description="the concrete weaknesses of the text, most important first")


class Strategy(BaseModel):
    strategy: str = Field(description="the steps to revise the text so the weaknesses go away")


class Section(BaseModel):
    title: str
    content: str


class SplitPlan(BaseModel):
    intro: str = Field(description="a short lead-in kept under the heading itself")
    sections: list[Section] = Field(min_length=2, max_length=6)


# -- the worker base ----------------------------------------------------------------------


class BoardWorker(Role, ABC, register=False):
    """A role that wakes on board writes and writes the board (see the module docstring).

    Subclasses set ``watch`` (the slots that wake it), ``actions`` (the slots it writes),
    ``task`` (the name of its model call in the ledger and in fixtures), and implement
    :meth:`holds` and :meth:`work`. ``rank`` is its place in the team, so that writes of
    one round keep the order the bus publishes them in.
    """

    task: str = ""

    def __init__(
        self, *, board: Board, settings: WriterSettings, rank: int = 1, **fields: Any
    ) -> None:
        super().__init__(**fields)
        self.board, self.settings, self.rank = board, settings, rank
        board.writers.add(self.name)

    def fields(self) -> dict[str, Any]:
        return {
            **super().fields(),
            "board": self.board,
            "settings": self.settings,
            "rank": self.rank,
        }

    @abstractmethod
    def holds(self, view: BoardView, heading: str) -> bool:
        """Whether this worker's trigger condition holds for ``heading``."""

    @abstractmethod
    async def work(self, view: BoardView, heading: str, turn: Turn) -> list[Message]:
        """The board writes this worker makes for ``heading``."""

    async def step(self, news: Sequence[Message], turn: Turn) -> Sequence[Message]:
        fresh = tuple(news)
        if not fresh:
            return ()
        self.memory.extend(fresh)
        self.board.absorb(fresh)
        view = self.board.view(turn.round, fresh)
        fired = self.fired(fresh, view)
        results: list[list[Message]] = [[] for _ in fired]

        async def run(i: int, heading: str, parents: tuple[str, ...]) -> None:
            out = await self.work(view, heading, turn)
            results[i] = [msgspec.structs.replace(m, parents=parents) for m in out]

        async with trio.open_nursery() as nursery:
            for i, (heading, parents) in enumerate(fired):
                turn.emit("board_trigger", worker=self.name, heading=heading, parents=list(parents))
                nursery.start_soon(run, i, heading, parents)
        out = [m for result in results for m in result]
        self.board.record_own(out, round=turn.round, rank=self.rank)
        return out

    def fired(
        self, news: tuple[Message, ...], view: BoardView
    ) -> list[tuple[str, tuple[str, ...]]]:
        """The headings whose condition holds, each with the ids of the writes that woke it."""
        woke: dict[str, list[str]] = {}
        for message in news:
            if message.cause_by not in self.watch:
                continue
            try:
                heading = read_write(message)[0]
            except BoardError:
                continue  # the keeper logs unreadable edits; nothing to do here
            woke.setdefault(heading, []).append(message.id)
        return [(h, tuple(ids)) for h, ids in woke.items() if self.holds(view, h)]

    # -- what the subclasses use ----------------------------------------------------------

    async def ask(
        self,
        turn: Turn,
        view: BoardView,
        heading: str,
        *,
        output: type[M],
        instruction: str,
        show: Sequence[str] = (),
        task: str | None = None,
    ) -> M:
        """One model call about ``heading``, laid out for prefix caches: what every worker's
        call shares (the book) as the system turn; then the author's policies for the
        heading, the heading, its requirement and the slots named in ``show`` (in
        :data:`SLOT_ORDER`, whoever asks), which every call about the heading shares; the
        worker's own part (who it is, its task and instruction) last."""
        policies = policies_for(self.settings.policies, heading)
        turn.emit(
            "policies_looked_up",
            worker=self.name,
            heading=heading,
            policies=[p.id for p in policies],
        )
        entry = view[heading]
        book = [f"Book: {self.board.title}"]
        if self.board.brief:
            book.append(f"Brief: {self.board.brief}")
        parts = [policy_text(policies), f"Heading: {heading}"]
        if entry.requirement:
            parts.append(f"Requirement: {entry.requirement}")
        if entry.word_count_requirement:
            parts.append(f"Length: about {entry.word_count_requirement} words")
        parts.extend(_slot_text(entry, slot) for slot in sorted(show, key=_slot_rank(entry)))
        task = task or self.task
        parts.append(f"{self.system_text()}\n\n## Your task: {task}\n{instruction}")
        messages = (
            ChatMessage("system", "\n\n".join(book)),
            ChatMessage("user", "\n\n".join(parts)),
        )
        return await ask_model(
            turn,
            messages,
            output=output,
            llm=self.context(None, (), turn).llm,
            action=task,
            role=self.name,
            max_repairs=2,
            subject=heading,
        )

    def write(self, heading: str, slot: str, value: Any) -> Message:
        return write_message(heading, slot, value, sender=self.name)


class OneCallWorker(BoardWorker, Generic[M], register=False):
    """A worker whose work on a heading is one model call: ``answer`` is what the model
    answers, ``shows`` the slots the call shows, ``instruction`` what it is asked, and
    :meth:`writes` the board writes made of the answer."""

    answer: type[M]
    shows: tuple[str, ...] = ()
    instruction: str = ""

    async def work(self, view: BoardView, heading: str, turn: Turn) -> list[Message]:
        answer = await self.ask(
            turn,
            view,
            heading,
            output=self.answer,
            show=self.shows,
            instruction=self.instruction,
        )
        return self.writes(view, heading, answer)

    @abstractmethod
    def writes(self, view: BoardView, heading: str, answer: M) -> list[Message]:
        """The board writes this worker makes of the model's ``answer`` about ``heading``."""

    def text(self, heading: str, content: str) -> list[Message]:
        """``heading``'s content and its word count, the two writes that go together."""
        return [
            self.write(heading, "content", content),
            self.write(heading, "word_count", word_count(content)),
        ]


def _filled(view: BoardView, heading: str, slot: str) -> bool:
    """Whether ``heading``'s text slot ``slot`` holds more than white space."""
    return bool(getattr(view[heading], slot).strip())


SLOT_ORDER = ("material", "content", "evaluation", "strategy")
"""The order in which a call shows a heading's slots, whichever it shows, empty ones last:
the material first, since it is written before anything else about the heading and every
call from the writing on shows it (so each starts as the writing's call did, through the
material), the content after it (every call after the writing shows it: the split's, the
evaluation's, the revision plan's and the revision's then start alike through both), the
news of the call (an evaluation to plan from, a strategy to revise by) last."""


def _slot_rank(entry: Heading) -> Callable[[str], tuple[bool, int]]:
    def rank(slot: str) -> tuple[bool, int]:
        order = SLOT_ORDER.index(slot) if slot in SLOT_ORDER else len(SLOT_ORDER)
        return getattr(entry, slot) in ("", ()), order

    return rank


def _slot_text(entry: Heading, slot: str) -> str:
    value = getattr(entry, slot)
    if isinstance(value, tuple):
        value = "\n".join(f"- {v}" for v in value) or "(none)"
    label = slot.replace("_", " ").capitalize()
    return f"{label}:\n{value if value != '' else '(empty)'}"


# -- the six workers ----------------------------------------------------------------------


class MaterialWorker(BoardWorker):
    """Word count 0: writes the questions the heading needs answered, then the material,
    from the knowledge notes that match (the model's own answers when none match)."""

    profile = "Research assistant"
    goal = "find what the writer needs to know before a heading is written"
    watch = (slot_action("word_count"),)
    actions = (slot_action("material_needs"), slot_action("material"))
    task = "ListMaterialNeeds"
    gather_task = "GatherMaterial"

    def holds(self, view: BoardView, heading: str) -> bool:
        return view[heading].word_count == 0

    async def work(self, view: BoardView, heading: str, turn: Turn) -> list[Message]:
        needs = await self.ask(
            turn,
            view,
            heading,
            output=MaterialNeeds,
            show=("material",),
            instruction="List the questions the writer must answer before "
            "writing this heading (at most six).",
        )
        query = " ".join([heading, view[heading].requirement, *needs.questions])
        notes = matching_notes(self.settings.notes, query, self.settings.notes_per_heading)
        if notes:
            material = "\n\n".join(f'From the note "{n.title}": {n.text}' for n in notes)
        else:
            material = await self._from_model(turn, view, heading, needs.questions)
        turn.emit(
            "material_gathered",
            heading=heading,
            source="notes" if notes else "model",
            notes=[n.title for n in notes],
        )
        return [
            self.write(heading, "material_needs", needs.questions),
            self.write(heading, "material", material),
        ]

    async def _from_model(
        self, turn: Turn, view: BoardView, heading: str, questions: list[str]
    ) -> str:
        asked = "\n".join(f"- {q}" for q in questions)
        answer = await self.ask(
            turn,
            view,
            heading,
            output=GatheredMaterial,
            task=self.gather_task,
            instruction=f"No knowledge note covers these questions; answer "
            f"them from what you know:\n{asked}",
        )
        return answer.material


class ContentWorker(OneCallWorker[Draft]):
    """Material present: writes the heading's content from it."""

    profile = "Author"
    goal = "write each heading from its material, to its requirement and length"
    watch = (slot_action("material"),)
    actions = (slot_action("content"), slot_action("word_count"))
    task = "WriteContent"
    answer = Draft
    shows = ("material", "content")
    instruction = (
        "Write the text of this heading from the material. "
        "If there is content already, write it anew with the material."
    )

    def holds(self, view: BoardView, heading: str) -> bool:
        return _filled(view, heading, "material")

    def writes(self, view: BoardView, heading: str, answer: Draft) -> list[Message]:
        return self.text(heading, answer.content)


class EvaluationWorker(OneCallWorker[Evaluation]):
    """Content present and revision count below ``max_revisions``: writes an evaluation and
    counts the revision round."""

    profile = "Editor"
    goal = "find what keeps a text from meeting its requirement"
    watch = (slot_action("content"),)
    actions = (slot_action("evaluation"), slot_action("revision_count"))
    task = "EvaluateContent"
    answer = Evaluation
    shows = ("material", "content")
    instruction = (
        "Evaluate the content against the requirement, the "
        "length, the policies and the material. Name concrete problems."
    )

    def holds(self, view: BoardView, heading: str) -> bool:
        return (
            _filled(view, heading, "content")
            and view[heading].revision_count < self.settings.max_revisions
        )

    def writes(self, view: BoardView, heading: str, answer: Evaluation) -> list[Message]:
        return [
            self.write(heading, "evaluation", answer.evaluation),
            self.write(heading, "revision_count", view[heading].revision_count + 1),
        ]


class StrategyWorker(OneCallWorker[Strategy]):
    """Evaluation present: writes a revision strategy and clears the evaluation."""

    profile = "Developmental editor"
    goal = "turn an evaluation into a revision plan the author can follow"
    watch = (slot_action("evaluation"),)
    actions = (slot_action("strategy"), slot_action("evaluation"))
    task = "PlanRevision"
    answer = Strategy
    shows = ("material", "content", "evaluation")
    instruction = "Write the revision strategy for this evaluation."

    def holds(self, view: BoardView, heading: str) -> bool:
        return _filled(view, heading, "evaluation")

    def writes(self, view: BoardView, heading: str, answer: Strategy) -> list[Message]:
        return [
            self.write(heading, "strategy", answer.strategy),
            self.write(heading, "evaluation", ""),
        ]


class RevisionWorker(OneCallWorker[Draft]):
    """Strategy present: rewrites the content by it, then clears the strategy (so a board
    never shows a strategy that was already carried out)."""

    profile = "Author"
    goal = "revise a heading's text by its revision strategy"
    watch = (slot_action("strategy"),)
    actions = (slot_action("content"), slot_action("word_count"), slot_action("strategy"))
    task = "ReviseContent"
    answer = Draft
    shows = ("material", "content", "strategy")
    instruction = "Rewrite the content following the strategy. Keep what works."

    def holds(self, view: BoardView, heading: str) -> bool:
        return _filled(view, heading, "strategy")

    def writes(self, view: BoardView, heading: str, answer: Draft) -> list[Message]:
        return [*self.text(heading, answer.content), self.write(heading, "strategy", "")]


class SplitWorker(OneCallWorker[SplitPlan]):
    """Long content with no subheadings: divides it into subheadings with their own content;
    the heading keeps a short lead-in. Only headings above ``max_split_depth`` are split, so
    splitting cannot go on forever."""

    profile = "Structural editor"
    goal = "keep each section short enough to read and revise"
    watch = (slot_action("content"),)
    actions = (slot_action("subheadings"), slot_action("content"), slot_action("word_count"))
    task = "SplitSection"
    answer = SplitPlan
    shows = ("material", "content")
    instruction = (
        "Divide the content into 2 to 6 subheadings, each with "
        "its own part of the text; keep a short lead-in."
    )

    def holds(self, view: BoardView, heading: str) -> bool:
        entry = view[heading]
        return (
            len(entry.content) > self.settings.split_chars
            and not entry.subheadings
            and view.depth(heading) < self.settings.max_split_depth
        )

    def writes(self, view: BoardView, heading: str, answer: SplitPlan) -> list[Message]:
        titles = _unique_titles([s.title for s in answer.sections])
        out = [self.write(heading, "subheadings", titles), *self.text(heading, answer.intro)]
        for title, section in zip(titles, answer.sections):
            out += self.text(child_key(heading, title), section.content)
        return out


def _unique_titles(titles: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for raw in titles:
        title = " ".join(raw.replace("/", "-").split()) or "Part"
        seen[title] = seen.get(title, 0) + 1
        out.append(title if seen[title] == 1 else f"{title} ({seen[title]})")
    return out


WORKERS: tuple[type[BoardWorker], ...] = (
    MaterialWorker,
    ContentWorker,
    EvaluationWorker,
    StrategyWorker,
    RevisionWorker,
    SplitWorker,
)


# -- the keeper ---------------------------------------------------------------------------
