"""The README's first command line does what the README promises, on a fresh machine.

The line (read from README.md, so the test and the README cannot drift apart) makes a new
virtual environment without the test extras, installs sopbus into it and runs the main
job. QA runs the generated project's tests with pytest in that environment, so pytest must
come with a plain ``pip install -e .``; without it the run used to end "completed" while
every test run said ``No module named pytest``. The verdict catches exactly that.

It runs in a copy of the source tree (the line creates ``.venv`` and ``runs/`` where it
runs), with pip's configured index (this machine's registry mirror, or PyPI).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from support.paths import ROOT

pytestmark = pytest.mark.slow

_NOT_SOURCE = shutil.ignore_patterns(
    ".venv",
    "venv",
    "runs",
    ".git",
    "__pycache__",
    "*.egg-info",
    ".mypy_cache",
    ".pytest_cache",
    "build",
    "dist",
)


def main_job_line() -> str:
    """The README's first command line: the first indented line that makes a venv."""
    for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines():
        if line.startswith("    python3 -m venv"):
            return line.strip()
    raise AssertionError("README.md has no indented `python3 -m venv ...` line")


def test_the_line_installs_without_test_extras_and_runs_the_main_job() -> None:
    line = main_job_line()
    assert "pip install -q -e . " in line and "sopbus run scenarios/software_company.toml" in line
    assert "[test]" not in line  # the point: no test extras, and QA still has its pytest


def _line_env() -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")
    }
    # `python3` must be the system's, not this test run's venv (the line makes its own).
    venv_bin = os.environ.get("VIRTUAL_ENV", "/nonexistent") + "/bin"
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != venv_bin)
    env.pop("COLUMNS", None)
    return env


def _run_line(tree: Path, extra: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", main_job_line() + extra],
        cwd=tree,
        env=_line_env(),
        capture_output=True,
        text=True,
        timeout=1800,
    )


def _assert_qa_passed(run: Path) -> dict[str, object]:
    summary = json.loads((run / "summary.json").read_text())
    assert (summary["status"], summary["provider"]) == ("completed", "sim")
    assert summary["verdict"]["passed"] is True, summary["verdict"]
    assert "QA's tests passed" in summary["verdict"]["reason"]
    report = (run / "artifacts" / "docs" / "test_report.md").read_text()
    assert "**Result: PASSED**" in report and "No module named pytest" not in report
    assert summary["llm_calls"] <= 20  # no fix rounds: QA had pytest from the first run
    return summary


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the source tree where the README's line ran as written."""
    if shutil.which("bash") is None:
        pytest.skip("bash is needed to run the README's line as written (apt-get install bash)")
    tree = tmp_path_factory.mktemp("readme") / "sopbus"
    shutil.copytree(ROOT, tree, ignore=_NOT_SOURCE)
    done = _run_line(tree)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return tree


def test_the_readme_main_job_passes_qa_in_a_fresh_venv(tree: Path) -> None:
    (run,) = (tree / "runs").iterdir()
    _assert_qa_passed(run)


def test_the_main_job_passes_on_the_local_sandbox_under_a_hostile_folder(tree: Path) -> None:
    """As on a machine without bubblewrap: the same line with ``--sandbox local``, its runs
    under a folder whose ``conftest.py`` writes a marker and whose ``pytest.ini`` is broken
    (and the tree's own ``pyproject.toml`` above that, with sopbus's pytest settings)."""
    outside = tree / "outside"
    outside.mkdir()
    marker = outside / "conftest-ran"
    (outside / "conftest.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    (outside / "pytest.ini").write_text("[pytest]\naddopts = --no-such-option-from-outside\n")
    done = _run_line(tree, " --sandbox local --runs-dir outside/runs")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (run,) = (outside / "runs").iterdir()
    _assert_qa_passed(run)
    assert not marker.exists()
