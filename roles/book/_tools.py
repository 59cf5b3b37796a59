"""The book doctor's tools: read-only looks into a :class:`~sopbus.roles.book._data.BookData`.

A tool is a pure function of the (frozen) book and its arguments that returns text; there
is no tool that writes, and the book it reads cannot be changed. The model names a tool and
its arguments in one flat object (``{"chapter": 13}``, ``{"start": 10, "end": 14}``,
``{"query": "Mind Monkey"}``); a tool says which arguments it needs.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import msgspec
import pydantic
from pydantic import BaseModel, ConfigDict

from sopbus.bus import SopbusError

from ._data import BookData, Chapter

MAX_CARDS = 10
"""Chapter cards one call returns at most; a wider range is cut to its first ten."""

_json = msgspec.json.Encoder()


class ToolArgs(BaseModel):
    """The arguments a tool call may carry (each tool uses some of them)."""

    model_config = ConfigDict(extra="forbid")

    start: int | None = None
    end: int | None = None
    chapter: int | None = None
    query: str | None = None
    limit: int | None = None


class ToolError(SopbusError, ValueError):
    """A tool call that cannot be answered (unknown tool, missing or bad arguments); its
    text goes back to the model as the tool's result."""


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    needs: tuple[str, ...]
    run: Callable[[BookData, ToolArgs], Any]


def _chapter(book: BookData, args: ToolArgs) -> Chapter:
    assert args.chapter is not None
    found = book.chapter(args.chapter)
    if found is None:
        numbers = [c.number for c in book.chapters]
        raise ToolError(f"no chapter {args.chapter}; chapters are {numbers[0]} to {numbers[-1]}")
    return found


def _card(c: Chapter) -> dict[str, Any]:
    first = re.split(r"(?<=[.!?])\s", c.summary.strip(), maxsplit=1)[0]
    return {
        "chapter": c.number,
        "title": c.title,
        "status": c.status,
        "words": c.words,
        "characters": list(c.characters),
        "gist": first[:240],
    }


def chapter_cards(book: BookData, args: ToolArgs) -> Any:
    start, end = (
        args.start or 1,
        args.end if args.end is not None else (args.start or 1) + MAX_CARDS - 1,
    )
    if end < start:
        raise ToolError(f"end ({end}) is before start ({start})")
    cut = end - start + 1 > MAX_CARDS
    end = min(end, start + MAX_CARDS - 1)
    cards = [_card(c) for c in book.chapters if start <= c.number <= end]
    note = f"range cut to {start}-{end}: at most {MAX_CARDS} cards per call" if cut else ""
    return {"cards": cards, "note": note} if note else {"cards": cards}


def route_summary(book: BookData, args: ToolArgs) -> Any:
    return {"route": book.route_status(), "text": book.route or "(the route summary is empty)"}


def chapter_summary(book: BookData, args: ToolArgs) -> Any:
    c = _chapter(book, args)
    return {"chapter": c.number, "title": c.title, "status": c.status, "summary": c.summary}


def _part(part: str) -> Callable[[BookData, ToolArgs], Any]:
    def run(book: BookData, args: ToolArgs) -> Any:
        c = _chapter(book, args)
        if not c.written:
            return {
                "chapter": c.number,
                "status": "planned",
                part: "(planned, 0 words: no text yet)",
            }
        return {"chapter": c.number, "title": c.title, part: getattr(c, part)}

    return run


def _terms(query: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9'-]+", query.lower()) if len(w) > 2}


def _score(terms: set[str], text: str) -> int:
    words = set(re.findall(r"[a-z0-9'-]+", text.lower()))
    return len(terms & words)


def search_facts(book: BookData, args: ToolArgs) -> Any:
    terms = _terms(args.query or "")
    scored = sorted(
        (
            (-_score(terms, f"{f.text} {' '.join(f.keywords)}"), i, f)
            for i, f in enumerate(book.facts)
        ),
        key=lambda t: (t[0], t[1]),
    )
    hits = [{"id": f.id, "text": f.text} for s, _, f in scored if s < 0][: _limit(args)]
    return {"query": args.query, "facts": hits}


def search_memories(book: BookData, args: ToolArgs) -> Any:
    terms = _terms(args.query or "")
    pool = [m for m in book.memories if args.chapter is None or m.chapter == args.chapter]
    scored = sorted(
        ((-_score(terms, m.text), i, m) for i, m in enumerate(pool)), key=lambda t: (t[0], t[1])
    )
    hits = [{"chapter": m.chapter, "text": m.text} for s, _, m in scored if s < 0][: _limit(args)]
    return {"query": args.query, "memories": hits}


def recent_adjustments(book: BookData, args: ToolArgs) -> Any:
    latest = book.adjustments[-_limit(args) :]
    return {"adjustments": [msgspec.to_builtins(a) for a in reversed(latest)]}


def _limit(args: ToolArgs) -> int:
    return min(max(args.limit or 5, 1), 20)


TOOLS: Mapping[str, Tool] = MappingProxyType(
    {
        t.name: t
        for t in (
            Tool(
                "chapter_cards",
                "cards (title, status, words, characters, gist) of chapters start..end, "
                f"at most {MAX_CARDS}",
                ("start", "end"),
                chapter_cards,
            ),
            Tool("route_summary", "the story route summary", (), route_summary),
            Tool("chapter_summary", "one chapter's full summary", ("chapter",), chapter_summary),
            Tool(
                "chapter_opening",
                "the opening lines of a written chapter",
                ("chapter",),
                _part("opening"),
            ),
            Tool(
                "chapter_ending",
                "the closing lines of a written chapter",
                ("chapter",),
                _part("ending"),
            ),
            Tool(
                "search_facts",
                "facts matching the keywords of query (limit, default 5)",
                ("query",),
                search_facts,
            ),
            Tool(
                "search_memories",
                "chapter memories matching query, optionally of one chapter",
                ("query",),
                search_memories,
            ),
            Tool(
                "recent_adjustments",
                "the latest changes made to the outline (limit, default 5)",
                (),
                recent_adjustments,
            ),
        )
    }
)
"""Every tool there is. None writes: a plan is the doctor's only output."""


def call_tool(book: BookData, name: str, args: Mapping[str, Any] | None) -> str:
    """The JSON text a tool answers; :class:`ToolError` for an unknown tool or bad args."""
    tool = TOOLS.get(name)
    if tool is None:
        raise ToolError(f"unknown tool {name!r}; the tools are {', '.join(TOOLS)} (all read-only)")
    try:
        parsed = ToolArgs.model_validate(dict(args or {}))
    except pydantic.ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise ToolError(f"bad arguments for {name}: {problems}") from None
    missing = [n for n in tool.needs if getattr(parsed, n) is None and n != "end"]
    if missing:
        raise ToolError(f"{name} needs {', '.join(missing)}")
    return _json.encode(tool.run(book, parsed)).decode()


def tool_list() -> str:
    return "\n".join(f"- {t.name}({', '.join(t.needs)}): {t.description}" for t in TOOLS.values())
