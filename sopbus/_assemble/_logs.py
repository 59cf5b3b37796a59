"""The log lines: to stderr for people (with a run's secrets blanked), each run's
``run.log``, and the Python API's quiet default."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from loguru import logger

STDERR_FORMAT = "<green>{time:HH:mm:ss}</green> <level>{level: <7}</level> {message}"
"""A line on stderr, for people: the time, the level, the message."""
FILE_FORMAT = "{time:YYYY-MM-DD HH:mm:ss.SSS} | {level: <8} | {name}:{function}:{line} - {message}"
_redact_stderr: list[Callable[[str], str]] = []  # the runs executing now (one, from the CLI)


class RedactedFile:
    """A loguru sink: the run's ``run.log``, each line with the run's secrets blanked."""

    def __init__(self, path: Path, redact: Callable[[str], str]):
        self._path, self._redact = path, redact

    def write(self, message: str) -> None:
        with open(self._path, "a", encoding="utf-8") as f:
            f.write(self._redact(message))


@contextmanager
def redacting_stderr(redact: Callable[[str], str]) -> Iterator[None]:
    _redact_stderr.append(redact)
    try:
        yield
    finally:
        _redact_stderr.remove(redact)


def _to_stderr(line: str) -> None:
    for redact in _redact_stderr:
        line = redact(line)
    sys.stderr.write(line)


def configure_logging(quiet: bool, verbose: bool = False) -> None:
    """Human-readable lines to stderr; the cost line after each call only with ``-v``
    (about 125 characters, they wrap under the live view); ``--quiet`` keeps only
    warnings. Each run also gets ``run.log`` in its directory, with every line (see
    :func:`execute`)."""
    logger.remove()
    # Written through sys.stderr at call time, so that rich's live display can keep them above it.
    logger.add(
        _to_stderr,
        level="WARNING" if quiet else "INFO",
        colorize=sys.stderr.isatty(),
        filter=lambda record: verbose or not record["extra"].get("cost"),
        format=STDERR_FORMAT,
    )


_API_QUIET = False
_WARNING = 30


def quiet_for_the_api() -> None:
    """Keeps a Python program's stderr free of sopbus's INFO lines (one per call, coloured
    even in a notebook) unless a run asks for them (``verbose=True``); warnings still show.

    loguru starts with one handler (id 0: stderr, DEBUG, colours). The first API run
    replaces that handler, once, with one that passes other libraries' lines as before,
    sopbus's warnings, and sopbus's other lines only from a verbose run, secrets blanked,
    coloured only on a terminal. A program that removed handler 0 or added its own keeps
    its own configuration: those handlers are its, and untouched."""
    global _API_QUIET
    if _API_QUIET:
        return
    _API_QUIET = True
    try:
        logger.remove(0)
    except ValueError:
        return  # the program configured loguru itself
    logger.add(
        _to_stderr,
        level="DEBUG",
        colorize=sys.stderr.isatty(),
        filter=_api_lines,
        format=STDERR_FORMAT,
    )


def _api_lines(record: Any) -> bool:
    if not (record["name"] or "").startswith("sopbus"):
        return True
    return bool(record["level"].no >= _WARNING or record["extra"].get("sopbus_verbose"))
