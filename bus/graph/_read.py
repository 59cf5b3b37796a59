"""Follower graphs from a file: CSV with a ``follower,followee`` header, or JSON lines
``{"follower": ..., "followee": ...}``; agents by name.

A mistake names the file, the line and what is wrong (an unknown agent with the closest
names, a missing column, a line that is not JSON), so a graph of a million lines with one
typo is fixed at the line, not searched for.
"""

from __future__ import annotations

import csv
import itertools
import json
from array import array
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from .._errors import ConfigError
from .._util import did_you_mean
from ._csr import FollowGraph

COLUMNS = ("follower", "followee")


def read_graph(path: Path, names: Sequence[str] | Mapping[str, int]) -> FollowGraph:
    """The graph ``path`` describes over the agents ``names`` (node ``i`` is ``names[i]``;
    or a mapping name -> node). ``.jsonl``/``.ndjson`` files are JSON lines, any other a CSV.
    Repeated edges and self-follows are dropped."""
    index = names if isinstance(names, Mapping) else {name: i for i, name in enumerate(names)}
    pairs = _jsonl(path) if path.suffix in (".jsonl", ".ndjson") else _csv(path)
    follows: list[set[int]] = [set() for _ in range(len(index))]
    for line, follower, followee in pairs:
        a, b = _node(path, line, follower, index), _node(path, line, followee, index)
        if a != b:
            follows[a].add(b)
    off, to = array("q", [0]), array("i")
    for targets in follows:
        to.extend(sorted(targets))
        off.append(len(to))
    return FollowGraph(len(index), off, to)


def _node(path: Path, line: int, name: str, index: Mapping[str, int]) -> int:
    try:
        return index[name]
    except KeyError:
        shown = ", ".join(itertools.islice(index, 5)) + (", ..." if len(index) > 5 else "")
        # A population's names say their own close ones (``Person-17``): a difflib search
        # over a million names would take seconds for one typo.
        suggest = getattr(index, "did_you_mean", None)
        close = suggest(name) if suggest is not None else did_you_mean(name, index)
        raise ConfigError(
            f"{path}:{line}: unknown agent {name!r}: no agent of that name ({shown})"
            f"{close}; fix the name or add the agent"
        ) from None


def _csv(path: Path) -> Iterator[tuple[int, str, str]]:
    with _opened(path) as f:
        rows = csv.reader(f)
        header = [h.strip() for h in next(rows, [])]
        if any(c not in header for c in COLUMNS):
            raise ConfigError(
                f"{path}:1: expected a header with columns follower,followee, got "
                f"{','.join(header) or 'an empty file'}; put `follower,followee` on line 1"
            )
        a, b = header.index(COLUMNS[0]), header.index(COLUMNS[1])
        for row in rows:
            if not row or not any(cell.strip() for cell in row):
                continue
            if len(row) <= max(a, b):
                raise ConfigError(
                    f"{path}:{rows.line_num}: expected {len(header)} columns "
                    f"({','.join(header)}), got {len(row)}"
                )
            yield rows.line_num, row[a].strip(), row[b].strip()


def _jsonl(path: Path) -> Iterator[tuple[int, str, str]]:
    with _opened(path) as f:
        for line, text in enumerate(f, 1):
            if not text.strip():
                continue
            try:
                row = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ConfigError(f"{path}:{line}: not a JSON object: {exc.msg}") from None
            if not isinstance(row, dict) or any(not isinstance(row.get(c), str) for c in COLUMNS):
                raise ConfigError(
                    f'{path}:{line}: expected {{"follower": "<name>", "followee": "<name>"}}, '
                    f"got {text.strip()[:80]}"
                )
            yield line, row["follower"], row["followee"]


def _opened(path: Path):  # type: ignore[no-untyped-def]
    try:
        return path.open(encoding="utf-8", newline="")
    except OSError as exc:
        raise ConfigError(f"cannot read the graph file {path}: {exc.strerror}") from None
