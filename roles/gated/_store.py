"""The gated writer's story store, the chapter outline, and the retrieval planner.

A story store is a directory::

    settings.toml   [[setting]] id, title, text                      (fact evidence)
    canon.toml      [[card]] id, entity, text, forbid = [regex, ...] (fact evidence)
    ledger.toml     [[state]] id, entity, as_of, text, forbid = [...] (fact evidence: the
                    state of things as of the chapter before)
    confirmed/*.md  confirmed chapter text, one item per paragraph   (fact evidence)
    scenes/*.md     past scenes, one item per paragraph               (prose evidence)

Fact evidence says what must be *written correctly*; prose evidence shows what to *write
alike* (voice, rhythm, hooks). ``forbid`` patterns are what contradicts a card: the detector
blocks a draft that matches one.

The planner is a program, not a model: it scores items by the outline's words they share,
fills a character budget (facts first, prose after, each with its share) and writes a
manifest whose items are sorted by id and which carries its own SHA-256, so the same
outline and store always give the same bytes.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

import msgspec

from sopbus.bus import ConfigError, read_user_text, read_user_toml

Kind = Literal["fact", "prose"]


class Item(msgspec.Struct, frozen=True, kw_only=True):
    """One piece of evidence. ``forbid`` holds patterns that contradict it (canon, state)."""

    id: str
    kind: Kind
    source: str
    text: str
    forbid: tuple[str, ...] = ()


class Point(msgspec.Struct, frozen=True, kw_only=True):
    """An outline entry: an id, what happens, and the words a draft must contain for it."""

    id: str
    text: str
    must: tuple[str, ...] = ()


class Contract(msgspec.Struct, frozen=True, kw_only=True):
    """The output contract: length bounds and patterns a chapter must not contain."""

    min_chars: int = 500
    max_chars: int = 6000
    forbid: tuple[str, ...] = ()


class Outline(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A confirmed chapter outline. ``hard_events`` are in story order (the timeline);
    ``beats`` may be adjusted by the writer; the rest must all be in the chapter, hooks in
    its last paragraph."""

    id: str
    title: str
    pov: str = ""
    hard_events: tuple[Point, ...]
    beats: tuple[Point, ...] = ()
    foreshadowing: tuple[Point, ...] = ()
    hooks: tuple[Point, ...] = ()
    new_facts: tuple[Point, ...] = ()
    contract: Contract = Contract()

    def points(self) -> Iterable[Point]:
        yield from (
            *self.hard_events,
            *self.beats,
            *self.foreshadowing,
            *self.hooks,
            *self.new_facts,
        )

    def render(self) -> str:
        parts = [
            f"Chapter {self.id}: {self.title}"
            + (f" (point of view: {self.pov})" if self.pov else "")
        ]
        for label, points in (
            ("Hard events, in this order", self.hard_events),
            ("Beats (adjustable)", self.beats),
            ("Foreshadowing", self.foreshadowing),
            ("Hooks (in the last paragraph)", self.hooks),
            ("New facts this chapter declares", self.new_facts),
        ):
            if points:
                parts.append(f"{label}:\n" + "\n".join(f"- [{p.id}] {p.text}" for p in points))
        return "\n\n".join(parts)


def load_outline(path: Path) -> Outline:
    data = read_user_toml(path, "chapter outline")
    try:
        return msgspec.convert(data, Outline)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"cannot load the chapter outline {path}: {exc}") from None


class Store(msgspec.Struct, frozen=True):
    """All evidence items of a story store, by id."""

    items: dict[str, Item]

    def facts(self) -> list[Item]:
        return [i for i in self.items.values() if i.kind == "fact"]


def load_store(root: Path) -> Store:
    """Reads a story store directory (see the module docstring)."""
    if not root.is_dir():
        raise ConfigError(f"the story store {root} is not a directory; point [sop].store at one")
    items: list[Item] = []
    items += _toml_items(root, "settings.toml", "setting", lambda e: f"{e['title']}: {e['text']}")
    items += _toml_items(root, "canon.toml", "card", lambda e: f"{e['entity']}: {e['text']}")
    items += _toml_items(
        root, "ledger.toml", "state", lambda e: f"{e['entity']} (as of {e['as_of']}): {e['text']}"
    )
    items += _text_items(root, "confirmed", "fact")
    items += _text_items(root, "scenes", "prose")
    by_id: dict[str, Item] = {}
    for item in items:
        if item.id in by_id:
            raise ConfigError(
                f"evidence id {item.id!r} appears twice in {root}; ids must be unique"
            )
        by_id[item.id] = item
    return Store(by_id)


def _toml_items(root: Path, name: str, table: str, text: object) -> list[Item]:
    path = root / name
    if not path.is_file():
        return []
    try:
        entries = read_user_toml(path, "story store file").get(table, [])
        return [
            Item(
                id=f"{table}:{e['id']}",
                kind="fact",
                source=name,
                text=text(e),  # type: ignore[operator]
                forbid=tuple(e.get("forbid", ())),
            )
            for e in entries
        ]
    except (KeyError, TypeError) as exc:
        raise ConfigError(
            f"cannot read [[{table}]] entries of {path}: {exc!r}; each needs the "
            f"fields the story store docs name"
        ) from None


def _text_items(root: Path, folder: str, kind: Kind) -> list[Item]:
    items = []
    for path in sorted((root / folder).glob("*.md")):
        paragraphs = [
            p.strip() for p in read_user_text(path, "story store file").split("\n\n") if p.strip()
        ]
        items += [
            Item(id=f"{folder}:{path.stem}#p{n}", kind=kind, source=f"{folder}/{path.name}", text=p)
            for n, p in enumerate(paragraphs, 1)
        ]
    return items


# -- planning -----------------------------------------------------------------------------

_WORD = re.compile(r"[a-z][a-z'-]{3,}")
_STOP = frozenset(
    "that this with from they their there then than into when what which while "
    "were have been will would could should about after before over under again "
    "only also just very more most some such each other finds".split()
)


def terms(text: str) -> frozenset[str]:
    """The content words of ``text`` (lowercase, four letters or more, no stopwords)."""
    return frozenset(w for w in _WORD.findall(text.lower()) if w not in _STOP)


class Selected(msgspec.Struct, frozen=True):
    id: str
    kind: Kind
    source: str
    chars: int
    sha256: str


class Manifest(msgspec.Struct, frozen=True, kw_only=True):
    """What the writer gets to see: the items (sorted by id), the budget and what was used,
    the evidence requests served so far, and ``revision`` (0, then one per request batch)."""

    sample: str
    revision: int
    budget_chars: int
    fact_share: float
    extra_chars_allowed: int
    extra_chars_used: int
    used_chars: int
    items: tuple[Selected, ...]
    requests: tuple[dict[str, str], ...] = ()


def _selected(item: Item) -> Selected:
    return Selected(
        item.id,
        item.kind,
        item.source,
        len(item.text),
        hashlib.sha256(item.text.encode()).hexdigest(),
    )


_FIRM = ("card:", "state:")  # canon and state: short, and what a draft most often gets wrong


def _ranked(candidates: Iterable[Item], wanted: frozenset[str]) -> list[Item]:
    """Items sharing words with ``wanted``, most shared first (canon and state cards ahead
    of others by two words), ties by id."""
    scored = [(len(terms(i.text) & wanted), i) for i in candidates]
    scored = [(n + 2 * i.id.startswith(_FIRM), i) for n, i in scored if n > 0]
    return [i for _, i in sorted(scored, key=lambda s: (-s[0], s[1].id))]


def plan(store: Store, outline: Outline, *, budget_chars: int, fact_share: float) -> Manifest:
    """The first manifest for ``outline``: best-scoring facts within ``fact_share`` of the
    budget, then best-scoring prose within the rest."""
    wanted = terms(
        " ".join(f"{p.text} {' '.join(p.must)}" for p in outline.points())
        + f" {outline.title} {outline.pov}"
    )
    chosen: list[Item] = []
    for kind, cap in (
        ("fact", int(budget_chars * fact_share)),
        ("prose", budget_chars - int(budget_chars * fact_share)),
    ):
        chosen += _fill(_ranked((i for i in store.items.values() if i.kind == kind), wanted), cap)
    return Manifest(
        sample=outline.id,
        revision=0,
        budget_chars=budget_chars,
        fact_share=fact_share,
        extra_chars_allowed=int(budget_chars * 0.3),
        extra_chars_used=0,
        used_chars=sum(len(i.text) for i in chosen),
        items=tuple(sorted((_selected(i) for i in chosen), key=lambda s: s.id)),
    )


def _fill(ranked: list[Item], cap: int) -> list[Item]:
    out, used = [], 0
    for item in ranked:
        if used + len(item.text) <= cap:
            out.append(item)
            used += len(item.text)
    return out


def extend(store: Store, manifest: Manifest, requests: list[dict[str, str]]) -> Manifest:
    """The manifest with the requested evidence added: for each request (kind, query) the
    best-scoring items not yet selected, while the extra characters stay within
    ``extra_chars_allowed`` (30% of the budget) for the whole sample."""
    have = {s.id for s in manifest.items}
    extra = manifest.extra_chars_used
    added: list[Item] = []
    for request in requests:
        pool = (i for i in store.items.values() if i.kind == request["kind"] and i.id not in have)
        for item in _fill(
            _ranked(pool, terms(request["query"])), manifest.extra_chars_allowed - extra
        ):
            have.add(item.id)
            added.append(item)
            extra += len(item.text)
    items = sorted((*manifest.items, *(_selected(i) for i in added)), key=lambda s: s.id)
    return msgspec.structs.replace(
        manifest,
        revision=manifest.revision + 1,
        items=tuple(items),
        extra_chars_used=extra,
        used_chars=manifest.used_chars + sum(len(i.text) for i in added),
        requests=(*manifest.requests, *requests),
    )


_encoder = msgspec.json.Encoder(order="sorted")


def manifest_bytes(manifest: Manifest) -> bytes:
    """The manifest as written: sorted keys, items sorted by id, and its own ``sha256``
    (of the same document without that field), so the bytes are a function of the inputs."""
    body = msgspec.to_builtins(manifest)
    digest = hashlib.sha256(_encoder.encode(body)).hexdigest()
    return msgspec.json.format(_encoder.encode({**body, "sha256": digest}), indent=2) + b"\n"
