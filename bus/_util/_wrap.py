"""Text wrapped for a reader: the CLI's plain lines (sopbus.cli) and a run's progress lines
(sopbus._assemble) wrap the same way, so a name or a path is never split, whoever prints it."""

from __future__ import annotations

_KEEP = "\x00"  # stands for a space inside a `command` while a text is wrapped


def wrap_text(text: str, width: int, first: str = "", later: str = "    ") -> str:
    """One paragraph wrapped at ``width``: its first line starts with ``first``, later ones
    with ``later``; words and `commands` are never split, and a path longer than a line
    breaks after one of its ``/``."""
    import re
    import textwrap

    # A command in backquotes is one piece: a reader copies it whole from one line.
    text = re.sub(r"`[^`]*`", lambda m: m[0].replace(" ", _KEEP), text)
    lines = textwrap.wrap(
        text,
        width=width,
        initial_indent=first,
        subsequent_indent=later,
        break_long_words=False,
        break_on_hyphens=False,
    )
    for n, line in enumerate(lines):
        cut = _slash_before(line, width, later if n else first)
        if len(line) > width and cut:
            # A path longer than a line: broken after a slash, and the rest flows on.
            rest = " ".join([line[cut:], *(more.strip() for more in lines[n + 1 :])])
            lines = [*lines[:n], line[:cut], wrap_text(rest, width, later, later)]
            break
    return "\n".join(lines).replace(_KEEP, " ")


def _slash_before(line: str, width: int, indent: str) -> int:
    """Where ``line`` may break after a ``/`` within ``width`` (past its indent and a
    character of text), or 0."""
    return line.rfind("/", len(indent) + 1, width) + 1
