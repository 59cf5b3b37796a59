"""A population's attributes from a file, one row an agent: CSV, JSONL or Parquet.

A column whose every value is a whole number becomes an int column, one of numbers a float
column, anything else a column of interned text. A bad row is a
:class:`~sopbus.bus.ConfigError` naming the file, the row (1 is the first agent) and the
column.
"""

from __future__ import annotations

import csv
import json
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .._errors import ConfigError
from ._table import AgentTable, Choices, Column

PARQUET_EXTRA = "parquet"


def table_from_file(name: str, count: int, path: Path, *, where: str) -> AgentTable:
    """The first ``count`` rows of the file at ``path`` as ``name``'s agents."""
    if not path.is_file():
        raise ConfigError(
            f"{where}.attributes_file: no file {path}; give a CSV, JSONL or Parquet file"
        )
    suffix = path.suffix.lower()
    if suffix == ".csv":
        rows: Iterator[dict[str, Any]] = _csv_rows(path)
    elif suffix in (".jsonl", ".ndjson"):
        rows = _jsonl_rows(path)
    elif suffix == ".parquet":
        rows = _parquet_rows(path, where)
    else:
        raise ConfigError(
            f"{where}.attributes_file: {path} is not .csv, .jsonl or .parquet; convert it to one"
        )
    values: dict[str, list[Any]] = {}
    seen = 0
    for n, row in enumerate(rows, start=1):
        if n > count:
            break
        _check_row(row, values, path, n)
        for key, value in row.items():
            values.setdefault(key, []).append(value)
        seen = n
    if seen < count:
        raise ConfigError(
            f"{where}.count: {path} has {seen} rows, but count = {count}; set count = {seen} "
            f"or give a file with a row for each agent"
        )
    return AgentTable(name, count, {key: _column(v) for key, v in values.items()})


def _check_row(row: dict[str, Any], values: dict[str, list[Any]], path: Path, n: int) -> None:
    for key, value in row.items():
        if value is None or isinstance(value, (dict, list)):
            kind = "no value" if value is None else "a nested value"
            raise ConfigError(
                f"{path}: row {n}, column {key!r}: {kind}; give each agent a number or a text "
                f"in every column"
            )
    if values and set(row) != set(values):
        missing = sorted(set(values) - set(row)) or sorted(set(row) - set(values))
        raise ConfigError(
            f"{path}: row {n}, column {missing[0]!r}: the row's columns differ from row 1's "
            f"({', '.join(values)}); give every row the same columns"
        )


def _csv_rows(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if not header:
            raise ConfigError(f"{path}: row 0: no header row; the first line names the columns")
        for n, fields in enumerate(reader, start=1):
            if len(fields) != len(header):
                col = header[len(fields)] if len(fields) < len(header) else f"#{len(fields)}"
                raise ConfigError(
                    f"{path}: row {n}, column {col!r}: {len(fields)} fields where the header "
                    f"has {len(header)}; give every row one field per column"
                )
            yield {key: _number(text) for key, text in zip(header, fields, strict=True)}


def _jsonl_rows(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ConfigError(
                    f"{path}: row {n}, column {exc.colno}: not JSON ({exc.msg}); write one "
                    f"JSON object a line"
                ) from None
            if not isinstance(row, dict):
                raise ConfigError(f"{path}: row {n}: not a JSON object; write one object a line")
            yield row


def _parquet_rows(path: Path, where: str) -> Iterator[dict[str, Any]]:
    try:
        # Lazily, and only here: Parquet is the one format that needs a library.
        import pyarrow.parquet as pq  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        raise ConfigError(
            f"{where}.attributes_file: reading {path} needs pyarrow; install it with "
            f"pip install 'sopbus[{PARQUET_EXTRA}]', or give a CSV or JSONL file"
        ) from None
    for batch in pq.ParquetFile(path).iter_batches():
        yield from batch.to_pylist()


def _number(text: str) -> Any:
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def _column(values: list[Any]) -> Column:
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return array("q", values)
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return array("d", values)
    import sys

    codes: dict[Any, int] = {}
    texts = [str(v) for v in values]
    found = array("I", [codes.setdefault(sys.intern(t), len(codes)) for t in texts])
    return Choices(list(codes), found)
