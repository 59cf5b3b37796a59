"""The code-and-run pair: a ``Coder`` writes a Python script, an ``Executor`` runs it.

The Executor runs each script in the sandbox QA's test runner uses (:func:`sopbus.bus.run_sandboxed`:
scratch copy, clean environment, limits, no network) with the task's data files beside it,
keeps the working directory under the run's artifacts (``attempt-<n>/``: the script, its
outputs such as a PNG), then runs the scenario's acceptance check (a program, also
sandboxed, in a copy of that directory). It publishes ``RunScript`` with the exit status,
stdout, stderr and the check's verdict. A failure goes back to the Coder as its next input;
after ``max_attempts`` scripts that fail, the Coder ends the run with
:class:`ScriptFailedError`. An accepted script ends the run through the SOP's stop condition.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from sopbus.bus import Message, SandboxLimits, SandboxResult, SopbusError, Turn, run_sandboxed

from .._action import Action, ActionContext, ActionResult
from .._role import Role

WRITE, RUN = "WriteScript", "RunScript"
CHECK_NAME = "acceptance_check.py"
_SHOWN_CHARS = 4000  # the end of a long stream: a traceback's last lines say what failed


class ScriptFailedError(SopbusError):
    """The Coder's scripts kept failing (or failing the acceptance check) until the
    attempts ran out. The run fails with this reason."""


class Script(BaseModel):
    plan: str = Field(description="in two or three sentences, how the script does the task")
    code: str = Field(description="the whole Python 3 script, run as `python script.py`")


class WriteScript(Action):
    """Writes (or fixes) the script for the task; ``files_note`` says what is beside it."""

    instruction = (
        "Write one Python 3 script that does the task in the context. $files "
        "Only the Python standard library is installed (no pandas, numpy or matplotlib). "
        "Print a short summary of the result to stdout. If the context shows that your last "
        "script failed or did not pass the acceptance check, fix exactly that and keep what "
        "worked."
    )
    Output = Script

    def __init__(self, *, files_note: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.instruction = self.instruction.replace("$files", files_note)

    def render(self, output: BaseModel) -> str:
        assert isinstance(output, Script)
        return f"{output.plan}\n\n```python\n{output.code.rstrip()}\n```"


class RunScript(Action):
    """Runs the latest script in the sandbox, then the acceptance check (no model call)."""

    def __init__(
        self,
        *,
        script_name: str = "script.py",
        data: Mapping[str, bytes] | None = None,
        check: str | None = None,
        limits: SandboxLimits = SandboxLimits(timeout_s=60),
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.script_name, self.data, self.check = script_name, dict(data or {}), check
        self.limits = limits

    async def run(self, ctx: ActionContext) -> ActionResult:
        scripts = ctx.memory.by_cause(WRITE)
        code = str((scripts[-1].payload or {}).get("code", ""))
        attempt = len(scripts)
        with ExitStack() as stack:
            keep = self._keep_dir(ctx.turn, attempt, stack)
            ran = await run_sandboxed(
                ["python", self.script_name],
                limits=self.limits,
                keep=keep,
                files={**self.data, self.script_name: code},
            )
            checked = await self._accept(ran, keep)
            _record_kept(ctx.turn, keep)
        accepted = ran.exit_code == 0 and (checked is None or checked.exit_code == 0)
        ctx.turn.emit(
            "script_ran",
            attempt=attempt,
            exit_code=ran.exit_code,
            timed_out=ran.timed_out,
            accepted=accepted,
            kept=str(keep),
            network_isolated=ran.network_isolated,
        )
        payload = {
            "attempt": attempt,
            "exit_code": ran.exit_code,
            "timed_out": ran.timed_out,
            "stdout": ran.stdout,
            "stderr": ran.stderr,
            "accepted": accepted,
            "check_exit_code": checked.exit_code if checked else None,
            "check_output": (checked.stdout + checked.stderr) if checked else None,
        }
        return ActionResult(content=report(payload), payload=payload)

    def _keep_dir(self, turn: Turn, attempt: int, stack: ExitStack) -> Path:
        root = turn.artifacts_dir
        if root is None:  # no run store (a bare test): keep it only while the check runs
            root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="sopbus-keep-")))
        return root / f"attempt-{attempt}"

    async def _accept(self, ran: SandboxResult, keep: Path) -> SandboxResult | None:
        if self.check is None or ran.exit_code != 0:
            return None
        # Fresh data beside the outputs, so a script that edited its input cannot pass.
        return await run_sandboxed(
            ["python", CHECK_NAME],
            workspace=keep,
            limits=self.limits,
            files={**self.data, CHECK_NAME: self.check},
        )


def _record_kept(turn: Turn, keep: Path) -> None:
    """Records each file the sandbox left in ``keep`` as an artifact the run wrote (the same
    bytes, rewritten through the store), so that ``sopbus verify`` holds it against its
    SHA-256 and reports any file in ``artifacts/`` that no write recorded."""
    root = turn.artifacts_dir
    if root is None or not keep.is_dir():
        return
    for path in sorted(keep.rglob("*")):
        if path.is_file() and not path.is_symlink():
            turn.write_artifact(path.relative_to(root).as_posix(), path.read_bytes())


def report(p: Mapping[str, Any]) -> str:
    """The run as the Coder (and ``sopbus show``) reads it."""
    if p["timed_out"]:
        status = "timed out (killed)"
    else:
        status = f"exit status {p['exit_code']}" + (" (failed)" if p["exit_code"] != 0 else "")
    lines = [
        f"Attempt {p['attempt']}: {status}",
        "--- stderr ---",
        _tail(p["stderr"]) or "(empty)",
        "--- stdout ---",
        _tail(p["stdout"]) or "(empty)",
    ]
    if p["check_exit_code"] is not None:
        verdict = "passed" if p["check_exit_code"] == 0 else "FAILED: fix these problems"
        lines += [f"--- acceptance check: {verdict} ---", _tail(p["check_output"] or "")]
    elif p["exit_code"] == 0 and not p["timed_out"]:
        lines.append("(no acceptance check configured)")
    return "\n".join(lines)


def _tail(text: str) -> str:
    text = text.rstrip()
    return text if len(text) <= _SHOWN_CHARS else "[...]\n" + text[-_SHOWN_CHARS:]


class Coder(Role):
    """Writes the script for the task and fixes it from the Executor's reports."""

    profile = "Python developer"
    goal = "A script that does the data task and passes its acceptance check"
    watch = ("UserRequirement", RUN)
    actions = (WriteScript,)

    def __init__(self, *, max_attempts: int = 4, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if max_attempts < 1:
            raise ValueError(f"max_attempts must be 1 or more, got {max_attempts}")
        self.max_attempts = max_attempts

    def fields(self) -> dict[str, Any]:
        return {**super().fields(), "max_attempts": self.max_attempts}

    async def step(self, news: Sequence[Message], turn: Turn) -> Sequence[Message]:
        fresh = tuple(news)
        self.memory.extend(fresh)
        failed = [m for m in fresh if m.cause_by == RUN and not (m.payload or {}).get("accepted")]
        if not failed and not any(m.cause_by == "UserRequirement" for m in fresh):
            return ()  # an accepted script: nothing left to do
        written = len(self.memory.by_cause(WRITE))
        if failed and written >= self.max_attempts:
            raise ScriptFailedError(
                f"the script still fails after {written} attempt(s) (max_attempts="
                f"{self.max_attempts}); last report:\n{_tail(failed[-1].content)[-1500:]}\n"
                f"Raise [sop].max_attempts or use a stronger model for {self.name}."
            )
        return await self._run_in_order(self._actions, fresh, turn)


class Executor(Role):
    """Runs each script in the sandbox and checks the result against the task."""

    profile = "Code executor"
    goal = "Run each script safely and report exactly what happened"
    watch = (WRITE,)
    actions = (RunScript,)
