"""How roles and actions talk to a model: the prompt text, the repair note, and the readable
rendering of a structured output. Plain functions of plain values, so a subclass that builds
its own prompt can reuse the parts it wants.
"""

from __future__ import annotations

import json
import re
import string
from collections.abc import Iterable, Mapping
from typing import Any

import pydantic
from pydantic import BaseModel

from sopbus.bus import Message


def system_text(*, name: str, profile: str, goal: str, constraints: str) -> str:
    """The role as the model should play it: who, what for, within which limits."""
    lines = [f"You are {name}, {profile}." if profile else f"You are {name}."]
    if goal:
        lines.append(f"Your goal: {goal}")
    if constraints:
        lines.append(f"Constraints: {constraints}")
    return "\n".join(lines)


def fill(template: str, values: Mapping[str, str]) -> str:
    """``$name`` placeholders filled from ``values``; anything else (braces, ``$5``) kept as
    written, because instructions often contain JSON or code examples."""
    return string.Template(template).safe_substitute(values)


def render_message(message: Message) -> str:
    """One message as context: a heading with what caused it and who sent it, then the text."""
    return f"### {message.cause_by} from {message.sent_from}\n{message.content}"


def task_text(*, action: str, instruction: str, context: Iterable[Message]) -> str:
    """The user turn of an action's prompt: the messages to work from, then the task."""
    parts = [render_message(m) for m in context]
    head = "## Context\n" + "\n\n".join(parts) + "\n\n" if parts else ""
    return f"{head}## Your task: {action}\n{instruction}".rstrip()


def schema_text(schema: Mapping[str, Any]) -> str:
    """The output schema written into the prompt, for ``output_mode="prompt"``."""
    return (
        "Answer with one JSON object, and nothing else, that fits this JSON schema:\n"
        + json.dumps(schema, ensure_ascii=False, separators=(",", ":"))
    )


def repair_text(error: str) -> str:
    """What the model is told after an answer that does not fit the output schema."""
    return (
        f"Your answer does not fit the required output:\n{error}\n"
        "Answer again with only the corrected JSON object."
    )


def describe_validation_error(error: pydantic.ValidationError, limit: int = 8) -> str:
    """A validation error as short lines: where, what was wrong, and what was there."""
    lines = []
    for e in error.errors(include_url=False)[:limit]:
        if e["type"] == "json_invalid":
            lines.append(f"- not valid JSON: {e['msg']}")
            continue
        loc = ".".join(str(part) for part in e["loc"]) or "(the whole answer)"
        got = _short(e.get("input"))
        lines.append(f"- at `{loc}`: {e['msg']}" + (f" (got {got})" if got else ""))
    more = error.error_count() - limit
    return "\n".join(lines + ([f"- ... and {more} more"] if more > 0 else []))


def _short(value: Any, width: int = 80) -> str:
    if isinstance(value, dict) and len(value) > 4:
        return ""  # a whole object: the location already says enough
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def render_output(output: BaseModel) -> str:
    """A structured output as readable Markdown: one section per field."""
    sections = []
    fields = type(output).model_fields
    for key, value in output.model_dump(mode="json").items():
        info = fields.get(key)
        title = (
            info.title if info is not None and info.title else key.replace("_", " ").capitalize()
        )
        sections.append(f"## {title}\n{render_value(value)}")
    return "\n\n".join(sections)


def render_value(value: Any) -> str:
    """A JSON value as Markdown: a list of objects as a table, other lists as bullets,
    objects as ``key: value`` bullets; paths and dunder names in text as code spans."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None:
        return "(none)"
    if isinstance(value, list):
        if value and all(isinstance(v, dict) for v in value):
            return _table(value)
        return "\n".join(f"- {_inline(v)}" for v in value) or "(none)"
    if isinstance(value, dict):
        return "\n".join(f"- {k}: {_inline(v)}" for k, v in value.items()) or "(none)"
    return code_spans(str(value))


def _inline(value: Any) -> str:
    if isinstance(value, (list, dict)):
        return f"`{json.dumps(value, ensure_ascii=False)}`"
    return render_value(value)


def _table(rows: list[dict[str, Any]]) -> str:
    """Rows of objects as a GFM table, one column per key (in order of first appearance)."""
    keys = list(dict.fromkeys(k for row in rows for k in row))
    cells = [[_cell(row.get(k, "")) for k in keys] for row in rows]
    lines = [keys, ["---"] * len(keys), *cells]
    return "\n".join("| " + " | ".join(line) + " |" for line in lines)


def _cell(value: Any) -> str:
    # A table row is one line, and a bare | would end the cell.
    return _inline(value).replace("\n", " ").replace("|", "\\|")


# Existing code (fenced blocks, `spans`) is kept as written; outside it, a word that is a
# path (`pkg/mod.py`, `rich==13.7`) or holds a dunder name (`__init__`) is code: CommonMark
# would read the underscores of `__init__` as bold.
_CODE = re.compile(r"(```.*?```|`[^`\n]*`)", re.S)
_WORD = re.compile(r"(?<![\w`])[\w./=-]*__\w+__[\w./-]*")
_PATH = re.compile(r"[\w.=-]*[A-Za-z][\w.=-]*(?:[/.=][\w.=-]+)+/?")


def code_spans(text: str) -> str:
    """``text`` with its bare paths and dunder names as Markdown code spans."""
    if _PATH.fullmatch(text) and not text.endswith("."):
        return f"`{text}`"
    parts = _CODE.split(text)
    parts[::2] = [_WORD.sub(_span, part) for part in parts[::2]]
    return "".join(parts)


def _span(found: re.Match[str]) -> str:
    word = found.group(0)
    core = word.rstrip(".-/")  # a full stop after a name ends the sentence, not the name
    return f"`{core}`{word[len(core) :]}"
