"""What the book writer's workers know besides the board: the scenario's knowledge notes
(material to gather) and the author's policies (rules put into every matching prompt).

Both are TOML files shipped with the scenario::

    # notes.toml
    [[note]]
    title = "The Stone Monkey"
    keywords = ["stone monkey", "flower-fruit mountain"]
    text = "Born from a stone egg on ..."

    # policies.toml
    [[policy]]
    id = "voice"
    headings = ["*"]            # glob patterns over the heading, case-insensitive
    text = "Plain modern English; no archaic pastiche."
"""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path
from typing import TypeVar

import msgspec

from ._data import load_as

T = TypeVar("T")


class Note(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    title: str
    keywords: tuple[str, ...]
    text: str


class Policy(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    id: str
    text: str
    headings: tuple[str, ...] = ("*",)

    def applies_to(self, heading: str) -> bool:
        name = heading.lower()
        return any(fnmatch.fnmatchcase(name, pattern.lower()) for pattern in self.headings)


class _NotesFile(msgspec.Struct, forbid_unknown_fields=True):
    note: tuple[Note, ...] = ()


class _PoliciesFile(msgspec.Struct, forbid_unknown_fields=True):
    policy: tuple[Policy, ...] = ()


def load_notes(path: Path) -> tuple[Note, ...]:
    """The ``[[note]]`` entries of ``path``; a :class:`sopbus.bus.ConfigError` names the file and
    the entry of any mistake."""
    return _load(path, _NotesFile).note


def load_policies(path: Path) -> tuple[Policy, ...]:
    return _load(path, _PoliciesFile).policy


def _load(path: Path, kind: type[T]) -> T:
    return load_as(path, kind, "data file named in [sop]")


def policies_for(policies: tuple[Policy, ...], heading: str) -> tuple[Policy, ...]:
    """The policies whose heading patterns match ``heading`` (a subheading's key
    ``"Chapter 3 / The Cave"`` matches ``"Chapter 3*"``), in file order."""
    return tuple(p for p in policies if p.applies_to(heading))


def matching_notes(notes: tuple[Note, ...], query: str, limit: int) -> tuple[Note, ...]:
    """The notes with the most keywords found in ``query`` (whole words, any case), best
    first, ties in file order; notes with no keyword found are left out."""
    text = " " + " ".join(re.findall(r"[a-z0-9'-]+", query.lower())) + " "
    scored = []
    for i, note in enumerate(notes):
        hits = sum(1 for k in note.keywords if f" {' '.join(k.lower().split())} " in text)
        if hits:
            scored.append((-hits, i, note))
    return tuple(note for _, _, note in sorted(scored)[:limit])


def policy_text(policies: tuple[Policy, ...]) -> str:
    if not policies:
        return "Author's policies for this heading: none."
    lines = "\n".join(f"- ({p.id}) {p.text}" for p in policies)
    return f"Author's policies for this heading (follow them):\n{lines}"
