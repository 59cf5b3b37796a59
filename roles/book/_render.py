"""The book as Markdown: the title, the outline with word counts, then every heading's text;
and the BoardKeeper, the role that keeps ``artifacts/book.md`` up to date."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sopbus.bus import Message, Turn

from .._role import Role
from ._board import SEPARATOR, SLOTS, Board, BoardView, slot_action, slot_of


def title_of(heading: str) -> str:
    """The last part of a board key: ``"Chapter 3 / The Cave"`` -> ``"The Cave"``."""
    return heading.rsplit(SEPARATOR, 1)[-1]


def render_book(view: BoardView, *, title: str) -> str:
    """``# title``, ``## Outline`` (nested list with word counts and open work), then each
    heading as ``##``/``###``/... with its direct content."""
    outline, body = [], []
    total = 0
    for heading, depth in view.walk():
        entry = view[heading]
        total += entry.word_count
        open_work = [slot for slot in ("evaluation", "strategy") if getattr(entry, slot)]
        flag = f" (open: {', '.join(open_work)})" if open_work else ""
        outline.append(f"{'  ' * depth}- {title_of(heading)}: {_words(view, heading)}{flag}")
        body.append(f"{'#' * min(depth + 2, 6)} {title_of(heading)}\n")
        if entry.content.strip():
            body.append(entry.content.strip() + "\n")
        elif not entry.subheadings:
            body.append("_(not written yet)_\n")
    head = [
        f"# {title}\n",
        f"_{total:,} words in {len(outline)} sections._\n",
        "## Outline\n",
        "\n".join(outline) + "\n" if outline else "_(empty)_\n",
    ]
    return "\n".join([*head, *body])


def _words(view: BoardView, heading: str) -> str:
    """``"534 of 500 words (39 in the lead-in)"``: a heading's words with its subheadings',
    against its target (what the book writer's verdict judges)."""
    entry = view[heading]
    total = sum(view[h].word_count for h in view.subtree(heading))
    wanted = f" of {entry.word_count_requirement:,}" if entry.word_count_requirement else ""
    lead = f" ({entry.word_count:,} in the lead-in)" if entry.subheadings else ""
    return f"{total:,}{wanted} words{lead}"


class BoardKeeper(Role):
    """Watches every slot: takes in users' edits, logs the ones it cannot read
    (``board_write_rejected``), and keeps ``artifacts/book.md`` up to date after each round
    with writes. It never writes the board."""

    profile = "Board keeper"
    goal = "keep the book on the board readable as book.md"
    watch = tuple(slot_action(s) for s in SLOTS)
    book_file = "book.md"

    def __init__(self, *, board: Board, **fields: Any) -> None:
        super().__init__(**fields)
        self.board = board
        board.writers.add(self.name)

    def fields(self) -> dict[str, Any]:
        return {**super().fields(), "board": self.board}

    async def step(self, news: Sequence[Message], turn: Turn) -> Sequence[Message]:
        fresh = tuple(news)
        for message in self.board.absorb(fresh):
            why = dict(self.board.rejected).get(message.id, "")
            turn.emit(
                "board_write_rejected", message=message.id, cause_by=message.cause_by, why=why
            )
        if any(slot_of(m.cause_by) for m in fresh):
            turn.write_artifact(self.book_file, self.render(self.board.view(turn.round, fresh)))
        return ()

    def render(self, view: BoardView) -> str:
        return render_book(view, title=self.board.title)

    def finish(self, write: Callable[[str, str], object]) -> None:
        """Writes the final book (every recorded write, those of the last round too) at the
        end of the run, through the run's record (``write`` is the engine's)."""
        write(self.book_file, self.render(self.board.view()))
