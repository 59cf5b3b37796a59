"""Input that once ended in a traceback or printed a file it should not have (issue 40,
items 2 and 3), given to ``validate`` and ``run`` as a user types it: a budget past what
``Decimal`` prints (``budget_usd = 1e26``, ``--budget 1e308``) was ``InvalidOperation``,
exit 1 and a failed run directory; a directory as the scenario was ``IsADirectoryError``;
``sopbus validate /etc/shadow`` quoted the file's first line in its syntax error."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from support.cli import sopbus
from support.paths import SCENARIOS

MARK = "sk-MARK-7f3a9c"  # stands for a secret: it must appear in no output


def both(path: Path, *flags: str) -> list[subprocess.CompletedProcess[str]]:
    """``validate`` and ``run`` of ``path``; neither may make a run directory."""
    runs = path.parent / "runs"
    out = [
        sopbus("validate", path, *flags, cwd=path.parent, timeout=120),
        sopbus("run", path, "--runs-dir", runs, *flags, cwd=path.parent, timeout=120),
    ]
    assert not runs.exists(), list(runs.iterdir())
    return out


def assert_usage_error(done: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert done.returncode == 2, (done.args, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr and done.stderr.startswith("sopbus: error: ")
    for needle in needles:
        assert needle in done.stderr, done.stderr


def shop(tmp_path: Path, budget: str) -> Path:
    text = (SCENARIOS / "flower_shop.toml").read_text(encoding="utf-8")
    assert "budget_usd = 10\n" in text
    path = tmp_path / "shop.toml"
    path.write_text(text.replace("budget_usd = 10\n", f"budget_usd = {budget}\n"), "utf-8")
    shutil.copytree(SCENARIOS / "fixtures", tmp_path / "fixtures")
    return path


def test_a_budget_too_large_to_print_is_refused_naming_the_field_and_the_limit(
    tmp_path: Path,
) -> None:
    for done in both(shop(tmp_path, "1e26")):
        assert_usage_error(done, "shop.toml", "$.run.budget_usd", "at most $1,000,000")


def test_a_budget_flag_or_argument_too_large_is_refused_before_a_run_directory(
    tmp_path: Path,
) -> None:
    from sopbus import run_scenario
    from sopbus.bus import ConfigError

    path, runs = shop(tmp_path, "10"), tmp_path / "runs"
    for ask in ("1e308", "1000000.01"):
        done = sopbus("run", path, "--budget", ask, "--runs-dir", runs, cwd=tmp_path)
        assert done.returncode == 2, done.stderr
        assert "Traceback" not in done.stderr
        assert "argument --budget: expected at most $1,000,000" in done.stderr
        with pytest.raises(ConfigError, match=r"--budget .*: expected at most \$1,000,000"):
            run_scenario(path, budget_usd=ask, runs_dir=runs)
        assert not runs.exists()
    at_limit = sopbus(
        "run", path, "--budget", "1000000", "--max-rounds", "1", "--runs-dir", runs, cwd=tmp_path
    )
    assert at_limit.returncode == 0, at_limit.stderr
    assert "$1,000,000.00" in at_limit.stdout


def test_a_directory_as_the_scenario_is_named_not_a_traceback(tmp_path: Path) -> None:
    folder = tmp_path / "d.toml"
    folder.mkdir()
    for done in both(folder):
        assert_usage_error(done, f"{folder}: the scenario file is not a regular file", "directory")


def test_a_file_that_is_not_toml_is_said_to_be_so_without_its_content(tmp_path: Path) -> None:
    files = {
        "shadow": f"root:$6${MARK}:19000:0:99999:7:::\n",
        ".env": f"OPENAI_API_KEY={MARK}\n",
        ".netrc": f"machine example.com login me password {MARK}\n",
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    (tmp_path / "blob.toml").write_bytes(b"\x7fELF\x02\x01\x00" + MARK.encode() + b"\xff\n")
    (tmp_path / "latin1").write_bytes(f"password = caf\xe9 {MARK}\n".encode("latin-1"))
    for name in (*files, "blob.toml", "latin1"):
        for done in both(tmp_path / name):
            assert_usage_error(done, f"{tmp_path / name}: not a TOML file", "is not shown")
            assert MARK not in done.stderr + done.stdout, done.stderr


def test_a_toml_file_with_a_typo_still_shows_the_line(tmp_path: Path) -> None:
    path = tmp_path / "team.toml"
    path.write_text('[scenario]\nname = "x"\nidea = = "y"\n', encoding="utf-8")
    for done in both(path):  # the user's own TOML file, on the user's terminal: unchanged
        assert_usage_error(done, "TOML syntax error at line 3", '3 | idea = = "y"')
