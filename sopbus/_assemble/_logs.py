"""The CLI's log lines: to stderr for people (with a run's secrets blanked), and each
run's ``run.log``."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from loguru import logger

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
        format="<green>{time:HH:mm:ss}</green> <level>{level: <7}</level> {message}",
    )
