"""Append-only JSON-lines files, written through msgspec, hash-chained and flushed per line.

Every record a run keeps (events, cost ledger lines) goes through :class:`JsonlWriter`, so a
run killed at any moment keeps every line it finished writing; at most the last line is
torn, and :func:`read_jsonl` drops a torn last line instead of failing.

Each line carries the hash of the line before it (``_prev``) and its own (``_h``), appended
as the object's last two fields (:mod:`bus._chain`), so ``sopbus verify`` can name an edited,
dropped or reordered line. :func:`read_jsonl` removes those two fields: readers see the
records exactly as they were written.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar, overload

import msgspec

from ._chain import GENESIS, last_hash, records_of, seal_into

T = TypeVar("T")

_encoder = msgspec.json.Encoder(decimal_format="string")


def encode_json(value: Any) -> bytes:
    """JSON bytes with money (Decimal) as strings, the project's one encoding."""
    return _encoder.encode(value)


class JsonlWriter:
    """Appends one msgspec-encoded JSON object per line to ``path`` and flushes each line.

    Unbuffered on purpose: each ``write`` is one ``os.write`` of a whole line, so a crash
    never leaves a half-buffered record behind, only (at worst) a torn last line.

    Each record must encode as a JSON object (a msgspec Struct or a dict): the chain fields
    are appended to it. Opening an existing file continues its chain from its last line; a
    torn last line left by a killed writer is cut off first (it was unreadable anyway, and
    appending to it would corrupt the next record).
    """

    def __init__(self, path: Path):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        self._buf = bytearray()
        self._prev = _resume(self._fd)

    def write(self, record: Any) -> None:
        buf = self._buf
        buf.clear()
        _encoder.encode_into(record, buf)
        self._prev = seal_into(buf, self._prev)
        os.write(self._fd, buf)

    @property
    def head(self) -> bytes:
        """The hash (``_h``) of the last line written: what the next line's ``_prev`` is."""
        return self._prev

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> JsonlWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@overload
def read_jsonl(path: Path) -> Iterator[Any]: ...
@overload
def read_jsonl(path: Path, type: type[T]) -> Iterator[T]: ...
def read_jsonl(path: Path, type: Any = Any) -> Iterator[Any]:
    """Yields the records of a JSON-lines file, chained or not, without the chain fields;
    a torn (unterminated) last line is dropped. Reading does not verify the chain
    (:func:`bus._chain.verify_file` does)."""
    decoder = msgspec.json.Decoder(type)
    with open(path, "rb") as f:
        data = f.read()
    for record in records_of(data):
        yield decoder.decode(record)


_TAIL_CHUNK = 1 << 16


def _resume(fd: int) -> bytes:
    """The ``_prev`` for the next line of the open file ``fd``; cuts off a torn last line."""
    size = os.fstat(fd).st_size
    tail, start = b"", size
    # Read backwards until the tail holds the whole last complete line (two newlines).
    while start > 0:
        end, start = start, max(0, start - _TAIL_CHUNK)
        tail = os.pread(fd, end - start, start) + tail
        cut = tail.rfind(b"\n")
        if cut > 0 and tail.rfind(b"\n", 0, cut) != -1:
            break
    cut = tail.rfind(b"\n")
    complete = size - (len(tail) - cut - 1)
    if complete < size:
        os.ftruncate(fd, complete)
    if cut == -1:
        return GENESIS
    return last_hash(tail[:cut].rsplit(b"\n", 1)[-1])
