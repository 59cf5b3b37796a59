"""The book as Markdown: the title, the outline with word counts, then every heading's text."""

from __future__ import annotations

from ._board import SEPARATOR, BoardView


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
        wanted = f" of {entry.word_count_requirement:,}" if entry.word_count_requirement else ""
        open_work = [slot for slot in ("evaluation", "strategy") if getattr(entry, slot)]
        flag = f" (open: {', '.join(open_work)})" if open_work else ""
        outline.append(f"{'  ' * depth}- {title_of(heading)}: {entry.word_count:,}{wanted} words{flag}")
        body.append(f"{'#' * min(depth + 2, 6)} {title_of(heading)}\n")
        if entry.content.strip():
            body.append(entry.content.strip() + "\n")
        elif not entry.subheadings:
            body.append("_(not written yet)_\n")
    head = [f"# {title}\n", f"_{total:,} words in {len(outline)} sections._\n", "## Outline\n",
            "\n".join(outline) + "\n" if outline else "_(empty)_\n"]
    return "\n".join([*head, *body])
