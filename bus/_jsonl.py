"""Append-only JSON-lines files, written through msgspec and flushed per line.

Every record a run keeps (events, cost ledger lines) goes through :class:`JsonlWriter`, so a
run killed at any moment keeps every line it finished writing; at most the last line is
torn, and :func:`read_jsonl` drops a torn last line instead of failing.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

import msgspec

T = TypeVar("T")

_encoder = msgspec.json.Encoder(decimal_format="string")


def encode_json(value: Any) -> bytes:
    """JSON bytes with money (Decimal) as strings, the project's one encoding."""
    return _encoder.encode(value)


class JsonlWriter:
    """Appends one msgspec-encoded JSON object per line to ``path`` and flushes each line.

    Unbuffered on purpose: each ``write`` is one ``os.write`` of a whole line, so a crash
    never leaves a half-buffered record behind, only (at worst) a torn last line.
    """

    def __init__(self, path: Path):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._buf = bytearray()

    def write(self, record: Any) -> None:
        buf = self._buf
        buf.clear()
        _encoder.encode_into(record, buf)
        buf.extend(b"\n")
        os.write(self._fd, buf)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> JsonlWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_jsonl(path: Path, type: type[T] = Any) -> Iterator[T]:  # type: ignore[assignment]
    """Yields the records of a JSON-lines file; a torn (unterminated) last line is dropped."""
    decoder = msgspec.json.Decoder(type)
    with open(path, "rb") as f:
        data = f.read()
    lines = data.split(b"\n")
    # A complete file ends with "\n", so the last piece is empty; anything else is torn.
    for line in lines[:-1]:
        if line.strip():
            yield decoder.decode(line)
