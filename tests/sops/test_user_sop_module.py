"""A user's SOP module that exits, interrupts, raises in build() or never finishes importing
is exit 2 naming the file and what it did, for ``validate`` and ``run`` (issue 28, item 9);
before, ``sys.exit(0)`` at import made both exit 0 with no output and a sleep hung them."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from support.cli import sopbus

TEAM = '[scenario]\nname = "x"\nidea = "a haiku"\nsop = "my_team:SOP"\n'
BUILD_FAILS = """from sopbus.sops import SOP

def build(ctx):
    raise ValueError("no team today")

SOP = SOP(name="mine", description="fails", build=build)
"""
MODULE_TAIL = "from sopbus.sops.software_company import SOP\n"  # a module that works


def run(
    command: str, tmp_path: Path, module: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    (tmp_path / "my_team.py").write_text(module)
    path = tmp_path / "team.toml"
    path.write_text(TEAM)
    extra = ("--runs-dir", tmp_path / "runs") if command == "run" else ()
    return sopbus(command, path, *extra, cwd=tmp_path, timeout=60, env=env)


def assert_usage_error(done: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr and done.stderr.startswith("sopbus: error: ")
    for needle in needles:
        assert needle in done.stderr, done.stderr


@pytest.mark.parametrize("command", ["validate", "run"])
@pytest.mark.parametrize(
    ("module", "said"),
    [
        ("import sys\nsys.exit(0)\n", "it called sys.exit(0) (at {file}, line 2)"),
        ("raise SystemExit(7)\n", "it called sys.exit(7) (at {file}, line 1)"),
        ("raise KeyboardInterrupt\n", "KeyboardInterrupt (at {file}, line 1)"),
    ],
)
def test_a_module_that_exits_or_interrupts_at_import(
    command: str, module: str, said: str, tmp_path: Path
) -> None:
    done = run(command, tmp_path, module)
    file = tmp_path / "my_team.py"
    assert_usage_error(
        done,
        f"{tmp_path / 'team.toml'}: the SOP module 'my_team' named at $.scenario.sop "
        "failed while it was imported",
        said.format(file=file),
        "must not",
    )
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("command", ["validate", "run"])
def test_a_build_that_raises(command: str, tmp_path: Path) -> None:
    done = run(command, tmp_path, BUILD_FAILS)
    assert_usage_error(
        done,
        "the build() of SOP 'mine' (named at $.scenario.sop) failed: ValueError: no team "
        f"today (at {tmp_path / 'my_team.py'}, line 4)",
        "fix the SOP's build function",
    )
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("command", ["validate", "run"])
def test_a_module_that_never_finishes_importing(command: str, tmp_path: Path) -> None:
    # The default bound is 10 s; the variable shortens it so the test is quick.
    started = time.monotonic()
    hang = "import time\nwhile True:\n    time.sleep(1)\n"
    done = run(command, tmp_path, hang, env={"SOPBUS_IMPORT_TIMEOUT_S": "1.5"})
    assert time.monotonic() - started < 30  # bounded: the command came back by itself
    assert_usage_error(
        done,
        f"{tmp_path / 'my_team.py'} (the SOP module named at $.scenario.sop) did not "
        "finish importing within 1.5 s",
        "SOPBUS_IMPORT_TIMEOUT_S",
    )
    assert not (tmp_path / "runs").exists()


def test_a_slow_import_within_the_bound_is_fine_and_a_bad_bound_is_named(tmp_path: Path) -> None:
    slow = "import time\ntime.sleep(0.5)\n" + MODULE_TAIL
    assert run("validate", tmp_path, slow, env={"SOPBUS_IMPORT_TIMEOUT_S": "5"}).returncode == 0
    bad = run("validate", tmp_path, slow, env={"SOPBUS_IMPORT_TIMEOUT_S": "soon"})
    assert_usage_error(bad, "SOPBUS_IMPORT_TIMEOUT_S='soon'", "e.g. 30")
