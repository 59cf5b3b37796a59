"""Tables that fit the terminal without cutting what tells their rows apart.

A table is a list of :class:`Field` (a column: header, one cell per row). Cells are never
cut. When the essential fields fit side by side, one line per row: they are shown, and the
others join, in their order, while there is room. When they do not, each row is stacked:
its key fields on a line of their own, then ``header value`` pairs, flowing onto as many
lines as the essential ones need (a pair is never split; the optional ones join while they
fit on the last line). ``sopbus runs`` showed the way; ``sweeps``, ``sweep-show`` and
``roles`` print through here too.

:func:`hanging` is the same promise for plain text: a labelled line wrapped at the
terminal's width, its continuation lines indented under the text, names never split.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple


def print_listing(
    rows: Sequence[Mapping[str, Any]], *, as_json: bool, empty: str, table: Callable[[], None]
) -> None:
    """What a listing command (``runs``, ``sweeps``) prints: its rows as a JSON array with
    ``--json``, else ``empty`` when there are none, else its ``table``."""
    if as_json:
        import json

        print(json.dumps(rows, indent=2))
    elif not rows:
        print(empty)
    else:
        table()


class Field(NamedTuple):
    """A column: its header, its cells (one per row, plain text), whether it is always
    shown, and whether it is right-aligned (numbers, money)."""

    header: str
    cells: list[str]
    essential: bool = True
    right: bool = False


def print_fitted(
    out: Any, fields: Sequence[Field], styles: Mapping[str, str] | None = None, key: int = 1
) -> None:
    """Print ``fields`` on ``out`` (a rich Console) as the module docstring says; the first
    ``key`` fields head a stacked row. ``styles`` maps a cell's text to its rich style."""
    from rich.cells import cell_len

    widths = [max(cell_len(f.header), *map(cell_len, f.cells), 0) for f in fields]
    essential = [w for w, f in zip(widths, fields, strict=True) if f.essential]
    # Two spaces between columns; one when that is what lets the essential ones fit.
    gap = next((g for g in (2, 1) if sum(essential) + g * (len(essential) - 1) <= out.width), 0)
    if gap:
        _print_columns(out, fields, widths, gap, styles or {})
    else:
        _print_stacked(out, fields, key, styles or {})


def _print_columns(
    out: Any, fields: Sequence[Field], widths: list[int], gap: int, styles: Mapping[str, str]
) -> None:
    """One line per row: the essential columns, then the others while they fit."""
    from rich.table import Table
    from rich.text import Text

    # The essential columns are counted first, wherever they stand; the others then take
    # what is left, in their order.
    used = sum(w + gap for w, f in zip(widths, fields, strict=True) if f.essential) - gap
    joining: set[int] = set()
    for n, (field, width) in enumerate(zip(fields, widths, strict=True)):
        if not field.essential and used + gap + width <= out.width:
            joining.add(n)
            used += gap + width
    chosen = [f for n, f in enumerate(fields) if f.essential or n in joining]
    table = Table(
        box=None, pad_edge=False, header_style="bold", padding=(0, gap // 2, 0, gap - gap // 2)
    )
    for field in chosen:
        table.add_column(field.header, no_wrap=True, justify="right" if field.right else "left")
    for i in range(len(fields[0].cells) if fields else 0):
        table.add_row(*(Text(f.cells[i], style=styles.get(f.cells[i], "")) for f in chosen))
    out.print(table)


def _print_stacked(out: Any, fields: Sequence[Field], key: int, styles: Mapping[str, str]) -> None:
    """Each row: its key fields on one line (an id longer than the terminal passes its edge
    whole), then its other fields as ``header value`` pairs flowing under it. An optional
    field joins only if it fits on the last line of every row, so that rows read alike."""
    from rich.text import Text

    rows = range(len(fields[0].cells) if fields else 0)
    shown = [f for f in fields[key:] if f.essential]
    for field in fields[key:]:
        if not field.essential:
            trial = [f for f in fields[key:] if f in shown or f is field]
            if all(_flow(trial, i, out.width, styles, field) is not None for i in rows):
                shown.append(field)
    shown.sort(key=list(fields).index)
    for i in rows:
        first = fields[0].cells[i]
        keys = "  ".join(cell for f in fields[:key] if (cell := f.cells[i]))
        head = Text(_wrapped(keys, out.width, "", "    "))
        head.stylize("bold", 0, len(first))
        out.print(head, overflow="ignore", crop=False)
        for line in _flow(shown, i, out.width, styles) or ():
            out.print(line, overflow="ignore", crop=False)


def _flow(
    fields: Sequence[Field],
    i: int,
    width: int,
    styles: Mapping[str, str],
    joining: Field | None = None,
) -> list[Any] | None:
    """Row ``i``'s ``header value`` pairs, indented two spaces, as lines of ``width``; a
    pair too long for a line of its own wraps at its spaces, indented further. ``None``
    if the field ``joining`` would need a line of its own."""
    from rich.text import Text

    lines = [Text("  ")]
    for field in fields:
        pair = Text(f"{field.header} ")
        pair.append(field.cells[i], style=styles.get(field.cells[i], ""))
        if len(lines[-1]) > 2 and len(lines[-1]) + 2 + len(pair) > width:
            if field is joining:
                return None
            lines.append(Text("  "))
        if len(lines[-1]) > 2:
            lines[-1].append("  ")
        if 2 + len(pair) > width:
            if field is joining:
                return None
            lines[-1] = Text(_wrapped(pair.plain, width, "  ", "    "))
            lines.append(Text("  "))
            continue
        lines[-1].append_text(pair)
    return [line for line in lines if len(line) > 2]


def _wrapped(text: str, width: int, first: str, later: str) -> str:
    import textwrap

    return textwrap.fill(
        text,
        width=width,
        initial_indent=first,
        subsequent_indent=later,
        break_long_words=False,
        break_on_hyphens=False,
    )


def hanging(label: str, text: str, width: int) -> str:
    """``label`` then ``text`` wrapped at ``width`` with its later lines indented under the
    text's start; a word longer than the room passes the edge whole (never split). A label
    wider than half the line (a role with a long profile) gets a line of its own, and the
    text goes under it, indented."""
    if len(label) <= width // 2:
        return _wrapped(text, width, label, " " * len(label))
    indent = label[: len(label) - len(label.lstrip())]
    head = _wrapped(label.strip(), width, indent, indent + "  ")
    return head + "\n" + _wrapped(text, width, indent + "    ", indent + "    ")
