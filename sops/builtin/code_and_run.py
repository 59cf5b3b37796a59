"""Code-and-run pair (AutoGen's assistant + code executor, on the bus).

``[sop]`` options::

    data = ["data/prices.csv"]        # files copied beside the script (relative to the scenario)
    check = "data/check_pct_change.py"  # the acceptance program; exit 0 means the task holds
    max_attempts = 4                  # scripts the Coder may write before the run fails
    timeout_s = 60                    # per sandboxed run (script or check)
    memory_mb = 1024                  # address-space cap per sandboxed process
    script_name = "script.py"

The ``Coder`` writes a script (``WriteScript``: a plan and the code); the ``Executor`` runs it
in the sandbox and publishes ``RunScript`` (exit status, stdout, stderr, the check's
verdict). A failure is the Coder's next input. The run ends with ``stop_condition`` when a
script passes the check, and fails (``error``) when ``max_attempts`` scripts did not.
Outputs are kept in the run's ``artifacts/attempt-<n>/``. The verdict: a script passed the
acceptance check.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path, PurePosixPath

import msgspec

from sopbus.bus import ConfigError, Message, RunRecord, SandboxLimits, Verdict
from sopbus.roles.chat import RUN, Coder, Executor, RunScript, WriteScript

from .. import _sop
from .._sop import SopContext, Team


class CodeRunOptions(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    data: list[str] = []
    check: str | None = None
    max_attempts: int = 4
    timeout_s: float = 60.0
    memory_mb: int = 1024
    script_name: str = "script.py"


def accepted(published: Sequence[Message], round: int) -> str | None:
    """The stop condition: a run report that passed the acceptance check."""
    for m in published:
        if m.cause_by == RUN and isinstance(m.payload, dict) and m.payload.get("accepted"):
            return f"the script passed the acceptance check on attempt {m.payload['attempt']}"
    return None


def build(ctx: SopContext) -> Team:
    o = ctx.options_as(CodeRunOptions)
    file = f"{ctx.scenario.path}: "
    data = {Path(rel).name: _read(ctx, rel, f"$.sop.data[{i}]") for i, rel in enumerate(o.data)}
    check = _read(ctx, o.check, "$.sop.check").decode("utf-8") if o.check else None
    try:
        limits = SandboxLimits(timeout_s=o.timeout_s, memory_mb=o.memory_mb)
        coder = Coder(
            max_attempts=o.max_attempts,
            llm_defaults=ctx.llm_defaults,
            actions=[WriteScript(files_note=files_note(data))],
        )
        runner = RunScript(
            script_name=_script_name(o.script_name), data=data, check=check, limits=limits
        )
    except ValueError as exc:
        raise ConfigError(f"{file}{exc} - in [sop]") from None
    executor = Executor(actions=[runner], llm_defaults=ctx.llm_defaults)
    return Team(roles=[coder, executor], stop=accepted, verdict=checker_passed)


def checker_passed(record: RunRecord) -> Verdict:
    """The code-and-run verdict: a script ran and passed the acceptance check."""
    runs = [m.payload for m in record.of(RUN) if isinstance(m.payload, dict)]
    good = [p for p in runs if p.get("accepted")]
    if good:
        return Verdict(
            passed=True,
            reason=f"the script passed the acceptance check on attempt {good[0].get('attempt')}",
        )
    if not runs:
        return Verdict(
            passed=False, reason=f"no script was run (the run ended: {record.end_reason})"
        )
    last = runs[-1]
    return Verdict(
        passed=False,
        reason=f"no script passed the check: {len(runs)} attempt(s), "
        f"the last exited {last.get('exit_code')}"
        f" (check exit {last.get('check_exit_code')})",
    )


def files_note(data: dict[str, bytes]) -> str:
    """What the script finds beside it: each data file's name and first lines."""
    if not data:
        return ""
    parts = []
    for name, content in data.items():
        head = "\n".join(content.decode("utf-8", errors="replace").splitlines()[:3])
        parts.append(f"`{name}` (first lines):\n{head}")
    return "The script runs in a directory that holds " + "\n".join(parts) + "\n"


def _read(ctx: SopContext, rel: str, where: str) -> bytes:
    path = ctx.resolve(rel)
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ConfigError(
            f"{ctx.scenario.path}: cannot read {path} named at `{where}`: "
            f"{exc.strerror}; paths are relative to the scenario file"
        ) from None


def _script_name(name: str) -> str:
    path = PurePosixPath(name)
    if len(path.parts) != 1 or path.suffix != ".py":
        raise ValueError(f"script_name {name!r} must be a plain file name ending in .py")
    return name


SOP = _sop.SOP(
    name="code_and_run",
    description="Code-and-run pair: a coder writes a Python script, an executor runs it "
    "in the sandbox, checks the result and sends failures back",
    build=build,
)
