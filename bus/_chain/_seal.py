"""The chain's format: sealing a batch of JSON lines, and reading the seal of a line (the
format itself is described in :mod:`sopbus.bus._chain`)."""

from __future__ import annotations

import re
import sys
import zlib
from array import array
from binascii import hexlify
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from hashlib import sha256 as _sha256

PREV_FIELD = "_prev"
CHECKS_FIELD = "_c"
HASH_FIELD = "_h"
CHAIN_FIELDS = frozenset({PREV_FIELD, CHECKS_FIELD, HASH_FIELD})
HASH_HEX = 32
HINT_HEX = 8
CHECK_HEX = 4
GENESIS = b"0" * HASH_HEX
"""The ``_h`` before a file's first batch."""

_PREV_KEY = b',"_prev":"'
_PREV_KEY_FIRST = b'"_prev":"'  # the record was an empty object: no comma before it
_CHECKS_KEY = b'","_c":"'
_H_KEY = b'","_h":"'
_TAIL = len(_H_KEY) + HASH_HEX + 2  # ","_h":"<hex>"}
_HEX = re.compile(rb"[0-9a-f]*")
_UPPER = 1 if sys.byteorder == "little" else 0  # where the upper half of a 32-bit value is
_FEW = (
    16  # up to this many checks are formatted one by one; more go through arrays (faster in bulk)
)


def line_hash(data: bytes | bytearray) -> bytes:
    """The ``_h`` of a line in the one-line format of files written before batches
    (``data``: its bytes up to ``_prev``'s value); hex, ASCII."""
    return hexlify(_sha256(data).digest()[: HASH_HEX // 2])


def batch_hash(prev: bytes, data: bytes | bytearray | memoryview) -> bytes:
    """The ``_h`` of a batch whose bytes up to ``","_h":"`` are ``data``, after ``prev``."""
    h = _sha256(prev)
    h.update(data)
    return hexlify(h.digest()[: HASH_HEX // 2])


def checks(lines: Iterable[bytes | bytearray], own: int) -> bytes:
    """The ``_c`` value of a batch whose earlier lines (without newlines) are ``lines`` and
    whose sealed line's bytes before ``","_c":"`` have the Adler-32 ``own``: the check of each
    earlier line, then one over ``own`` and those checks (so that an edit of ``_c`` itself is
    told from an edit of a line it checks)."""
    earlier = hex_checks(map(zlib.adler32, lines))
    return earlier + own_check(earlier, own)


def hex_checks(values: Iterable[int]) -> bytes:
    """The upper 16 bits (the position-weighted sum) of each Adler-32, as 4 hex digits."""
    values = list(values)
    if len(values) <= _FEW:
        return b"".join([b"%04x" % (v >> 16) for v in values])
    halves = array("H", array("I", values).tobytes())[_UPPER::2]
    if sys.byteorder == "big":
        halves.byteswap()
    return halves.tobytes().hex().encode()


def own_check(earlier: bytes, own: int) -> bytes:
    return b"%04x" % (zlib.adler32(earlier, own) >> 16)


def check_values(field: bytes) -> list[bytes]:
    """``_c`` cut into the checks of the lines it covers."""
    return [field[i : i + CHECK_HEX] for i in range(0, len(field), CHECK_HEX)]


def seal_batch(data: bytes, prev: bytes, carried: Sequence[bytes] = ()) -> tuple[bytes, bytes]:
    """The seal of a batch: ``data`` is one or more encoded JSON objects, each ending in a
    newline, written after the batch whose ``_h`` is ``prev``; ``carried`` are complete lines
    already in the file after the last seal (a batch whose writer was stopped), which the
    seal covers too. Returns the bytes that replace the closing ``}`` and newline of
    ``data``'s last record, and the new ``_h``. A :class:`TypeError` when the last record
    is not a JSON object."""
    end = len(data) - 2
    last = data.rfind(b"\n", 0, end) + 1
    if end < 1 or data[end:] != b"}\n" or data[last] != 0x7B:  # "{" ... "}"
        raise TypeError(
            f"a chained JSON line must hold a JSON object, got {data[last : last + 40]!r}; "
            f"write a dict or a msgspec Struct"
        )
    head = memoryview(data)[:end]
    seal = bytearray(_PREV_KEY if end - last > 1 else _PREV_KEY_FIRST)
    seal += prev[:HINT_HEX]
    if last or carried:
        earlier = data.split(b"\n")[:-2] if last else []
        if carried:
            earlier = [*carried, *earlier]
        own = checks(earlier, zlib.adler32(seal, zlib.adler32(head[last:])))
        seal += _CHECKS_KEY
        seal += own
    h = _sha256(prev)
    for line in carried:
        h.update(line)
        h.update(b"\n")
    h.update(head)
    h.update(seal)
    digest = hexlify(h.digest()[: HASH_HEX // 2])
    seal += _H_KEY
    seal += digest
    seal += b'"}\n'
    return bytes(seal), digest


@dataclass(frozen=True)
class Seal:
    """The chain fields of a sealed line: ``body`` is the record's JSON without its closing
    brace; ``prev`` the ``_prev`` value (8 hex digits, or 32 in the one-line format),
    ``checks`` the ``_c`` value (``None`` when absent), ``hash`` the ``_h`` value,
    ``sealed`` the line's bytes that ``_h`` covers and ``own`` those before ``_c``."""

    body: bytes
    prev: bytes
    checks: bytes | None
    hash: bytes
    sealed: bytes
    own: bytes  # what the last check of ``_c`` covers: the line up to ``_c``

    @property
    def legacy(self) -> bool:
        """Written in the one-line format (a full ``_prev``, ``_h`` over the line alone)."""
        return len(self.prev) == HASH_HEX


def parse_seal(line: bytes) -> Seal | None:
    """The seal of ``line`` (no newline), or ``None`` if it carries no chain fields."""
    if len(line) < _TAIL + len(_PREV_KEY_FIRST) + HINT_HEX + 1 or not line.endswith(b'"}'):
        return None
    sealed, tail = line[:-_TAIL], line[-_TAIL:]
    if not tail.startswith(_H_KEY):
        return None
    digest = tail[len(_H_KEY) : -2]
    for width in (HINT_HEX, HASH_HEX):
        body = _before_prev(sealed, width)
        if body is not None and is_hex(sealed[-width:]):
            return Seal(body, sealed[-width:], None, digest, sealed, sealed)
    # "_c" holds hex digits only, so the last '","_c":"' is the seal's when there is one
    cut = sealed.rfind(_CHECKS_KEY)
    if cut >= 0:
        body = _before_prev(sealed[:cut], HINT_HEX)
        if body is not None:
            return Seal(
                body,
                sealed[cut - HINT_HEX : cut],
                sealed[cut + len(_CHECKS_KEY) :],
                digest,
                sealed,
                sealed[:cut],
            )
    return None


def _before_prev(head: bytes, width: int) -> bytes | None:
    """The record's JSON before ``,"_prev":"<width hex digits>`` at the end of ``head``."""
    key_at = len(head) - width
    if key_at <= 0:
        return None
    if head.endswith(_PREV_KEY, 0, key_at):
        return head[: key_at - len(_PREV_KEY)]
    if head[:key_at] == b"{" + _PREV_KEY_FIRST:
        return b"{"
    return None


def unseal(line: bytes) -> bytes | None:
    """The record's own JSON (the line without its chain fields), or ``None`` if ``line``
    (without its newline) is not sealed."""
    seal = parse_seal(line)
    if seal is None:
        return None
    return seal.body + b"}" if seal.body != b"{" else b"{}"


def split_line(line: bytes) -> tuple[bytes, bytes, bytes] | None:
    """(record JSON without its closing brace, ``_prev``, ``_h``) of a sealed line."""
    seal = parse_seal(line)
    return None if seal is None else (seal.body, seal.prev, seal.hash)


def is_hex(value: bytes | None, width: int | None = None) -> bool:
    """Whether ``value`` is lowercase hex digits (``width`` of them, if given)."""
    if value is None or _HEX.fullmatch(value) is None:
        return False
    return width is None or len(value) == width


def damaged(line: bytes) -> bool:
    """Whether an unsealed line shows the remains of chain fields (the writer never leaves
    them half-written on a complete line, so an edit broke them)."""
    return _PREV_KEY_FIRST in line or line[-_TAIL:].startswith(_H_KEY)


def open_tail(data: bytes) -> tuple[bytes, list[bytes]] | None:
    """For appending to a chained file whose last complete lines are ``data``: the head hash
    (``_h`` of the last seal) and the complete lines after it, which the next seal covers;
    ``None`` when ``data`` holds no seal."""
    lines = data.split(b"\n")[:-1]
    for back, line in enumerate(reversed(lines)):
        seal = parse_seal(line)
        if seal is not None and is_hex(seal.hash, HASH_HEX):
            return seal.hash, lines[len(lines) - back :]
    return None


def records_of(data: bytes) -> Iterator[bytes]:
    """The records' own JSON of the complete lines in ``data``, chained or not; blank lines
    and a torn (unterminated) last line are skipped."""
    for line in data.split(b"\n")[:-1]:
        if not line.strip():
            continue
        body = unseal(line)
        yield line if body is None else body
