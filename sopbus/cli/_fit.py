"""Tables that fit the terminal without cutting what tells their rows apart.

A table is a list of :class:`Field` (a column: header, one cell per row). Cells are never
cut, and no field is left out: what a wide terminal shows, a narrow one shows too. When
every field fits side by side, one line per row. When not, each row is stacked: its key
fields on a line of their own, then ``header value`` pairs flowing onto as many lines as
they need (a pair is never split), the essential ones first. ``sopbus runs`` showed the
way; ``sweeps``, ``sweep-show`` and ``roles`` print through here too; :func:`print_boxed`
keeps rich's bordered table (``show``) to the same promise.

:func:`hanging` is the same promise for plain text: a labelled line wrapped at the
terminal's width, its continuation lines indented under the text, names never split.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from sopbus.bus import wrap_text as _wrapped


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
    """A column: its header, its cells (one per row, plain text), whether it comes first
    when a row is stacked, and whether it is right-aligned (numbers, money)."""

    header: str
    cells: list[str]
    essential: bool = True
    right: bool = False
    wraps: bool = False  # a boxed table may wrap its cells at their spaces


def print_fitted(
    out: Any, fields: Sequence[Field], styles: Mapping[str, str] | None = None, key: int = 1
) -> None:
    """Print ``fields`` on ``out`` (a rich Console) as the module docstring says; the first
    ``key`` fields head a stacked row. ``styles`` maps a cell's text to its rich style."""
    from rich.cells import cell_len

    widths = [max(cell_len(f.header), *map(cell_len, f.cells), 0) for f in fields]
    # Two spaces between columns; one when that is what lets them all fit.
    gap = next((g for g in (2, 1) if sum(widths) + g * (len(widths) - 1) <= out.width), 0)
    if gap:
        _print_columns(out, fields, gap, styles or {})
    else:
        _print_stacked(out, fields, key, styles or {})


def print_boxed(
    out: Any, fields: Sequence[Field], styles: Mapping[str, str] | None = None, key: int = 0
) -> None:
    """Print ``fields`` on ``out`` as a rich table with borders, every cell whole: on one
    line each when they fit, else with the fields that wrap (``wraps``) wrapped at their
    spaces, never inside a word. When even that does not fit, each row is stacked as
    :func:`print_fitted` stacks it, under its field number ``key``."""
    from rich.cells import cell_len

    room = out.width - 3 * len(fields) - 1  # a border and a space each side of each cell
    natural = [max(cell_len(f.header), *map(cell_len, f.cells), 0) for f in fields]
    least = [_longest_word(f) if f.wraps else w for f, w in zip(fields, natural, strict=True)]
    if sum(least) > room:
        order = [fields[key], *(f for n, f in enumerate(fields) if n != key)]
        _print_stacked(out, order, 1, styles or {})
        return
    widths = list(least)
    for n in range(len(fields)):  # what is left goes to the wrapping ones, in order
        widths[n] += min(natural[n] - least[n], room - sum(widths))
    _print_box(out, fields, widths, styles or {})


def _longest_word(field: Field) -> int:
    from rich.cells import cell_len

    return max(
        (cell_len(w) for text in (field.header, *field.cells) for w in text.split()), default=0
    )


def _print_box(
    out: Any, fields: Sequence[Field], widths: list[int], styles: Mapping[str, str]
) -> None:
    from rich.table import Table
    from rich.text import Text

    table = Table()
    for field, width in zip(fields, widths, strict=True):
        table.add_column(
            field.header,
            justify="right" if field.right else "left",
            width=width,
            no_wrap=not field.wraps,
            overflow="fold",  # never reached: the widths hold every word whole
        )
    for i in range(len(fields[0].cells) if fields else 0):
        table.add_row(*(Text(f.cells[i], style=styles.get(f.cells[i], "")) for f in fields))
    out.print(table)


def _print_columns(out: Any, fields: Sequence[Field], gap: int, styles: Mapping[str, str]) -> None:
    """One line per row, every field a column."""
    from rich.table import Table
    from rich.text import Text

    table = Table(
        box=None, pad_edge=False, header_style="bold", padding=(0, gap // 2, 0, gap - gap // 2)
    )
    for field in fields:
        table.add_column(field.header, no_wrap=True, justify="right" if field.right else "left")
    for i in range(len(fields[0].cells) if fields else 0):
        table.add_row(*(Text(f.cells[i], style=styles.get(f.cells[i], "")) for f in fields))
    out.print(table)


def _print_stacked(out: Any, fields: Sequence[Field], key: int, styles: Mapping[str, str]) -> None:
    """Each row: its key fields on one line (an id longer than the terminal passes its edge
    whole), then its other fields as ``header value`` pairs flowing under it, the
    essential ones first."""
    from rich.text import Text

    rest = sorted(fields[key:], key=lambda f: not f.essential)  # stable: in order otherwise
    for i in range(len(fields[0].cells) if fields else 0):
        first = fields[0].cells[i]
        keys = "  ".join(cell for f in fields[:key] if (cell := f.cells[i]))
        head = Text(_wrapped(keys, out.width, "", "    "))
        head.stylize("bold", 0, len(first))
        out.print(head, overflow="ignore", crop=False)
        for line in _flow(rest, i, out.width, styles):
            out.print(line, overflow="ignore", crop=False)


def _flow(fields: Sequence[Field], i: int, width: int, styles: Mapping[str, str]) -> list[Any]:
    """Row ``i``'s ``header value`` pairs, indented two spaces, as lines of ``width``; a
    pair too long for a line of its own wraps at its spaces, indented further."""
    from rich.text import Text

    lines = [Text("  ")]
    for field in fields:
        pair = Text(f"{field.header} ")
        pair.append(field.cells[i], style=styles.get(field.cells[i], ""))
        if len(lines[-1]) > 2 and len(lines[-1]) + 2 + len(pair) > width:
            lines.append(Text("  "))
        if len(lines[-1]) > 2:
            lines[-1].append("  ")
        if 2 + len(pair) > width:
            lines[-1] = Text(_wrapped(pair.plain, width, "  ", "    "))
            lines.append(Text("  "))
            continue
        lines[-1].append_text(pair)
    return [line for line in lines if len(line) > 2]


def wrapped(text: str, width: int, later: str = "    ") -> str:
    """``text`` wrapped at ``width``, its later lines indented by ``later``; names are never
    split, and a path longer than the line breaks after one of its ``/``."""
    return "\n".join(_wrapped(line, width, "", later) or line for line in text.split("\n"))


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
