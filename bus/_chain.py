"""Hash-chained JSON lines: sealed batches, each carrying the hash of the batch before it.

A writer appends lines in *batches* (one ``os.write`` each: a ledger line, or the messages a
round published with the round's record). The last line of a batch is *sealed*: the
record's JSON object with the chain fields appended, always last::

    {"kind":"message_published",...}
    {"kind":"round_ended",...,"_prev":"<8 hex>","_c":"<4 hex per earlier line, 4 more>","_h":"<32 hex>"}

``_h`` is the first 128 bits of the SHA-256 of the previous batch's ``_h`` (:data:`GENESIS`
for the first batch) followed by the batch's bytes, from its first byte up to (not
including) ``","_h":"``. So ``_h`` seals every line of the batch and the batch's place in the
file: an edited line no longer matches the seal of its batch, and a dropped or moved batch
breaks the seal of the batch after it. ``_prev`` is the first 8 hex digits of the previous
``_h``: it tells a dropped or moved batch from an edited one. ``_c``, present when the batch
has more than one line, holds a check (16 bits of the Adler-32) of each earlier line of the
batch and then one of the sealed line itself up to ``_c``, so that verification names the
edited, dropped or moved *line*, not only its batch. One SHA-256 per batch instead of one
per line is what lets a run log hundreds of thousands of lines a second; the checks locate,
the SHA-256 seals (a check can be forged, the seal not without recomputing every later
one). An edit that a check misses (1 in 65,536) is still caught by the seal, and named at
the batch's last line.

Files written before batches existed carry a full 32-digit ``_prev`` on every line, and
``_h`` covers that line alone up to ``_prev``'s value; they are read and verified as they
are, and a writer continues them.

Checks work on bytes, with no JSON parsing, so verifying a log is as fast as reading it.

What the chain does not do: it has no key, so someone who rewrites a line *and* recomputes
every hash after it goes unnoticed by the chain alone; :mod:`bus.store._verify`
cross-checks the files of a run against each other (the ledger against the events, the
artifacts against their recorded SHA-256) so that such a rewrite has to be done
consistently in several places. Dropping lines at the very end of a file is also invisible
to the chain; the run's last event (``run_ended``) and the cross-checks catch that for run
logs. Complete lines after the last seal are a batch whose writer was stopped mid-write:
they are reported, like a torn last line, as an interruption (``torn``), not as tampering,
and the next writer's seal covers them.
"""

from __future__ import annotations

import re
import sys
import zlib
from array import array
from binascii import hexlify
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from hashlib import sha256 as _sha256
from pathlib import Path
from typing import Literal

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
_FEW = 16  # up to this many checks are formatted one by one; more go through arrays (faster in bulk)


def line_hash(data: bytes | bytearray) -> bytes:
    """The ``_h`` of a line in the one-line format of files written before batches
    (``data``: its bytes up to ``_prev``'s value); hex, ASCII."""
    return hexlify(_sha256(data).digest()[:HASH_HEX // 2])


def batch_hash(prev: bytes, data: bytes | bytearray | memoryview) -> bytes:
    """The ``_h`` of a batch whose bytes up to ``","_h":"`` are ``data``, after ``prev``."""
    h = _sha256(prev)
    h.update(data)
    return hexlify(h.digest()[:HASH_HEX // 2])


def checks(lines: Iterable[bytes | bytearray], own: int) -> bytes:
    """The ``_c`` value of a batch whose earlier lines (without newlines) are ``lines`` and
    whose sealed line's bytes before ``","_c":"`` have the Adler-32 ``own``: the check of each
    earlier line, then one over ``own`` and those checks (so that an edit of ``_c`` itself is
    told from an edit of a line it checks)."""
    earlier = _hex_checks(map(zlib.adler32, lines))
    return earlier + _own_check(earlier, own)


def _hex_checks(values: Iterable[int]) -> bytes:
    """The upper 16 bits (the position-weighted sum) of each Adler-32, as 4 hex digits."""
    values = list(values)
    if len(values) <= _FEW:
        return b"".join([b"%04x" % (v >> 16) for v in values])
    halves = array("H", array("I", values).tobytes())[_UPPER::2]
    if sys.byteorder == "big":
        halves.byteswap()
    return halves.tobytes().hex().encode()


def _own_check(earlier: bytes, own: int) -> bytes:
    return b"%04x" % (zlib.adler32(earlier, own) >> 16)


def check_values(field: bytes) -> list[bytes]:
    """``_c`` cut into the checks of the lines it covers."""
    return [field[i:i + CHECK_HEX] for i in range(0, len(field), CHECK_HEX)]


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
        raise TypeError(f"a chained JSON line must hold a JSON object, got {data[last:last + 40]!r}; "
                        f"write a dict or a msgspec Struct")
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
    digest = hexlify(h.digest()[:HASH_HEX // 2])
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
    digest = tail[len(_H_KEY):-2]
    for width in (HINT_HEX, HASH_HEX):
        body = _before_prev(sealed, width)
        if body is not None and _is_hex(sealed[-width:]):
            return Seal(body, sealed[-width:], None, digest, sealed, sealed)
    # "_c" holds hex digits only, so the last '","_c":"' is the seal's when there is one
    cut = sealed.rfind(_CHECKS_KEY)
    if cut >= 0:
        body = _before_prev(sealed[:cut], HINT_HEX)
        if body is not None:
            return Seal(body, sealed[cut - HINT_HEX:cut], sealed[cut + len(_CHECKS_KEY):], digest,
                        sealed, sealed[:cut])
    return None


def _before_prev(head: bytes, width: int) -> bytes | None:
    """The record's JSON before ``,"_prev":"<width hex digits>`` at the end of ``head``."""
    key_at = len(head) - width
    if key_at <= 0:
        return None
    if head.endswith(_PREV_KEY, 0, key_at):
        return head[:key_at - len(_PREV_KEY)]
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


def _is_hex(value: bytes | None, width: int | None = None) -> bool:
    if value is None or _HEX.fullmatch(value) is None:
        return False
    return width is None or len(value) == width


# -- verification -----------------------------------------------------------------------

Problem = Literal["edited", "dropped", "reordered", "unchained", "torn"]


@dataclass(frozen=True)
class ChainBreak:
    """The first place where a chained file is not intact.

    ``line`` counts from 1. ``problem`` is ``edited`` (the line does not match the seal of
    its batch), ``dropped`` (a line or batch written before this line is missing),
    ``reordered`` (the line or its batch was written elsewhere in the file), ``unchained``
    (no seal where one must be, or damaged chain fields) or ``torn`` (the writer was
    stopped mid-line or mid-batch: the last line has no newline, or the last complete lines
    have no seal; the lines before them are intact).
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
    (``None``: intact), ``torn`` when the writer was stopped mid-line or mid-batch, and the
    ``head`` hash (the ``_h`` of the last sealed line; :data:`GENESIS` for an empty file)."""

    path: Path
    lines: int
    head: bytes
    broken: ChainBreak | None = None
    torn: ChainBreak | None = None

    @property
    def intact(self) -> bool:
        return self.broken is None


def _walk(path: Path, lines: list[bytes]) -> tuple[bytes, ChainBreak | None, int]:
    """(head hash, first break, number of unsealed lines at the end) of ``lines``."""
    prev, start = GENESIS, 0
    for number, line in enumerate(lines, 1):
        seal = parse_seal(line)
        if seal is None:
            continue
        broken = _check_batch(path, lines, start, number - 1, seal, prev)
        if broken is not None:
            return prev, broken, 0
        prev, start = seal.hash, number
    for number in range(start + 1, len(lines) + 1):
        if _damaged(lines[number - 1]):
            return prev, ChainBreak(path, number, "unchained", "the line's chain fields at its end are damaged"), 0
    if start == 0 and lines:
        return prev, ChainBreak(path, 1, "unchained", "no line of the file is sealed (no _h field)"), 0
    return prev, None, len(lines) - start


def _damaged(line: bytes) -> bool:
    """Whether an unsealed line shows the remains of chain fields (the writer never leaves
    them half-written on a complete line, so an edit broke them)."""
    return _PREV_KEY_FIRST in line or line[-_TAIL:].startswith(_H_KEY)


def _check_batch(path: Path, lines: list[bytes], start: int, end: int, seal: Seal,
                 prev: bytes) -> ChainBreak | None:
    """The first break in the batch ``lines[start:end + 1]`` (sealed by ``seal``), if any."""
    if not (_is_hex(seal.hash, HASH_HEX) and _is_hex(seal.prev) and (seal.checks is None or _is_hex(seal.checks))):
        return ChainBreak(path, end + 1, "unchained", "the line's chain fields at its end are damaged")
    earlier = lines[start:end]
    if seal.legacy:
        return _check_legacy(path, lines, start, end, seal, prev)
    before = b"".join(line + b"\n" for line in earlier)
    if batch_hash(prev, before + seal.sealed) == seal.hash:
        return None
    broken = _against_checks(path, lines, start, end, seal)
    if broken is not None:
        return broken
    hint = prev[:len(seal.prev)]
    if seal.prev != hint:
        # Either the batch follows another one, or only its _prev was edited.
        restored = seal.own[:-len(hint)] + hint + seal.sealed[len(seal.own):]
        if batch_hash(prev, before + restored) != seal.hash:
            return _misplaced(path, start + 1, lines, seal, prev)
    return ChainBreak(path, end + 1, "edited", "the line does not match the hash (_h) that seals it")


def _check_legacy(path: Path, lines: list[bytes], start: int, end: int, seal: Seal,
                  prev: bytes) -> ChainBreak | None:
    """A line in the one-line format: it seals itself alone."""
    if start < end:
        return _orphans(path, lines, start, end - start)
    if line_hash(seal.sealed) != seal.hash:
        return ChainBreak(path, end + 1, "edited", "the line does not match its own hash (_h)")
    if seal.prev != prev:
        return _misplaced(path, end + 1, lines, seal, prev)
    return None


def _against_checks(path: Path, lines: list[bytes], start: int, end: int, seal: Seal) -> ChainBreak | None:
    """Names the first line of a broken batch that the checks of its seal (``_c``) disown."""
    wanted: list[bytes] = []
    if seal.checks is not None:
        listed, own = seal.checks[:-CHECK_HEX], seal.checks[-CHECK_HEX:]
        if len(seal.checks) % CHECK_HEX or _own_check(listed, zlib.adler32(seal.own)) != own:
            return ChainBreak(path, end + 1, "edited", "the line does not match its own check (_c)")
        wanted = check_values(listed)
    have = check_values(_hex_checks(map(zlib.adler32, lines[start:end])))
    if have == wanted:
        return None
    extra = len(have) - len(wanted)
    if extra > 0 and have[extra:] == wanted:
        return _orphans(path, lines, start, extra)
    for j, check in enumerate(have):
        if j >= len(wanted) or check != wanted[j]:
            return _disowned(path, start, j, have, wanted)
    return ChainBreak(path, start + len(have) + 1, "dropped",
                      "the line written before this one in its batch is missing")


def _disowned(path: Path, start: int, j: int, have: list[bytes], wanted: list[bytes]) -> ChainBreak:
    """Why line ``j`` of a batch (from 0) does not match its check: a line before it is
    missing, it swapped places with another line, or it was edited."""
    number, check = start + j + 1, have[j]
    if len(have) < len(wanted) and check == wanted[j + 1]:
        return ChainBreak(path, number, "dropped", "the line written before this one in its batch is missing")
    for k, other in enumerate(wanted):
        # a move, not an edit that happens to copy another line: that line is out of place too
        if k != j and other == check and k < len(have) and have[k] != other:
            return ChainBreak(path, number, "reordered", f"the line was written as line {start + k + 1} of its batch")
    return ChainBreak(path, number, "edited", "the line does not match the check (_c) its batch's seal lists")


def _orphans(path: Path, lines: list[bytes], start: int, count: int) -> ChainBreak:
    """``count`` lines from ``start`` that no seal covers, followed by a sealed batch."""
    last = start + count  # the line number of the last orphan
    if _damaged(lines[last - 1]):
        return ChainBreak(path, last, "unchained", "the line's chain fields at its end are damaged")
    return ChainBreak(path, last + 1, "dropped",
                      f"the line that sealed lines {start + 1} to {last} is missing (after line {last})")


def _misplaced(path: Path, number: int, lines: list[bytes], seal: Seal, prev: bytes) -> ChainBreak:
    where = "the start of the file" if number == 1 else f"line {number - 1}"
    for other, line in enumerate(lines, 1):
        found = parse_seal(line)
        if found is not None and found.hash.startswith(seal.prev) and found.hash != prev:
            return ChainBreak(path, number, "reordered",
                              f"the line follows {where}, but it was written after line {other}")
    return ChainBreak(path, number, "dropped",
                      f"the line that was written before this one is missing (after {where})")


def verify_file(path: Path) -> ChainReport:
    """The chain of one JSON-lines file (see :class:`ChainReport`)."""
    data = Path(path).read_bytes()
    pieces = data.split(b"\n")
    complete, last = pieces[:-1], pieces[-1]
    head, broken, unsealed = _walk(path, complete)
    torn = None
    if unsealed or last:
        first = len(complete) - unsealed + 1
        parts = [f"{unsealed} complete line(s) without their seal"] if unsealed else []
        parts += [f"a last line cut off after {len(last)} bytes"] if last else []
        torn = ChainBreak(path, first, "torn",
                          f"the writer was stopped mid-write: {' and '.join(parts)}; the "
                          f"{first - 1} lines before are intact")
    return ChainReport(path=path, lines=len(complete), head=head, broken=broken, torn=torn)


def open_tail(data: bytes) -> tuple[bytes, list[bytes]] | None:
    """For appending to a chained file whose last complete lines are ``data``: the head hash
    (``_h`` of the last seal) and the complete lines after it, which the next seal covers;
    ``None`` when ``data`` holds no seal."""
    lines = data.split(b"\n")[:-1]
    for back, line in enumerate(reversed(lines)):
        seal = parse_seal(line)
        if seal is not None and _is_hex(seal.hash, HASH_HEX):
            return seal.hash, lines[len(lines) - back:]
    return None


def records_of(data: bytes) -> Iterator[bytes]:
    """The records' own JSON of the complete lines in ``data``, chained or not; blank lines
    and a torn (unterminated) last line are skipped."""
    for line in data.split(b"\n")[:-1]:
        if not line.strip():
            continue
        body = unseal(line)
        yield line if body is None else body
