"""Reading files a user hands sopbus (fixtures, injected edits, a SOP's data files), so that
a broken file is a :class:`~sopbus.bus.ConfigError` naming the file, the place and the fix, never a
traceback: text that is not UTF-8, TOML that does not parse, TOML nested deeper than the
parser can follow.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from ._errors import ConfigError


def read_user_bytes(path: Path, what: str) -> bytes:
    """The bytes of ``path``; ``what`` names the file for people ("scenario file")."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such {what}") from None
    except OSError as error:
        raise ConfigError(f"{path}: cannot read the {what} ({error.strerror})") from None


def read_user_text(path: Path, what: str) -> str:
    """The UTF-8 text of ``path``; ``what`` names the file for people ("fixture file")."""
    data = read_user_bytes(path, what)
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
