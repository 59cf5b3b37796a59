"""Every schema error of a scenario file, not only the first: msgspec stops at the first
mistake it meets, so the file is converted again one section at a time (each ``[[roles]]``
entry, each ``[actions.NAME]`` table, each other top-level table), and each section's first
mistake is reported at its place in the whole file (``$.roles[2].watch``).

Sections convert independently: no rule of the schema's types spans two tables (rules that
do are checked after decoding, by ``_load``'s problems, which report every one already).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec

from ._errors import explain_validation_error
from ._types import ScenarioDoc

# A [scenario] table that converts, so that another section is converted on its own.
_STAND_IN_INFO = {"name": "sections"}
# Tables whose entries are checked one by one (a name for each, the whole path kept).
_KEYED = frozenset({"actions", "prices", "mcp"})


def schema_errors(raw: dict[str, Any], first: msgspec.ValidationError) -> list[str]:
    """What is wrong with ``raw`` (a decoded TOML file that ``ScenarioDoc`` refused with
    ``first``), one explained error per section that has one, in the file's order."""
    found = [error for part, rewrite in _sections(raw) if (error := _error(part, rewrite))]
    # Converting in parts reports what the whole did, and more; should it ever find nothing,
    # the whole's own error is still the truth.
    return found or [explain_validation_error(first, raw, ScenarioDoc)]


def _sections(raw: dict[str, Any]) -> Iterator[tuple[dict[str, Any], tuple[str, str] | None]]:
    """Each part of ``raw`` as a document of its own, with the path rewrite its errors need
    (a list entry is converted as entry 0 of a list of one)."""
    if "scenario" not in raw:
        yield {}, None  # its one error: the missing [scenario] table
    for key, value in raw.items():
        base = {} if key == "scenario" else {"scenario": _STAND_IN_INFO}
        if key in _KEYED and isinstance(value, dict):
            for name, entry in value.items():
                yield {**base, key: {name: entry}}, None
        elif isinstance(value, list) and key != "scenario":
            for i, entry in enumerate(value):
                yield {**base, key: [entry]}, (f"`$.{key}[0]", f"`$.{key}[{i}]")
        else:
            yield {**base, key: value}, None


def _error(part: dict[str, Any], rewrite: tuple[str, str] | None) -> str | None:
    try:
        msgspec.convert(part, type=ScenarioDoc)
    except msgspec.ValidationError as error:
        text = explain_validation_error(error, part, ScenarioDoc)
        return text.replace(*rewrite) if rewrite else text
    return None
