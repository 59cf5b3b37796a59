"""QA's test runs: pytest over the generated project, for real, in the sandbox (a scratch
copy of the workspace, a clean environment without secrets, rlimits, a timeout, no network
where the OS allows), hermetic on every backend: the project is its own rootdir, and no
configuration or conftest.py from above the scratch directory is read. ``RunCode`` is the
action; ``PytestRun`` what one run did, as QA publishes it.
"""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel, Field

from sopbus.bus import SandboxLimits, Turn, run_sandboxed

from .._action import Action
from ._util import WORKSPACE, tail

PYTEST = (
    "python",
    "-m",
    "pytest",
    "-q",
    "--no-header",
    "-p",
    "no:cacheprovider",
    # Hermetic: the generated project is its own rootdir, and no conftest.py or ini file
    # above the scratch directory is read (sopbus's own pyproject.toml, a user's
    # pytest.ini above the runs directory). `-c` names the project's own config file, or
    # none (see pytest_command).
    "--rootdir=.",
    "--confcutdir=.",
)


NO_CONFIG = "/dev/null"  # pytest reads an empty file as "no configuration"


# Where pytest looks for its configuration in a project's root, and what marks it as pytest's.
_CONFIGS = (
    ("pytest.ini", ""),
    (".pytest.ini", ""),
    ("pyproject.toml", "[tool.pytest.ini_options]"),
    ("tox.ini", "[pytest]"),
    ("setup.cfg", "[tool:pytest]"),
)


# Plugins installed next to sopbus (trio, hypothesis) are not the generated project's, and
# loading them costs seconds per run.
PYTEST_ENV = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}


_PYTEST_TOTALS = re.compile(
    r"^=*\s*((?:\d+ (?:passed|failed|errors?|skipped)|no tests ran).*?)\s*=*$", re.M
)


# pytest's own timing ("13 passed in 0.31s", "in 61.20s (0:01:01)") is wall clock, different
# on every run. It is cut from what QA publishes and asks: the same code then gives the same
# messages and prompts, so a replay or a resume finds its recorded answers (keyed by prompt)
# and `sopbus diff` compares what the tests said, not how fast the machine was.
_PYTEST_TIME = re.compile(r" in \d+(?:\.\d+)?s(?: \(\d+:\d\d:\d\d\))?(?=\s*=*\s*$)", re.M)


class PytestRun(BaseModel):
    """What one run of the tests did (the ``RunCode`` message's payload)."""

    test_round: int
    passed: bool
    exit_code: int | None
    timed_out: bool
    duration_s: float = Field(exclude=True)  # wall clock: in the tests_ran event, not the message
    totals: str
    network_isolated: bool
    output: str


class RunCode(Action):
    """Run the tests for real in the sandbox (no model call)."""

    async def execute(
        self, turn: Turn, files: dict[str, str], *, test_round: int, limits: SandboxLimits
    ) -> PytestRun:
        root = turn.artifacts_dir
        workspace = root / WORKSPACE if root is not None and (root / WORKSPACE).is_dir() else None
        command = pytest_command(_root_files(workspace, files))
        result = await run_sandboxed(
            command,
            workspace=workspace,
            files=None if workspace else files,
            limits=limits,
            env=PYTEST_ENV,
        )
        stdout = _PYTEST_TIME.sub("", result.stdout)
        output = stdout + (f"\n[stderr]\n{result.stderr}" if result.stderr.strip() else "")
        return PytestRun(
            test_round=test_round,
            passed=result.exit_code == 0,
            exit_code=result.exit_code,
            timed_out=result.timed_out,
            duration_s=round(result.duration_s, 3),
            totals=_totals(stdout, result.stderr, result.exit_code, result.timed_out),
            network_isolated=result.network_isolated,
            output=tail(output),
        )


def pytest_command(root_files: dict[str, str]) -> tuple[str, ...]:
    """pytest for the project whose top-level files are ``root_files`` (name -> text): with
    its own configuration file when it has one, else with none at all."""
    for name, marker in _CONFIGS:
        if name in root_files and marker in root_files[name]:
            return (*PYTEST, "-c", name, "tests")
    return (*PYTEST, "-c", NO_CONFIG, "tests")


def _root_files(workspace: Path | None, files: dict[str, str]) -> dict[str, str]:
    """The project's top-level configuration candidates and their text."""
    names = {name for name, _ in _CONFIGS}
    if workspace is None:
        return {name: text for name, text in files.items() if name in names}
    found = {}
    for name in names:
        path = workspace / name
        if path.is_file() and not path.is_symlink():
            found[name] = path.read_text(encoding="utf-8", errors="replace")
    return found


def _totals(stdout: str, stderr: str, exit_code: int | None, timed_out: bool) -> str:
    """pytest's summary line; where there is none, why: it timed out, or it could not start
    (a usage error, an internal error), in its own words."""
    totals = _PYTEST_TOTALS.findall(stdout)
    if totals:
        return str(totals[-1])
    if timed_out:
        return "pytest timed out before its summary"
    said = [line.strip() for line in (stderr + "\n" + stdout).splitlines() if line.strip()]
    errors = [line for line in said if "error" in line.lower()]
    why = (errors or said or [f"exit status {exit_code}"])[-1]
    return f"pytest could not start: {why[:300]}"
