"""Small helpers the engineer and QA share: running calls side by side, turning a model's
file names into safe relative paths, and showing files in a prompt."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import PurePosixPath
from typing import TypeVar

import trio

from sopbus.bus import BudgetExhausted, ChatMessage, Message, StopRun, exception_leaves

from .._action import ActionContext
from .._prompt import render_message

T = TypeVar("T")

WORKSPACE = "workspace"
"""Where the code lands under the run's artifacts: ``artifacts/workspace/<path>``."""

_PATH = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*(/[A-Za-z0-9_][A-Za-z0-9_.\-]*)*$")
_WORD = re.compile(r"[A-Za-z0-9]+")


async def concurrently(jobs: Sequence[Callable[[], Awaitable[T]]]) -> list[T]:
    """Run ``jobs`` side by side in a nursery; their results in the order given.

    The first failure cancels the others and is re-raised on its own (not in an exception
    group), so the run loop still sees a plain :class:`sopbus.bus.BudgetExhausted` or
    :class:`sopbus.bus.StopRun` and ends the run with the right reason.
    """
    results: list[T | None] = [None] * len(jobs)

    async def one(i: int) -> None:
        results[i] = await jobs[i]()

    try:
        async with trio.open_nursery() as nursery:
            for i in range(len(jobs)):
                nursery.start_soon(one, i)
    except BaseExceptionGroup as group:
        raise _most_telling(group) from None
    return results  # type: ignore[return-value]  # every slot was filled, or we raised


def _most_telling(group: BaseExceptionGroup[BaseException]) -> BaseException:
    leaves = list(exception_leaves(group))
    real = [e for e in leaves if not isinstance(e, trio.Cancelled)]
    if not real:
        return group  # only cancellation: let trio's scopes see it as they raised it
    for kind in (BudgetExhausted, StopRun):
        for exc in real:
            if isinstance(exc, kind):
                return exc
    return real[0]


def safe_path(name: str, index: int, *, suffix: str = ".py") -> str:
    """A relative POSIX path for a file a model named: kept as written when it is a plain
    relative path, otherwise made from its words (``"The main module!"`` -> ``the_main_module.py``).
    Never absolute, never with ``..``, so a file cannot land outside the workspace."""
    text = name.strip().strip("`'\"").replace("\\", "/").lstrip("./")
    if _PATH.match(text) and ".." not in text and len(text) <= 120:
        return text
    words = _WORD.findall(text.lower())[:4] or [f"file_{index}"]
    stem = "_".join(words)
    return stem if stem.endswith(suffix) else f"{stem}{suffix}"


def unique_paths(names: Iterable[str], *, limit: int) -> list[str]:
    """Safe paths for ``names``, duplicates and test files dropped, at most ``limit``."""
    out: list[str] = []
    for i, name in enumerate(names):
        path = safe_path(name, i)
        if path not in out and not is_test(path):
            out.append(path)
        if len(out) == limit:
            break
    return out


def is_test(path: str) -> bool:
    p = PurePosixPath(path)
    return p.parts[0] == "tests" or p.name.startswith("test_") or p.name == "conftest.py"


def listing(files: Mapping[str, str], *, only: Iterable[str] | None = None) -> str:
    """Files as Markdown code blocks, each under its path."""
    names = list(files) if only is None else [n for n in only if n in files]
    return "\n\n".join(
        f"### {name}\n```{_lang(name)}\n{files[name].rstrip()}\n```" for name in names
    )


def _lang(name: str) -> str:
    return {".py": "python", ".md": "markdown", ".toml": "toml"}.get(PurePosixPath(name).suffix, "")


def tail(text: str, limit: int = 4000) -> str:
    """The end of a long output (where pytest puts its failures and summary)."""
    return text if len(text) <= limit else "...\n" + text[-limit:]


def task_prompt(
    ctx: ActionContext,
    action: str,
    instruction: str,
    context: Sequence[Message],
    *,
    code: str = "",
) -> tuple[ChatMessage, ...]:
    """A call of the company laid out for a prompt cache the whole team shares.

    The system turn holds what the call works from, written the same whichever role reads
    it: the ``code`` it shows (a listing), then the ``context`` messages in the order they
    were written; then who the role is. The user turn holds the task, its instruction and
    the call's own part (the file to write, the code under review, the test output). So
    the project manager's call and the engineer's start alike (the design), and so do the
    engineer's summary and QA's tests (the code).
    """
    shared = [code] if code else []
    shared.extend(render_message(m) for m in context)
    persona = ctx.role.system_text()
    system = "## Context\n" + "\n\n".join(shared) + "\n\n" + persona if shared else persona
    task = f"## Your task: {action}\n{instruction}".rstrip()
    return ChatMessage("system", system), ChatMessage("user", task)
