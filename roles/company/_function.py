"""One function from its specification: the team of the HumanEval SOPs.

The task is a HumanEval-style prompt (a signature and a docstring). ``FunctionEngineer``
writes the whole function (``WriteFunction``) and revises it (``ReviseFunction``) from a
review or from failed tests; ``FunctionReviewer`` reviews the first draft against the
specification (``ReviewFunction``); ``FunctionTester`` writes pytest tests from the
specification once (``WriteFunctionTests``), runs them for real with QA's ``RunCode`` (the
sandbox, hermetic pytest), sends failures back for at most ``max_fix_rounds`` revisions,
and finally publishes the code it last tested (``SubmitFunction``).

Whoever finishes publishes the answer as the run's last message, its content the code and
nothing else, and writes the same code to the artifact ``solution.py``: that is where an
eval reads the answer from.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from typing import Any

from sopbus.bus import Message, ModelOutputError, SandboxLimits, Turn

from .._action import Action, ActionContext
from .._role import Role
from ._code import CodeFile, CodeReview
from ._qa import PytestFile
from ._testrun import PytestRun, RunCode
from ._util import listing, task_prompt

SOLUTION = "solution.py"
"""The artifact (and the module name in the sandbox) that holds the answer."""
TESTS = "tests/test_solution.py"
SPEC = "UserRequirement"  # the run's idea, published by the run: the prompt

_FENCE = re.compile(r"^\s*```[A-Za-z0-9_+-]*\s*\n(.*?)\n\s*```\s*$", re.S)
_DEF = re.compile(r"^def\s+([A-Za-z_]\w*)\s*\(", re.M)


def entry_point(prompt: str) -> str | None:
    """The function a prompt asks for: its last top-level ``def`` (HumanEval prompts may
    define helpers before it)."""
    try:
        tree = ast.parse(prompt)
    except SyntaxError:
        names = _DEF.findall(prompt)
        return names[-1] if names else None
    defs = [n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    return defs[-1] if defs else None


def complete(prompt: str, code: str) -> str:
    """The model's code as a module that defines the function: a surrounding Markdown fence
    taken off, and the prompt put in front when the code is only the function's body (a
    model that answers the way HumanEval's completions are written)."""
    fenced = _FENCE.match(code)
    text = fenced.group(1) if fenced else code
    name = entry_point(prompt)
    if name is None or re.search(rf"^\s*(async\s+)?def\s+{re.escape(name)}\s*\(", text, re.M):
        return text.rstrip() + "\n"
    return prompt.rstrip("\n") + "\n" + text.rstrip() + "\n"


class WriteFunction(Action):
    """Write the function the specification asks for (one call)."""

    instruction = (
        "Implement the Python function specified above. Write the whole module: the "
        "imports it needs, any helper it uses, and the function with its signature exactly "
        "as given, so that it does what the docstring says and passes its examples. "
        "Python 3.11, standard library only, no tests, no printing, no input. Put the code, "
        "and only the code, into `code`."
    )
    Output = CodeFile
    default_max_tokens = 2048

    async def write(self, ctx: ActionContext, spec: Message) -> str:
        prompt = task_prompt(ctx, self.name, self.instruction, context=(spec,))
        return (await self.ask(ctx, prompt, output=CodeFile)).code


class ReviseFunction(Action):
    """Rewrite the function so that what a review or a test run reported is fixed."""

    instruction = (
        "Rewrite solution.py (shown above) so that the problems reported above are fixed. "
        "Keep the function's signature as the specification gives it. Where a failing test "
        "contradicts the specification's docstring, follow the docstring. Put the whole "
        "corrected module, and only the code, into `code`."
    )
    Output = CodeFile
    default_max_tokens = 2048

    async def revise(self, ctx: ActionContext, spec: Message, code: str, report: Message) -> str:
        prompt = task_prompt(
            ctx, self.name, self.instruction, context=(spec, report), code=listing({SOLUTION: code})
        )
        return (await self.ask(ctx, prompt, output=CodeFile)).code


class ReviewFunction(Action):
    """Review the function against its specification."""

    instruction = (
        "Review solution.py (shown above) against the specification: does it do what the "
        "docstring says for every input it describes, including its examples and the edge "
        "cases (empty input, ties, negative numbers, case)? Answer lgtm = true when it is "
        "correct; otherwise list each concrete problem in `issues`."
    )
    Output = CodeReview

    async def review(self, ctx: ActionContext, spec: Message, code: str) -> CodeReview:
        prompt = task_prompt(
            ctx, self.name, self.instruction, context=(spec,), code=listing({SOLUTION: code})
        )
        return await self.ask(ctx, prompt, output=CodeReview)


class WriteFunctionTests(Action):
    """Write pytest tests of the function from its specification (one call, once)."""

    instruction = (
        "Write a pytest file that checks the function of the specification above, "
        "imported with `from solution import $name`. Test what the docstring states: each "
        "of its examples, and the edge cases it implies. Assert exact expected values you "
        "are sure of; no randomness, no network, no files. Put the whole file into `code`."
    )
    Output = PytestFile
    default_max_tokens = 2048

    async def write(self, ctx: ActionContext, spec: Message, name: str) -> str:
        text = self.instruction.replace("$name", name)
        prompt = task_prompt(ctx, self.name, text, context=(spec,))
        return (await self.ask(ctx, prompt, output=PytestFile)).code


class SubmitFunction(Action):
    """Publish the final answer: the code last tested (no model call)."""


def _answer(role: Role, code: str, news: Sequence[Message], turn: Turn, **facts: Any) -> Message:
    """The answer message (its content the code alone) and the ``solution.py`` artifact."""
    turn.write_artifact(SOLUTION, code)
    return _message(role, SubmitFunction.name, code, news, {"code": code, **facts}, ())


def _message(
    role: Role,
    action: str,
    content: str,
    news: Sequence[Message],
    payload: Any,
    to: tuple[str, ...],
) -> Message:
    message = Message(
        cause_by=action,
        sent_from=role.name,
        send_to=to,
        content=content,
        payload=payload,
        parents=tuple(dict.fromkeys(m.id for m in news if m.id)),
    )
    role.memory.add(message)
    return message


def _spec(role: Role) -> Message | None:
    return role.memory.latest(SPEC)


class FunctionEngineer(Role):
    """Writes the function from the prompt, then revises it from what is reported to it.

    Alone (``humaneval_solo``) its first draft is the answer: the ``WriteFunction`` message
    is the run's last. In a team, a review or a failed test run addressed to it starts one
    ``ReviseFunction``; a review that found nothing passes the draft on unchanged, at no
    cost, so that the tester always tests a ``ReviseFunction``.
    """

    profile = "Python engineer"
    goal = "write a correct, simple Python function that does exactly what its docstring says"
    constraints = "standard library only; keep the signature the specification gives"
    watch = (SPEC,)
    actions = (WriteFunction, ReviseFunction)

    def __init__(self, **fields: Any) -> None:
        super().__init__(**fields)
        self.code = ""
        self.version = 0

    async def step(self, news: Sequence[Message], turn: Turn) -> Sequence[Message]:
        fresh = tuple(news)
        self.memory.extend(fresh)
        spec = _spec(self)
        if spec is None:
            return ()
        if any(m.cause_by == SPEC for m in fresh):
            writer = self.action_named(WriteFunction.name)
            assert isinstance(writer, WriteFunction)
            code = await writer.write(self.context(writer, fresh, turn), spec)
            return [self._publish(WriteFunction.name, spec, code, fresh, turn, "draft")]
        reports = [m for m in fresh if _needs_fix(m)]
        reviews = [m for m in fresh if m.cause_by == ReviewFunction.name]
        if reports:
            return [await self._revise(spec, reports[-1], fresh, turn, "tests failed")]
        if reviews:
            return [await self._after_review(spec, reviews[-1], fresh, turn)]
        return ()

    async def _after_review(
        self, spec: Message, review: Message, news: tuple[Message, ...], turn: Turn
    ) -> Message:
        payload = review.payload if isinstance(review.payload, dict) else {}
        if payload.get("lgtm") or not payload.get("issues"):
            # Nothing to fix (an LGTM, or a review that could not be read): passed on as it is.
            return self._publish(ReviseFunction.name, spec, self.code, news, turn, "review: lgtm")
        return await self._revise(spec, review, news, turn, "review")

    async def _revise(
        self, spec: Message, report: Message, news: tuple[Message, ...], turn: Turn, reason: str
    ) -> Message:
        reviser = self.action_named(ReviseFunction.name)
        assert isinstance(reviser, ReviseFunction)
        turn.emit("fixing", reason=reason, report=report.id)
        try:
            code = await reviser.revise(self.context(reviser, news, turn), spec, self.code, report)
        except ModelOutputError as exc:
            # A revision that cannot be read must not lose the code that can: it stays.
            turn.emit("revision_unreadable", error=str(exc)[:500])
            code, reason = self.code, f"{reason}; the revision was unreadable, the code kept"
        return self._publish(ReviseFunction.name, spec, code, news, turn, reason)

    def _publish(
        self,
        action: str,
        spec: Message,
        code: str,
        news: tuple[Message, ...],
        turn: Turn,
        reason: str,
    ) -> Message:
        self.code = complete(spec.content, code)
        self.version += 1
        turn.write_artifact(SOLUTION, self.code)
        payload = {"code": self.code, "version": self.version, "reason": reason}
        return _message(self, action, self.code, news, payload, self.send_to)


def _needs_fix(message: Message) -> bool:
    """A failed test run the tester wants fixed (not its last: its fix rounds are over)."""
    payload = message.payload
    wanted = isinstance(payload, dict) and bool(payload.get("fix_wanted"))
    return message.cause_by == RunCode.name and wanted


class FunctionReviewer(Role):
    """Reviews the engineer's first draft against the specification, once, and sends the
    review back to the engineer."""

    profile = "Code reviewer"
    goal = "find every way the function departs from its specification"
    constraints = "name concrete problems only; say lgtm when the code is correct"
    watch = (SPEC, WriteFunction)
    actions = (ReviewFunction,)

    async def step(self, news: Sequence[Message], turn: Turn) -> Sequence[Message]:
        fresh = tuple(news)
        self.memory.extend(fresh)
        drafts = [m for m in fresh if m.cause_by == WriteFunction.name]
        spec = _spec(self)
        if not drafts or spec is None:
            return ()
        reviewer = self.action_named(ReviewFunction.name)
        assert isinstance(reviewer, ReviewFunction)
        try:
            verdict = await reviewer.review(
                self.context(reviewer, fresh, turn), spec, drafts[-1].content
            )
        except ModelOutputError as exc:
            # An unreadable review names no problem: the draft goes on to the tests.
            turn.emit("review_unreadable", error=str(exc)[:500])
            verdict = CodeReview(lgtm=False, issues=[])
        issues = "\n".join(f"- {i}" for i in verdict.issues) or "(no usable review)"
        text = "LGTM" if verdict.lgtm else issues
        payload = verdict.model_dump(mode="json")
        return [_message(self, ReviewFunction.name, text, fresh, payload, (drafts[-1].sent_from,))]


class FunctionTester(Role):
    """Tests each revision with tests it wrote once from the specification, and sends the
    failures back (MetaGPT's executable feedback) for at most ``max_fix_rounds`` revisions;
    then publishes the code it last tested as the answer (see the module docstring)."""

    profile = "Test engineer"
    goal = "catch every way the function departs from its specification, by running it"
    constraints = "tests are exact, deterministic, fast, and use only pytest"
    watch = (SPEC, ReviseFunction)
    actions = (WriteFunctionTests, RunCode)

    def __init__(
        self,
        *,
        max_fix_rounds: int = 2,
        test_timeout_s: float = 30.0,
        test_memory_mb: int = 1024,
        **fields: Any,
    ) -> None:
        super().__init__(**fields)
        if max_fix_rounds < 0:
            raise ValueError(f"FunctionTester needs max_fix_rounds >= 0, got {max_fix_rounds}")
        self.max_fix_rounds = max_fix_rounds
        self.limits = SandboxLimits(
            timeout_s=test_timeout_s, memory_mb=test_memory_mb, cpu_s=max(1, int(test_timeout_s))
        )
        self.tests = ""
        self.runs: list[PytestRun] = []
        self.answered = False  # the answer is out: later revisions are not tested

    def fields(self) -> dict[str, Any]:
        return {
            **super().fields(),
            "max_fix_rounds": self.max_fix_rounds,
            "test_timeout_s": self.limits.timeout_s,
            "test_memory_mb": self.limits.memory_mb,
        }

    async def step(self, news: Sequence[Message], turn: Turn) -> Sequence[Message]:
        fresh = tuple(news)
        self.memory.extend(fresh)
        revisions = [m for m in fresh if m.cause_by in _CODE]
        spec = _spec(self)
        if not revisions or spec is None or self.answered:
            return ()
        code, to = revisions[-1].content, (revisions[-1].sent_from,)
        out: list[Message] = []
        if not self.tests:
            try:
                out.append(await self._write_tests(spec, fresh, turn, to))
            except ModelOutputError as exc:
                # No tests to run: the code is the answer as it stands, untested.
                turn.emit("tests_unreadable", error=str(exc)[:500])
                self.answered = True
                return [_answer(self, code, fresh, turn, tests_passed=False, test_runs=0)]
        run = await self._run(code, turn)
        fix = not run.passed and len(self.runs) - 1 < self.max_fix_rounds
        payload = {**run.model_dump(), "fix_wanted": fix}
        out.append(_message(self, RunCode.name, _run_text(run), fresh, payload, to))
        if fix:
            return out
        if not run.passed:
            turn.emit("test_rounds_exhausted", max_fix_rounds=self.max_fix_rounds)
        facts = {"tests_passed": run.passed, "test_runs": len(self.runs)}
        self.answered = True
        return [*out, _answer(self, code, fresh, turn, **facts)]

    async def _write_tests(
        self, spec: Message, news: tuple[Message, ...], turn: Turn, to: tuple[str, ...]
    ) -> Message:
        writer = self.action_named(WriteFunctionTests.name)
        assert isinstance(writer, WriteFunctionTests)
        name = entry_point(spec.content) or "solution"
        code = await writer.write(self.context(writer, news, turn), spec, name)
        self.tests = _importing(complete("", code), name)
        turn.write_artifact(TESTS, self.tests)
        payload = {"files": {TESTS: self.tests}}
        return _message(
            self, WriteFunctionTests.name, listing({TESTS: self.tests}), news, payload, to
        )

    async def _run(self, code: str, turn: Turn) -> PytestRun:
        runner = self.action_named(RunCode.name)
        assert isinstance(runner, RunCode)
        files = {SOLUTION: code, TESTS: self.tests}
        run = await runner.execute(turn, files, test_round=len(self.runs) + 1, limits=self.limits)
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
        return run


_CODE = (WriteFunction.name, ReviseFunction.name)  # the messages that carry the code


def _importing(tests: str, name: str) -> str:
    """The tests with an import of the function when the model forgot one (a test file
    without it fails on a NameError that says nothing about the code)."""
    if re.search(r"^\s*(from\s+solution\s+import|import\s+solution)\b", tests, re.M):
        return tests
    return f"from solution import {name}\n\n{tests}"


def _run_text(run: PytestRun) -> str:
    verdict = "PASSED" if run.passed else ("TIMED OUT" if run.timed_out else "FAILED")
    return (
        f"Test run {run.test_round}: {verdict} ({run.totals}; exit code {run.exit_code})"
        f"\n```\n{run.output}\n```"
    )
