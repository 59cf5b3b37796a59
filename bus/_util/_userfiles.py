"""Reading files a user hands sopbus (fixtures, injected edits, a SOP's data files), so that
a broken file is a :class:`~sopbus.bus.ConfigError` naming the file, the place and the fix, never a
traceback: text that is not UTF-8, TOML that does not parse, TOML nested deeper than the
parser can follow.
"""

from __future__ import annotations

import os
import stat
import tomllib
from pathlib import Path
from typing import Any

from .._errors import ConfigError


def read_user_bytes(path: Path, what: str) -> bytes:
    """The bytes of ``path``; ``what`` names the file for people ("scenario file").

    Opened without blocking and checked to be a regular file before it is read: a FIFO
    would otherwise wait forever for a writer, and a device would never end."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such {what}") from None
    except OSError as error:
        raise ConfigError(f"{path}: cannot read the {what} ({error.strerror})") from None
    # Checked on the descriptor before it becomes a file object: os.fdopen refuses a
    # directory with IsADirectoryError, a traceback instead of the user's mistake.
    kind = _kind(os.fstat(fd).st_mode)
    if kind is not None:
        os.close(fd)
        raise ConfigError(f"{path}: the {what} {not_regular_problem(kind)}")
    with os.fdopen(fd, "rb") as file:
        try:
            return file.read()
        except OSError as error:
            raise ConfigError(f"{path}: cannot read the {what} ({error.strerror})") from None


def not_regular(path: Path) -> str | None:
    """What ``path`` is when it exists and is not a regular file ("a FIFO", "a
    directory"); ``None`` for a regular file or a missing one."""
    try:
        return _kind(path.stat().st_mode)
    except OSError:
        return None


def not_regular_problem(kind: str) -> str:
    """The words for a path that is ``kind`` (see :func:`not_regular`) where a file is
    needed, with the fix."""
    return f"is not a regular file (it is {kind}); point it at a file"


def _kind(mode: int) -> str | None:
    kinds = {
        stat.S_ISDIR: "a directory",
        stat.S_ISFIFO: "a FIFO",
        stat.S_ISSOCK: "a socket",
        stat.S_ISCHR: "a character device",
        stat.S_ISBLK: "a block device",
    }
    if stat.S_ISREG(mode):
        return None
    return next((name for test, name in kinds.items() if test(mode)), "not a file")


def read_user_text(path: Path, what: str) -> str:
    """The UTF-8 text of ``path``; ``what`` names the file for people ("fixture file")."""
    return decode_user_text(read_user_bytes(path, what), path, what)


def decode_user_text(data: bytes, path: Path, what: str) -> str:
    """``data`` (the bytes of ``path``) as UTF-8 text, or a :class:`ConfigError` naming the
    first byte that is not, where it is, and the fix."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ConfigError(
            f"{path}: the {what} is not UTF-8 text: {_where_bad(data, error)}; save it as UTF-8"
        ) from None


def read_user_toml(path: Path, what: str) -> dict[str, Any]:
    """The TOML document in ``path`` (see :func:`read_user_text`)."""
    return parse_user_toml(read_user_text(path, what), path, what)


def parse_user_toml(text: str, path: Path | str, what: str) -> dict[str, Any]:
    """``text`` (the content of ``path``) parsed as TOML, or a :class:`ConfigError`."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: the {what} is not valid TOML: {error}") from None
    except RecursionError:
        raise ConfigError(
            f"{path}: the {what} nests arrays or tables deeper than "
            f"{nesting_depth(text)} levels, more than the TOML parser can follow; "
            f"flatten it"
        ) from None


def nesting_depth(text: str) -> int:
    """How deep brackets and braces nest in ``text`` (strings not told apart: a bound for
    messages, not a parser)."""
    depth = deepest = 0
    for char in text:
        if char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth = max(0, depth - 1)
    return deepest


def _where_bad(data: bytes, error: UnicodeDecodeError) -> str:
    before = data[: error.start]
    line = before.count(b"\n") + 1
    column = error.start - (before.rfind(b"\n") + 1) + 1
    return f"byte 0x{data[error.start]:02x} at line {line}, column {column} (offset {error.start})"
