"""A FIFO where a file belongs, numbers without a bound, a scenario that is not UTF-8 and a
missing required ``[sop]`` key are exit 2 with the file, the place and the fix, from
``validate`` and ``run`` alike (issue 28, item 11: a FIFO hung both commands, a FIFO
fixture was "not found", ``max_rounds = 10**23`` and ``timeout_s = inf`` were accepted)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from support.cli import sopbus

HEAD = '[scenario]\nname = "x"\nidea = "y"\nsop = "software_company"\n'


def both(path: Path, *flags: str) -> list[subprocess.CompletedProcess[str]]:
    runs = path.parent / "runs"
    out = [
        sopbus("validate", path, *flags, cwd=path.parent, timeout=60),
        sopbus("run", path, "--runs-dir", runs, *flags, cwd=path.parent, timeout=60),
    ]
    assert not runs.exists()
    return out


def assert_usage_error(done: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert done.returncode == 2, (done.args, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr and done.stderr.startswith("sopbus: error: ")
    for needle in needles:
        assert needle in done.stderr, done.stderr


def test_a_fifo_as_the_scenario_does_not_hang(tmp_path: Path) -> None:
    fifo = tmp_path / "team.toml"
    os.mkfifo(fifo)
    for done in both(fifo):  # the old code waited for a writer until the timeout
        assert_usage_error(
            done,
            f"{fifo}: the scenario file is not a regular file (it is a FIFO); point it at a file",
        )


def test_a_fifo_as_a_fixture_is_named_as_such(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fix.toml")
    path = tmp_path / "team.toml"
    path.write_text(HEAD + '[llm]\nfixtures = ["fix.toml"]\n')
    for done in both(path):
        assert_usage_error(
            done,
            'fixture file "fix.toml" is not a regular file (it is a FIFO) - at '
            "`$.llm.fixtures[0]`: point it at a file",
        )
        assert "not found" not in done.stderr


@pytest.mark.parametrize(
    ("table", "said"),
    [
        (
            "[run]\nmax_rounds = 99999999999999999999999\n",
            "out of range: 99999999999999999999999 - at `$.run.max_rounds`: expected a "
            "number from 1 to 100000",
        ),
        (
            "[llm]\ntimeout_s = inf\n",
            "out of range: inf - at `$.llm.timeout_s`: expected a number above 0 and at most 86400",
        ),
        (
            '[[roles]]\nname = "Alice"\nllm = { timeout_s = inf }\n',
            "out of range: inf - at `$.roles[0].llm.timeout_s`",
        ),
    ],
)
def test_numbers_without_a_bound(table: str, said: str, tmp_path: Path) -> None:
    path = tmp_path / "team.toml"
    path.write_text(HEAD + table)
    for done in both(path):
        assert_usage_error(done, f"{path.name}: {said}")


def test_a_round_limit_flag_past_the_bound(tmp_path: Path) -> None:
    path = tmp_path / "team.toml"
    path.write_text(HEAD)
    done = sopbus("run", path, "--max-rounds", "99999999999", "--runs-dir", tmp_path / "runs")
    assert_usage_error(done, "--max-rounds 99999999999: expected a number from 1 to 100000")
    assert not (tmp_path / "runs").exists()


def test_a_scenario_that_is_not_utf8_says_line_column_and_fix(tmp_path: Path) -> None:
    path = tmp_path / "team.toml"
    path.write_bytes(b'[scenario]\nname = "x"\nidea = "caf\xe9"\nsop = "software_company"\n')
    for done in both(path):
        assert_usage_error(
            done,
            f"{path}: the scenario file is not UTF-8 text: byte 0xe9 at line 3, column 12 "
            "(offset 33); save it as UTF-8",
        )


def test_group_chat_without_participants(tmp_path: Path) -> None:
    path = tmp_path / "chat.toml"
    path.write_text('[scenario]\nname = "c"\nidea = "plan"\nsop = "group_chat"\n')
    for done in both(path):
        assert_usage_error(
            done,
            f"{path}: missing required key `participants` - at `$.sop.participants`",
            "add a [[sop.participants]] table for each entry (keys: name, description",
        )
