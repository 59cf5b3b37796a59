"""Verifying a chained file: the first place where it is not intact, named by line (the
format is described in :mod:`sopbus.bus._chain`; checks work on bytes, with no JSON parsing)."""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ._seal import (
    CHECK_HEX,
    GENESIS,
    HASH_HEX,
    Seal,
    batch_hash,
    check_values,
    damaged,
    hex_checks,
    is_hex,
    line_hash,
    own_check,
    parse_seal,
)

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
        if damaged(lines[number - 1]):
            return (
                prev,
                ChainBreak(
                    path, number, "unchained", "the line's chain fields at its end are damaged"
                ),
                0,
            )
    if start == 0 and lines:
        return (
            prev,
            ChainBreak(path, 1, "unchained", "no line of the file is sealed (no _h field)"),
            0,
        )
    return prev, None, len(lines) - start


def _check_batch(
    path: Path, lines: list[bytes], start: int, end: int, seal: Seal, prev: bytes
) -> ChainBreak | None:
    """The first break in the batch ``lines[start:end + 1]`` (sealed by ``seal``), if any."""
    if not (
        is_hex(seal.hash, HASH_HEX)
        and is_hex(seal.prev)
        and (seal.checks is None or is_hex(seal.checks))
    ):
        return ChainBreak(
            path, end + 1, "unchained", "the line's chain fields at its end are damaged"
        )
    earlier = lines[start:end]
    if seal.legacy:
        return _check_legacy(path, lines, start, end, seal, prev)
    before = b"".join(line + b"\n" for line in earlier)
    if batch_hash(prev, before + seal.sealed) == seal.hash:
        return None
    broken = _against_checks(path, lines, start, end, seal)
    if broken is not None:
        return broken
    hint = prev[: len(seal.prev)]
    if seal.prev != hint:
        # Either the batch follows another one, or only its _prev was edited.
        restored = seal.own[: -len(hint)] + hint + seal.sealed[len(seal.own) :]
        if batch_hash(prev, before + restored) != seal.hash:
            return _misplaced(path, start + 1, lines, seal, prev)
    return ChainBreak(
        path, end + 1, "edited", "the line does not match the hash (_h) that seals it"
    )


def _check_legacy(
    path: Path, lines: list[bytes], start: int, end: int, seal: Seal, prev: bytes
) -> ChainBreak | None:
    """A line in the one-line format: it seals itself alone."""
    if start < end:
        return _orphans(path, lines, start, end - start)
    if line_hash(seal.sealed) != seal.hash:
        return ChainBreak(path, end + 1, "edited", "the line does not match its own hash (_h)")
    if seal.prev != prev:
        return _misplaced(path, end + 1, lines, seal, prev)
    return None


def _against_checks(
    path: Path, lines: list[bytes], start: int, end: int, seal: Seal
) -> ChainBreak | None:
    """Names the first line of a broken batch that the checks of its seal (``_c``) disown."""
    wanted: list[bytes] = []
    if seal.checks is not None:
        listed, own = seal.checks[:-CHECK_HEX], seal.checks[-CHECK_HEX:]
        if len(seal.checks) % CHECK_HEX or own_check(listed, zlib.adler32(seal.own)) != own:
            return ChainBreak(path, end + 1, "edited", "the line does not match its own check (_c)")
        wanted = check_values(listed)
    have = check_values(hex_checks(map(zlib.adler32, lines[start:end])))
    if have == wanted:
        return None
    extra = len(have) - len(wanted)
    if extra > 0 and have[extra:] == wanted:
        return _orphans(path, lines, start, extra)
    for j, check in enumerate(have):
        if j >= len(wanted) or check != wanted[j]:
            return _disowned(path, start, j, have, wanted)
    return ChainBreak(
        path,
        start + len(have) + 1,
        "dropped",
        "the line written before this one in its batch is missing",
    )


def _disowned(path: Path, start: int, j: int, have: list[bytes], wanted: list[bytes]) -> ChainBreak:
    """Why line ``j`` of a batch (from 0) does not match its check: a line before it is
    missing, it swapped places with another line, or it was edited."""
    number, check = start + j + 1, have[j]
    if len(have) < len(wanted) and check == wanted[j + 1]:
        return ChainBreak(
            path, number, "dropped", "the line written before this one in its batch is missing"
        )
    for k, other in enumerate(wanted):
        # a move, not an edit that happens to copy another line: that line is out of place too
        if k != j and other == check and k < len(have) and have[k] != other:
            return ChainBreak(
                path,
                number,
                "reordered",
                f"the line was written as line {start + k + 1} of its batch",
            )
    return ChainBreak(
        path, number, "edited", "the line does not match the check (_c) its batch's seal lists"
    )


def _orphans(path: Path, lines: list[bytes], start: int, count: int) -> ChainBreak:
    """``count`` lines from ``start`` that no seal covers, followed by a sealed batch."""
    last = start + count  # the line number of the last orphan
    if damaged(lines[last - 1]):
        return ChainBreak(path, last, "unchained", "the line's chain fields at its end are damaged")
    return ChainBreak(
        path,
        last + 1,
        "dropped",
        f"the line that sealed lines {start + 1} to {last} is missing (after line {last})",
    )


def _misplaced(path: Path, number: int, lines: list[bytes], seal: Seal, prev: bytes) -> ChainBreak:
    where = "the start of the file" if number == 1 else f"line {number - 1}"
    for other, line in enumerate(lines, 1):
        found = parse_seal(line)
        if found is not None and found.hash.startswith(seal.prev) and found.hash != prev:
            return ChainBreak(
                path,
                number,
                "reordered",
                f"the line follows {where}, but it was written after line {other}",
            )
    return ChainBreak(
        path,
        number,
        "dropped",
        f"the line that was written before this one is missing (after {where})",
    )


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
        torn = ChainBreak(
            path,
            first,
            "torn",
            f"the writer was stopped mid-write: {' and '.join(parts)}; the "
            f"{first - 1} lines before are intact",
        )
    return ChainReport(path=path, lines=len(complete), head=head, broken=broken, torn=torn)
