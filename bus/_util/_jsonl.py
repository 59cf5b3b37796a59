"""Append-only JSON-lines files, written through msgspec in sealed, hash-chained batches.

Every record a run keeps (events, cost ledger lines, answers, receipts) goes through
:class:`JsonlWriter`. A batch of records (one, or the messages a round published) is encoded
in one call, sealed once (:mod:`sopbus.bus._chain`) and written with one ``os.write``, so a run
killed at any moment keeps every batch it finished writing; at most the last batch is cut
short, and :func:`read_jsonl` drops a torn last line instead of failing.

:func:`read_jsonl` removes the chain fields: readers see the records exactly as they were
written.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar, overload

import msgspec

from .._chain import GENESIS, line_hash, open_tail, records_of, seal_batch

T = TypeVar("T")

_encoder = msgspec.json.Encoder(decimal_format="string")


def encode_json(value: Any) -> bytes:
    """JSON bytes with money (Decimal) as strings, the project's one encoding."""
    return _encoder.encode(value)


class JsonlWriter:
    """Appends msgspec-encoded JSON objects to ``path``, one per line, in sealed batches.

    Flush policy: nothing is buffered here. :meth:`write` writes one record and
    :meth:`write_all` a batch of records, each with a single ``os.write`` of whole lines
    ending in the batch's seal, before it returns; so a crash leaves every earlier batch
    complete and sealed, and at worst the batch being written cut short. (The caller decides
    what a batch is: the run store makes one of the messages of a publish.)

    Each record must encode as a JSON object (a msgspec Struct or a dict); the seal is
    appended to the last one of a batch. Opening an existing file continues its chain from
    its last seal; a torn last line left by a killed writer is cut off first (it was
    unreadable anyway, and appending to it would corrupt the next record), and complete
    lines after the last seal are covered by the next one.
    """

    scrub: Callable[[bytes], bytes] | None = None
    """Rewrites each encoded record before it is sealed (the run store blanks credentials
    with it); ``None`` writes records as encoded."""

    def __init__(self, path: Path):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        self._prev, self._carried = _resume(self._fd)

    def write(self, record: Any) -> None:
        """Appends ``record`` as a batch of its own."""
        self.write_all((record,))

    def write_all(self, records: Sequence[Any]) -> None:
        """Appends ``records`` (in order) as one batch: one seal, one ``os.write``."""
        if not records:
            return
        data = _encoder.encode_lines(records)
        if self.scrub is not None:
            data = self.scrub(data)
        seal, self._prev = seal_batch(data, self._prev, self._carried)
        self._carried = []
        _write(self._fd, memoryview(data)[:-2], seal)

    @property
    def head(self) -> bytes:
        """The hash (``_h``) of the last batch written: what the next seal builds on."""
        return self._prev

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> JsonlWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _write(fd: int, *parts: bytes | memoryview) -> None:
    """Writes ``parts`` whole, as one ``writev`` unless the kernel takes less (a full disk)."""
    pending = [memoryview(p) for p in parts]
    while pending:
        done = os.writev(fd, pending)
        while pending and done >= len(pending[0]):
            done -= len(pending.pop(0))
        if pending:
            pending[0] = pending[0][done:]


@overload
def read_jsonl(path: Path) -> Iterator[Any]: ...
@overload
def read_jsonl(path: Path, type: type[T]) -> Iterator[T]: ...
def read_jsonl(path: Path, type: Any = Any) -> Iterator[Any]:
    """Yields the records of a JSON-lines file, chained or not, without the chain fields;
    a torn (unterminated) last line is dropped. Reading does not verify the chain
    (:func:`sopbus.bus._chain.verify_file` does)."""
    decoder = msgspec.json.Decoder(type)
    with open(path, "rb") as f:
        data = f.read()
    for record in records_of(data):
        yield decoder.decode(record)


_TAIL_CHUNK = 1 << 16


def _resume(fd: int) -> tuple[bytes, list[bytes]]:
    """The head hash for the next batch of the open file ``fd`` and the complete lines after
    its last seal; cuts off a torn last line."""
    size = os.fstat(fd).st_size
    tail, start, found = b"", size, None
    # Read backwards until the tail holds a whole sealed line, or the whole file.
    while start > 0 and found is None:
        end, start = start, max(0, start - _TAIL_CHUNK)
        tail = os.pread(fd, end - start, start) + tail
        first = tail.find(b"\n") + 1 if start else 0
        if start == 0 or first:
            found = open_tail(tail[first : tail.rfind(b"\n") + 1])
    cut = tail.rfind(b"\n")
    if cut + 1 < len(tail):
        os.ftruncate(fd, size - (len(tail) - cut - 1))
    if found is not None:
        return found
    lines = tail[:cut].split(b"\n") if cut >= 0 else []
    # A file written before chaining continues from the hash of its last line.
    return (line_hash(lines[-1]) if lines else GENESIS), []
