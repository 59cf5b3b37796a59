"""Hash-chained JSON lines: every line carries the hash of the line before it.

A chained line is the record's JSON object with two fields appended, always last and always
of fixed width::

    {"kind":"round_started","seq":3,...,"_prev":"<32 hex>","_h":"<32 hex>"}

``_prev`` is the ``_h`` of the previous line (:data:`GENESIS` on the first line) and ``_h``
is the first 128 bits of the SHA-256 of the line's bytes up to and including ``_prev``'s value (everything
before ``","_h":"``). So ``_h`` seals the record and its place in the file: an edited line
no longer matches its own ``_h``; a dropped or moved line breaks the next line's ``_prev``.
Both checks work on bytes, with no JSON parsing, so verifying a log is as fast as reading it.

What the chain does not do: it has no key, so someone who rewrites a line *and* recomputes
every hash after it goes unnoticed by the chain alone; :mod:`bus.store._verify` cross-checks the
files of a run against each other (the ledger against the events, the artifacts against
their recorded SHA-256) so that such a rewrite has to be done consistently in several places.
Dropping lines at the very end of a file is also invisible to the chain; the run's last
event (``run_ended``) and the cross-checks catch that for run logs.
"""

from __future__ import annotations

import re
from binascii import hexlify
from hashlib import sha256 as _sha256
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal



PREV_FIELD = "_prev"
HASH_FIELD = "_h"
CHAIN_FIELDS = frozenset({PREV_FIELD, HASH_FIELD})
HASH_HEX = 32
GENESIS = b"0" * HASH_HEX
"""The ``_prev`` of a file's first line."""

_PREV_KEY = b',"_prev":"'
_PREV_KEY_FIRST = b'"_prev":"'  # the record was an empty object: no comma before it
_H_KEY = b'","_h":"'
_TAIL = len(_H_KEY) + HASH_HEX + 2  # ","_h":"<hex>"}
_HEX = re.compile(rb"[0-9a-f]{%d}" % HASH_HEX)


def line_hash(data: bytes | bytearray) -> bytes:
    """The ``_h`` of a line whose bytes up to ``_prev``'s value are ``data`` (hex, ASCII)."""
    # SHA-256 (cut to 128 bits) rather than BLAKE2b: OpenSSL's is faster on short lines.
    return hexlify(_sha256(data).digest()[:HASH_HEX // 2])


def seal_into(buf: bytearray, prev: bytes) -> bytes:
    """Turns ``buf``, one encoded JSON object, into a chained line (with its newline) in
    place and returns its ``_h``. Raises :class:`TypeError` for anything but an object."""
    # On the hot path (every event of every run): in-place appends and one hash.
    if len(buf) < 2 or buf[-1] != 0x7D or buf[0] != 0x7B:  # "{" ... "}"
        raise TypeError(f"a chained JSON line must hold a JSON object, got {bytes(buf[:40])!r}; "
                        f"write a dict or a msgspec Struct")
    if len(buf) == 2:  # {}
        del buf[-1]
    else:
        buf[-1] = 0x2C  # the closing brace becomes the comma before "_prev"
    buf += _PREV_KEY_FIRST
    buf += prev
    digest = hexlify(_sha256(buf).digest()[:HASH_HEX // 2])
    buf += _H_KEY
    buf += digest
    buf += b'"}\n'
    return digest


def unseal(line: bytes) -> bytes | None:
    """The record's own JSON (the line without its chain fields), or ``None`` if ``line``
    (without its newline) is not chained."""
    split = split_line(line)
    if split is None:
        return None
    body, _, _ = split
    return body + b"}" if body != b"{" else b"{}"


def split_line(line: bytes) -> tuple[bytes, bytes, bytes] | None:
    """(record JSON without its closing brace, ``_prev``, ``_h``) of a chained line."""
    if len(line) < _TAIL + len(_PREV_KEY_FIRST) + HASH_HEX + 1 or not line.endswith(b'"}'):
        return None
    sealed, tail = line[:-_TAIL], line[-_TAIL:]
    if not tail.startswith(_H_KEY):
        return None
    prev = sealed[-HASH_HEX:]
    head = sealed[:-HASH_HEX]
    if head.endswith(_PREV_KEY):
        body = head[:-len(_PREV_KEY)]
    elif head == b"{" + _PREV_KEY_FIRST:
        body = b"{"
    else:
        return None
    return body, prev, tail[len(_H_KEY):-2]


def last_hash(line: bytes) -> bytes:
    """What the next line's ``_prev`` is after ``line`` (a complete line, no newline): its
    ``_h`` when chained; for a line written before chaining, the hash of its bytes."""
    split = split_line(line)
    if split is not None and _HEX.fullmatch(split[2]):
        return split[2]
    return line_hash(line)


# -- verification -----------------------------------------------------------------------

Problem = Literal["edited", "dropped", "reordered", "unchained", "torn"]


@dataclass(frozen=True)
class ChainBreak:
    """The first place where a chained file is not intact.

    ``line`` counts from 1. ``problem`` is ``edited`` (the line does not match its own
    hash), ``dropped`` (the line's ``_prev`` is no line's hash: a line before it is
    missing), ``reordered`` (its ``_prev`` is the hash of a line elsewhere in the file),
    ``unchained`` (no chain fields, or damaged ones) or ``torn`` (the last line has no
    newline: the writer was killed mid-line; the lines before it are intact).
    """

    path: Path
    line: int
    problem: Problem
    detail: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.problem}: {self.detail}"


@dataclass(frozen=True)
class ChainReport:
    """The verdict on one file: ``lines`` complete lines read, the first ``broken`` place
    (``None``: intact), ``torn`` when the last line was cut off, and the ``head`` hash
    (the ``_h`` of the last intact line; :data:`GENESIS` for an empty file)."""

    path: Path
    lines: int
    head: bytes
    broken: ChainBreak | None = None
    torn: ChainBreak | None = None

    @property
    def intact(self) -> bool:
        return self.broken is None


def verify_lines(path: Path, lines: Iterable[bytes]) -> tuple[int, bytes, ChainBreak | None]:
    """Checks complete lines (no newlines) in order: (count, head hash, first break)."""
    listed = list(lines)
    prev = GENESIS
    for number, line in enumerate(listed, 1):
        split = split_line(line)
        if split is None or not _HEX.fullmatch(split[1]) or not _HEX.fullmatch(split[2]):
            return len(listed), prev, ChainBreak(path, number, "unchained",
                                            "the line has no intact _prev/_h fields at its end")
        body, line_prev, digest = split
        if line_hash(line[:-_TAIL]) != digest:
            return len(listed), prev, ChainBreak(path, number, "edited",
                                            "the line does not match its own hash (_h)")
        if line_prev != prev:
            return len(listed), prev, _misplaced(path, number, line_prev, listed)
        prev = digest
    return len(listed), prev, None


def _misplaced(path: Path, number: int, line_prev: bytes, listed: list[bytes]) -> ChainBreak:
    where = "the start of the file" if number == 1 else f"line {number - 1}"
    for other, line in enumerate(listed, 1):
        split = split_line(line)
        if split is not None and split[2] == line_prev:
            return ChainBreak(path, number, "reordered",
                              f"the line follows {where}, but it was written after line {other}")
    return ChainBreak(path, number, "dropped",
                      f"the line that was written before this one is missing (after {where})")


def verify_file(path: Path) -> ChainReport:
    """The chain of one JSON-lines file (see :class:`ChainReport`)."""
    data = Path(path).read_bytes()
    pieces = data.split(b"\n")
    complete, last = pieces[:-1], pieces[-1]
    count, head, broken = verify_lines(path, complete)
    torn = None
    if last:
        torn = ChainBreak(path, len(complete) + 1, "torn",
                          f"the last line is cut off after {len(last)} bytes (the writer was "
                          f"stopped mid-line); the {len(complete)} lines before it are intact")
    return ChainReport(path=path, lines=count, head=head, broken=broken, torn=torn)


def records_of(data: bytes) -> Iterator[bytes]:
    """The records' own JSON of the complete lines in ``data``, chained or not; blank lines
    and a torn (unterminated) last line are skipped."""
    for line in data.split(b"\n")[:-1]:
        if not line.strip():
            continue
        body = unseal(line)
        yield line if body is None else body
