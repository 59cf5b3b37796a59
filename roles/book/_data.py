"""A long book as the book doctor sees it: chapter cards, the story route, facts, chapter
memories and recent adjustments, loaded once into frozen values, and its manifest.

The data directory holds TOML files (and the route as Markdown)::

    book.toml          title, genre, [[chapter]] number, title, summary, characters,
                       words (0: planned, not written), opening, ending
    route.md           the story route summary (may be empty)
    facts.toml         [[fact]] id, text, keywords
    memories.toml      [[memory]] chapter, text
    adjustments.toml   [[adjustment]] date, chapter, change, reason

Everything is frozen (structs and tuples): the doctor's tools can only read it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, TypeVar

import msgspec

from sopbus.bus import ConfigError, read_user_text, read_user_toml

T = TypeVar("T")
ChapterNo = Annotated[int, msgspec.Meta(ge=1)]

THIN_ROUTE_WORDS = 80
"""A route summary shorter than this many words is ``thin``: too little to plan from."""


class Chapter(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    number: ChapterNo
    title: str
    summary: str = ""
    characters: tuple[str, ...] = ()
    words: Annotated[int, msgspec.Meta(ge=0)] = 0
    opening: str = ""
    ending: str = ""

    @property
    def written(self) -> bool:
        return self.words > 0

    @property
    def status(self) -> str:
        return "written" if self.written else "planned"


class Fact(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    id: str
    text: str
    keywords: tuple[str, ...] = ()


class ChapterMemory(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    chapter: ChapterNo
    text: str


class Adjustment(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    date: str
    chapter: ChapterNo
    change: str
    reason: str = ""


class _BookFile(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    title: str
    genre: str = ""
    chapter: tuple[Chapter, ...] = ()


class _Facts(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    fact: tuple[Fact, ...] = ()


class _Memories(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    memory: tuple[ChapterMemory, ...] = ()


class _Adjustments(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    adjustment: tuple[Adjustment, ...] = ()


class BookData(msgspec.Struct, frozen=True, kw_only=True):
    title: str
    genre: str
    chapters: tuple[Chapter, ...]
    route: str
    facts: tuple[Fact, ...]
    memories: tuple[ChapterMemory, ...]
    adjustments: tuple[Adjustment, ...]

    def chapter(self, number: int) -> Chapter | None:
        for chapter in self.chapters:
            if chapter.number == number:
                return chapter
        return None

    @property
    def last_written(self) -> int:
        """The highest written chapter's number (0 when none is written)."""
        return max((c.number for c in self.chapters if c.written), default=0)

    def route_status(self) -> str:
        words = len(self.route.split())
        return "empty" if words == 0 else "thin" if words < THIN_ROUTE_WORDS else "usable"

    def manifest(self) -> dict[str, Any]:
        """What the doctor sees first: counts and states, no body text."""
        written = [c for c in self.chapters if c.written]
        return {
            "title": self.title,
            "genre": self.genre,
            "chapters": {
                "total": len(self.chapters),
                "written": len(written),
                "planned": len(self.chapters) - len(written),
                "numbers": [self.chapters[0].number, self.chapters[-1].number]
                if self.chapters
                else [],
                "last_written": self.last_written,
                "words_written": sum(c.words for c in written),
            },
            "route": self.route_status(),
            "facts": len(self.facts),
            "memories": len(self.memories),
            "recent_adjustments": len(self.adjustments),
        }


def load_book(directory: Path) -> BookData:
    """The book in ``directory`` (see the module docstring); a :class:`sopbus.bus.ConfigError`
    names the file of any mistake. Only ``book.toml`` is required."""
    book = _load(directory / "book.toml", _BookFile)
    chapters = tuple(sorted(book.chapter, key=lambda c: c.number))
    numbers = [c.number for c in chapters]
    if not chapters or len(set(numbers)) != len(numbers):
        raise ConfigError(
            f"{directory / 'book.toml'}: needs [[chapter]] entries with distinct "
            f"numbers; got {numbers}"
        )
    route_file = directory / "route.md"
    route = read_user_text(route_file, "route file") if route_file.exists() else ""
    return BookData(
        title=book.title,
        genre=book.genre,
        chapters=chapters,
        route=route,
        facts=_optional(directory / "facts.toml", _Facts).fact,
        memories=_optional(directory / "memories.toml", _Memories).memory,
        adjustments=_optional(directory / "adjustments.toml", _Adjustments).adjustment,
    )


def _optional(path: Path, kind: type[T]) -> T:
    return _load(path, kind) if path.exists() else msgspec.convert({}, kind)


def _load(path: Path, kind: type[T]) -> T:
    return load_as(path, kind, "book data file")


def load_as(path: Path, kind: type[T], what: str) -> T:
    """The TOML file ``path`` (a ``what``, for the error) decoded into ``kind``; a file that
    cannot be read, parsed or decoded is a ConfigError naming it."""
    data = read_user_toml(path, what)
    try:
        return msgspec.convert(data, kind)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"{path}: {exc}") from None
