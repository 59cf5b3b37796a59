"""QA's pytest runs the generated project hermetically, on every sandbox backend.

On a machine without bubblewrap the local backend's scratch directory sits under the run
directory, and pytest used to climb from there to whatever configuration lay above it:
sopbus's own ``pyproject.toml`` (``trio_mode``, ``filterwarnings = error``) or a user's
``pytest.ini`` and ``conftest.py``. It died with ``Unknown config option``, the verdict said
"no pytest summary", and the engineer "fixed" working code. Here a marker-writing
``conftest.py`` and a broken ``pytest.ini`` sit above the scratch root: neither may be used,
and a project's own configuration still is.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sopbus.bus import SandboxLimits, SandboxSettings, Turn
from sopbus.bus.sandbox import using
from sopbus.roles.company._testrun import PytestRun, RunCode, pytest_command
from support.sandbox import needs_bwrap

TESTS = {
    "app/__init__.py": "",
    "app/core.py": "def double(x):\n    return 2 * x\n",
    "tests/test_core.py": "from app.core import double\n\n\ndef test_double():\n"
    "    assert double(2) == 4\n",
}


@pytest.fixture(params=[pytest.param("bwrap", marks=needs_bwrap), "local"])
def outside(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    """A folder with a hostile pytest configuration, and the sandbox's scratch root inside it
    (as the run directory's ``.sandbox`` is inside the user's runs directory)."""
    marker = tmp_path / "conftest-ran"
    (tmp_path / "conftest.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    (tmp_path / "pytest.ini").write_text("[pytest]\naddopts = --no-such-option-from-outside\n")
    (tmp_path / "pyproject.toml").write_text("[tool.pytest.ini_options]\ntrio_mode = true\n")
    with using(SandboxSettings(backend=request.param, scratch_root=tmp_path / "runs" / "scratch")):
        yield tmp_path


async def _run(files: dict[str, str]) -> PytestRun:
    return await RunCode().execute(
        Turn(run_id="t", round=1, role="QA"),
        files,
        test_round=1,
        limits=SandboxLimits(timeout_s=60),
    )


async def test_configuration_above_the_scratch_directory_is_not_used(outside: Path) -> None:
    run = await _run(TESTS)
    assert run.passed, run.output
    assert run.totals == "1 passed"
    assert not (outside / "conftest-ran").exists()  # the outer conftest.py never ran
    assert "no-such-option" not in run.output


async def test_the_projects_own_configuration_is_used(outside: Path) -> None:
    # Only the project's own pytest.ini makes pytest collect check_*.py files.
    own = {
        "app/__init__.py": "",
        "app/core.py": TESTS["app/core.py"],
        "tests/check_core.py": TESTS["tests/test_core.py"],
        "pytest.ini": "[pytest]\npython_files = check_*.py\n",
    }
    run = await _run(own)
    assert run.passed, run.output
    assert run.totals == "1 passed"
    assert not (outside / "conftest-ran").exists()


async def test_a_pytest_that_cannot_start_says_why(outside: Path) -> None:
    broken = {**TESTS, "pytest.ini": "[pytest]\naddopts = --no-such-option-of-the-project\n"}
    run = await _run(broken)
    assert not run.passed
    assert run.totals.startswith("pytest could not start: ")
    assert "no-such-option-of-the-project" in run.totals
    assert not (outside / "conftest-ran").exists()


def test_the_command_names_the_projects_config_or_none() -> None:
    assert pytest_command({})[-3:] == ("-c", "/dev/null", "tests")
    assert pytest_command({"pytest.ini": "[pytest]\n"})[-3:] == ("-c", "pytest.ini", "tests")
    # A pyproject.toml without pytest's table is not pytest's configuration.
    assert pytest_command({"pyproject.toml": "[project]\nname = 'x'\n"})[-2] == "/dev/null"
    assert pytest_command({"setup.cfg": "[tool:pytest]\n"})[-2] == "setup.cfg"
    assert "--confcutdir=." in pytest_command({}) and "--rootdir=." in pytest_command({})


@pytest.mark.parametrize("untrusted", [False, True])
def test_auto_falling_back_to_local_says_so_once_per_run(
    monkeypatch: pytest.MonkeyPatch, untrusted: bool
) -> None:
    from loguru import logger

    from sopbus.bus.sandbox import _bwrap, _settings

    monkeypatch.setattr(_bwrap, "probe", lambda: _bwrap.Probe(None, (), "bwrap is not on PATH"))
    said: list[str] = []
    sink = logger.add(lambda m: said.append(m.record["message"]), level="INFO")
    try:
        with using(SandboxSettings(backend="auto", untrusted=untrusted)) as settings:
            assert [_settings.resolve(settings) for _ in range(3)] == ["local"] * 3
    finally:
        logger.remove(sink)
    assert len(said) == 1 and "bwrap is not on PATH" in said[0]
    assert ("without isolation; install bubblewrap" in said[0]) is untrusted
    assert ("auto chose the local backend" in said[0]) is not untrusted
