"""The docs pages' checked commands: found, run and compared (tests/e2e/test_docs_commands.py).

The convention (docs/building-docs.md says it for writers):

- A fenced block of language ``console`` is a checked session. Each line that starts with
  ``$ `` is a ``sopbus`` command (``NAME=value`` words before it set variables); the lines
  under it, up to the next ``$ ``, are what it prints, stdout and stderr as a terminal
  shows them. A command ending in ``# exits N`` must exit N, any other must exit 0.
- A fenced block with ``title="NAME"`` is a file: it is written as NAME into the page's
  folder before the commands after it run (``shop.toml``, then ``$ sopbus run shop.toml``).
- All sessions of one page run in order in one empty folder, on the simulator (no key, no
  network), so a page's ``$ sopbus show last`` reads the run its ``$ sopbus run`` made.
- A command line that ends in `` \\`` goes on on the next line, as in a shell.
- A page whose commands call a model server is given a stand-in by the test (see
  :class:`Served`): variables its commands see (``ANTHROPIC_BASE_URL``), and base URLs the
  page writes (``http://127.0.0.1:8080/v1``) that stand for the test's server, in the
  commands and in what they print.
- Output is compared word by word: spacing and line breaks are not (they follow the
  terminal's width, 80 columns here). Run ids, times, hashes and the page's folder compare
  equal to any other of their kind, written as they print or as ``<run id>``, ``<time>``,
  ``<hash>`` and ``<dir>``; a ``...`` word stands for any words, on one line or many.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .cli import ARGV, environ

_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>```+)\s*(?P<info>.*)$")
_TITLE = re.compile(r'title="(?P<name>[^"]+)"')
_EXITS = re.compile(r"\s+#\s*exits\s+(?P<code>\d+)\s*$")
_ENV_WORD = re.compile(r"^[A-Z_][A-Z0-9_]*=")

# What differs from one run of a page to the next, each with the placeholder it reads as.
_VARYING = (
    (re.compile(r"\b\d{8}-\d{6}-[A-Za-z0-9_.-]*[A-Za-z0-9]"), "<run id>"),
    (re.compile(r"\b\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(:\d{2}(\.\d+)?)?"), "<time>"),
    (re.compile(r"\b\d+(\.\d+)? ?(ms|s)\b"), "<time>"),
    (re.compile(r"\b[0-9a-f]{32,64}\b"), "<hash>"),
)
# Variables of the test's own environment a page's command must not see: a key, an
# endpoint or a setting of the reader's would change what the page shows.
_SCRUBBED = ("OPENAI_", "SOPBUS_", "OTEL_", "ANTHROPIC_")


@dataclass
class Command:
    """One ``$ sopbus ...`` line of a page, with the output and exit code it shows."""

    line: int
    text: str
    expected: list[str] = field(default_factory=list)
    exit_code: int = 0


@dataclass
class File:
    """A titled block of a page: a file its commands use."""

    line: int
    name: str
    text: str


Step = Command | File


@dataclass(frozen=True)
class Served:
    """A page's stand-in for the model server its commands call: ``env`` is laid over each
    command's environment; each URL of ``urls`` that the page writes is the value's server
    (the page's URL in a command is replaced by it, and it by the page's URL in the output)."""

    env: dict[str, str] = field(default_factory=dict)
    urls: dict[str, str] = field(default_factory=dict)


def _blocks(text: str) -> Iterator[tuple[int, str, list[str]]]:
    """The fenced blocks of a page: (line of the fence, info string, body lines)."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        opened = _FENCE.match(lines[i])
        if not opened:
            i += 1
            continue
        indent, fence = len(opened["indent"]), opened["fence"]
        body: list[str] = []
        j = i + 1
        while j < len(lines) and lines[j].strip() != fence:
            body.append(lines[j][indent:])
            j += 1
        yield i + 1, opened["info"], body
        i = j + 1


def _command(line: int, text: str) -> Command:
    exits = _EXITS.search(text)
    return Command(
        line=line,
        text=text[: exits.start()] if exits else text,
        exit_code=int(exits["code"]) if exits else 0,
    )


def _session(start: int, body: list[str]) -> Iterator[Command]:
    command: Command | None = None
    words: list[str] = []  # the command's lines so far, while one ends in ` \`
    for offset, raw in enumerate(body, start=1):
        if words:
            words.append(raw.strip())
        elif raw.startswith("$ "):
            if command is not None:
                yield command
            command, words = None, [raw[2:].strip()]
        elif command is not None:
            command.expected.append(raw)
        elif raw.strip():
            raise ValueError(f"line {start + offset}: a console block starts with `$ sopbus`")
        if words and not words[-1].endswith(" \\"):
            first = start + offset - len(words) + 1
            command = _command(first, " ".join(w.removesuffix("\\").strip() for w in words))
            words = []
    if command is not None:
        yield command


def steps(page: Path) -> list[Step]:
    """The checked commands and the files of one page, in page order."""
    found: list[Step] = []
    for start, info, body in _blocks(page.read_text(encoding="utf-8")):
        title = _TITLE.search(info)
        if title:
            found.append(File(start, title["name"], "\n".join(body) + "\n"))
        elif info.split(" ", 1)[0].strip("{.") == "console":
            found.extend(_session(start, body))
    return found


def normalized(text: str, folder: Path | None = None) -> list[str]:
    """The words of ``text`` with what varies between runs put as its placeholder."""
    if folder is not None:
        text = text.replace(str(folder), "<dir>")
    for pattern, placeholder in _VARYING:
        text = pattern.sub(placeholder, text)
    return text.split()


def matches(expected: list[str], actual: list[str]) -> bool:
    """Whether ``actual`` is ``expected`` word for word, a ``...`` standing for any words."""
    pieces = [r"\A"]
    for word in expected:
        pieces.append(r"(?:\S+ )*?" if word == "..." else re.escape(word) + " ")
    pieces.append(r"\Z")
    return re.match("".join(pieces), "".join(w + " " for w in actual)) is not None


def _argv(command: Command, served: Served) -> tuple[dict[str, str], list[str]]:
    text = command.text
    for shown, live in served.urls.items():
        text = text.replace(shown, live)
    words = shlex.split(text, comments=True)
    env: dict[str, str] = {}
    while words and _ENV_WORD.match(words[0]):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    if not words or words[0] != "sopbus":
        raise ValueError(f"line {command.line}: only `sopbus` commands are run: {command.text}")
    return {**served.env, **env}, words[1:]


def _environment(extra: dict[str, str]) -> dict[str, str]:
    scrubbed: dict[str, str | None] = {
        name: None for name in os.environ if name.startswith(_SCRUBBED)
    }
    return environ({**scrubbed, "PYTHONUNBUFFERED": "1", **extra}, columns=80)


def run(command: Command, folder: Path, served: Served = Served()) -> str | None:
    """Runs one command in ``folder``; what differs from the page, or None when nothing."""
    env, args = _argv(command, served)
    done = subprocess.run(
        [*ARGV, *args],
        cwd=folder,
        env=_environment(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,  # one stream, in the order a terminal shows them
        text=True,
        timeout=120,
    )
    printed = done.stdout
    for shown, live in served.urls.items():
        printed = printed.replace(live, shown)
    wrong_exit = done.returncode != command.exit_code
    expected = normalized("\n".join(command.expected))
    if not wrong_exit and matches(expected, normalized(printed, folder)):
        return None
    said = f"exited {done.returncode}, the page says {command.exit_code}; " if wrong_exit else ""
    return (
        f"line {command.line}: $ {command.text}\n{said}the page shows:\n"
        + "\n".join(command.expected)
        + f"\nit printed:\n{printed}"
    )


def _write(file: File, folder: Path) -> None:
    target = (folder / file.name).resolve()
    if not target.is_relative_to(folder.resolve()):  # a page writes into its folder only
        raise ValueError(f"line {file.line}: title={file.name!r} is outside the page's folder")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(file.text, encoding="utf-8")


def check_page(page: Path, folder: Path, served: Served = Served()) -> list[str]:
    """Runs a page's steps in order in ``folder``; what differed, one entry per command (a
    page that breaks the convention is one entry, and its later steps do not run)."""
    differences: list[str] = []
    try:
        for step in steps(page):
            if isinstance(step, File):
                _write(step, folder)
            elif (difference := run(step, folder, served)) is not None:
                differences.append(difference)
    except ValueError as mistake:
        differences.append(str(mistake))
    return differences
