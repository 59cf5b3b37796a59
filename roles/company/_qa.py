"""QA of the software company: writes tests for the engineer's code, runs them for real in
the sandbox, and reports failures back to the engineer, for a bounded number of rounds.

One turn of QA on the engineer's ``SummarizeCode``: ``WriteTest`` (one call per module
without tests, side by side) -> ``RunCode`` (pytest in :func:`sopbus.bus.run_sandboxed`, ``_testrun``: a scratch
copy of the workspace, a clean environment without secrets, rlimits, a timeout, no network
where the OS allows) -> on failure ``DebugError``, a bug report addressed to the engineer
who sent the code. QA sends at most ``max_test_rounds`` fix requests per run; after that
it records the last result and stops, so a model that cannot fix its code ends the run
cleanly instead of looping until the round limit.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import PurePosixPath
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from sopbus.bus import Message, SandboxLimits, Turn

from .._action import Action, ActionContext
from .._role import Role
from ._code import BUG_REPORT, SummarizeCode, WriteCode
from ._testrun import PytestRun, RunCode
from ._util import WORKSPACE, concurrently, is_test, listing, task_prompt

TEST_REPORT = "docs/test_report.md"  # the artifact the software company's verdict rests on


class PytestFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    code: str = Field(description="the complete pytest file, nothing else")


class BugReport(BaseModel):
    model_config = ConfigDict(extra="forbid")
    analysis: str = Field(description="what failed and why, from the test output")
    fix_in: Literal["code", "tests"] = Field(
        description="'tests' only when the test itself is wrong"
    )
    files_to_fix: list[str] = Field(description="paths of the files to change, as in the workspace")
    instructions: str = Field(description="what to change, concretely")


class WriteTest(Action):
    """Write a pytest file for one module of the engineer's code."""

    instruction = (
        "Write pytest tests for this module: its main behaviour, edge cases, and error "
        "handling, through its public functions as they are written (the tests run "
        "from the project root, so import modules by their package path). Use only "
        "pytest and the standard library; tests must be fast and must not touch the "
        "network. Put the whole file into `code`."
    )
    Output = PytestFile
    default_max_tokens = 4096  # whole files, as WriteCode's

    async def write(
        self,
        ctx: ActionContext,
        test_path: str,
        module: str,
        workspace: dict[str, str],
        *,
        context: Sequence[Message],
        problem: str = "",
    ) -> str:
        # The code (as the engineer's summary showed it) and the instruction, shared by
        # every test file of the round, come first; the file to write last.
        text = f"{self.instruction}\n\nTest file to write: {test_path}\nModule under test: {module}"
        if problem:
            text += f"\n\nThe previous version of this test file was wrong:\n{problem}"
        prompt = task_prompt(ctx, self.name, text, context, code=listing(workspace))
        return (await self.ask(ctx, prompt, output=PytestFile, subject=test_path)).code


class DebugError(Action):
    """Read a failed test run and write a bug report: which files to fix and how."""

    instruction = (
        "The tests failed. Read the output and the code above and find the cause. "
        "Say whether the code or the test is wrong (fix_in), name the files to change "
        "by their paths, and say concretely what to change."
    )
    Output = BugReport

    async def analyse(
        self,
        ctx: ActionContext,
        run: PytestRun,
        workspace: dict[str, str],
        context: Sequence[Message],
    ) -> BugReport:
        text = f"### Test output (round {run.test_round})\n```\n{run.output}\n```\n\n{self.instruction}"
        prompt = task_prompt(ctx, self.name, text, context, code=listing(workspace))
        return await self.ask(ctx, prompt, output=BugReport)


class QaEngineer(Role):
    """Tests the engineer's code and sends bug reports back (see the module docstring).

    Every message QA publishes (the tests, each run's result, bug reports) is addressed to
    the engineer who sent the summary, so the engineer sees the tests and the output when
    it fixes. ``test_timeout_s`` and ``test_memory_mb`` bound each pytest run.
    """

    name = "QaEngineer"
    profile = "QA Engineer"
    goal = "make sure the code works: write tests, run them, report what fails"
    constraints = "tests are fast, deterministic and use only pytest and the standard library"
    watch = (WriteCode, SummarizeCode)  # the code is remembered; the summary starts the work
    actions = (WriteTest, RunCode, DebugError)

    def __init__(
        self,
        *,
        max_test_rounds: int = 3,
        test_timeout_s: float = 60.0,
        test_memory_mb: int = 1024,
        **fields: Any,
    ) -> None:
        super().__init__(**fields)
        if max_test_rounds < 0:
            raise ValueError(f"QaEngineer needs max_test_rounds >= 0, got {max_test_rounds}")
        self.max_test_rounds = max_test_rounds
        self.limits = SandboxLimits(
            timeout_s=test_timeout_s, memory_mb=test_memory_mb, cpu_s=max(1, int(test_timeout_s))
        )
        self.tests: dict[str, str] = {}
        self.runs: list[PytestRun] = []
        self.fix_rounds = 0

    def fields(self) -> dict[str, Any]:
        return {
            **super().fields(),
            "max_test_rounds": self.max_test_rounds,
            "test_timeout_s": self.limits.timeout_s,
            "test_memory_mb": self.limits.memory_mb,
        }

    async def step(self, news: Sequence[Message], turn: Turn) -> Sequence[Message]:
        fresh = tuple(news)
        self.memory.extend(fresh)
        summaries = [m for m in fresh if m.cause_by == SummarizeCode.name]
        if not summaries or not isinstance(summaries[-1].payload, dict):
            return ()
        summary = summaries[-1]
        workspace = {str(k): str(v) for k, v in summary.payload.get("workspace", {}).items()}
        out: list[Message] = []
        to = (summary.sent_from,)
        wanted = {m: t for m, t in _test_targets(workspace).items() if t not in self.tests}
        if wanted:
            out.append(await self._write_tests(wanted, workspace, fresh, turn, to))
        while True:
            run = await self._run(workspace, turn)
            out.append(self._message(RunCode.name, _run_text(run), fresh, run.model_dump(), to))
            if run.passed or self.fix_rounds >= self.max_test_rounds:
                if not run.passed:
                    turn.emit("test_rounds_exhausted", max_test_rounds=self.max_test_rounds)
                return out
            self.fix_rounds += 1
            report = await self._debug(run, workspace, fresh, turn)
            tests = [t for t in report.files_to_fix if t in self.tests]
            if report.fix_in == "tests" and tests:
                problem = f"{report.analysis}\n{report.instructions}\n\nOutput:\n{run.output}"
                targets = {_module_of(t, workspace): t for t in tests}
                out.append(await self._write_tests(targets, workspace, fresh, turn, to, problem))
                continue  # QA fixed its own tests: run again, counted as a fix round
            out.append(
                self._message(
                    BUG_REPORT,
                    _report_text(report, run),
                    fresh,
                    {**report.model_dump(), "test_round": run.test_round, "output": run.output},
                    to,
                )
            )
            return out

    async def _write_tests(
        self,
        targets: dict[str, str],
        workspace: dict[str, str],
        news: tuple[Message, ...],
        turn: Turn,
        to: tuple[str, ...],
        problem: str = "",
    ) -> Message:
        writer = self.action_named(WriteTest.name)
        assert isinstance(writer, WriteTest)
        ctx = self.context(writer, news, turn)
        jobs = [
            functools.partial(
                writer.write, ctx, test, module, workspace, context=news[-1:], problem=problem
            )
            for module, test in targets.items()
        ]
        codes = await concurrently(jobs)
        written = dict(zip(targets.values(), codes))
        for path, code in written.items():
            self.tests[path] = code
            turn.write_artifact(f"{WORKSPACE}/{path}", code)
        return self._message(WriteTest.name, listing(written), news, {"files": written}, to)

    async def _run(self, workspace: dict[str, str], turn: Turn) -> PytestRun:
        runner = self.action_named(RunCode.name)
        assert isinstance(runner, RunCode)
        run = await runner.execute(
            turn, {**workspace, **self.tests}, test_round=len(self.runs) + 1, limits=self.limits
        )
        self.runs.append(run)
        turn.emit(
            "tests_ran",
            test_round=run.test_round,
            passed=run.passed,
            exit_code=run.exit_code,
            timed_out=run.timed_out,
            totals=run.totals,
            duration_s=run.duration_s,
        )
        turn.write_artifact(TEST_REPORT, render_test_report(self.runs))
        return run

    async def _debug(
        self, run: PytestRun, workspace: dict[str, str], news: tuple[Message, ...], turn: Turn
    ) -> BugReport:
        debugger = self.action_named(DebugError.name)
        assert isinstance(debugger, DebugError)
        return await debugger.analyse(
            self.context(debugger, news, turn), run, {**workspace, **self.tests}, news[-1:]
        )

    def _message(
        self,
        action: str,
        content: str,
        news: tuple[Message, ...],
        payload: Any,
        to: tuple[str, ...],
    ) -> Message:
        message = Message(
            cause_by=action,
            sent_from=self.name,
            send_to=to,
            content=content,
            payload=payload,
            parents=tuple(dict.fromkeys(m.id for m in news if m.id)),
        )
        self.memory.add(message)
        return message


def _test_targets(workspace: dict[str, str]) -> dict[str, str]:
    """Module path -> test file path, for each module worth its own tests."""
    modules = [
        p
        for p in workspace
        if p.endswith(".py")
        and not is_test(p)
        and PurePosixPath(p).name not in ("__init__.py", "__main__.py")
    ]
    targets: dict[str, str] = {}
    for module in modules or [p for p in workspace if not is_test(p)][:1]:
        path = PurePosixPath(module)
        name = f"tests/test_{path.stem}.py"
        if name in targets.values():  # two modules with one name in different packages
            name = f"tests/test_{'_'.join((*path.parent.parts, path.stem))}.py"
        targets[module] = name
    return targets


def _module_of(test: str, workspace: dict[str, str]) -> str:
    for module, path in _test_targets(workspace).items():
        if path == test:
            return module
    return test


def _run_text(run: PytestRun) -> str:
    verdict = "PASSED" if run.passed else ("TIMED OUT" if run.timed_out else "FAILED")
    return (
        f"Test round {run.test_round}: {verdict} ({run.totals}; exit code {run.exit_code})"
        f"\n```\n{run.output}\n```"
    )


def _report_text(report: BugReport, run: PytestRun) -> str:
    return (
        f"Bug report after test round {run.test_round} ({run.totals})\n\n"
        f"Files to fix: {', '.join(report.files_to_fix) or '(not named)'}\n\n"
        f"{report.analysis}\n\nWhat to change: {report.instructions}\n\n"
        f"Test output:\n```\n{run.output}\n```"
    )


def render_test_report(runs: Sequence[PytestRun]) -> str:
    """``docs/test_report.md``: the last verdict first, then every run's output."""
    last = runs[-1]
    lines = [
        "# Test report",
        "",
        f"**Result: {'PASSED' if last.passed else 'FAILED'}** after {len(runs)} run(s) "
        f"({last.totals}).",
        "",
        "| round | result | totals | exit code |",
        "|---|---|---|---|",
    ]
    for run in runs:
        lines.append(
            f"| {run.test_round} | {'passed' if run.passed else 'failed'} | {run.totals} "
            f"| {run.exit_code} |"
        )
    for run in runs:
        lines += ["", f"## Round {run.test_round}", "", "```", run.output.rstrip(), "```"]
    return "\n".join(lines) + "\n"
