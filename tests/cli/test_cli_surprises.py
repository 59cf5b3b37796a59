"""What a new user found silent or surprising on a second pass (issue 41), as the CLI now
answers it: hints that paste into a shell, ``fork --set`` keys it cannot apply, a scenario
file in the working directory over a shipped one of that name, every schema error of a file
at once, cost counts that add up after a resume, ``validate`` without an API key, a server
that is not there. Every command is a subprocess (``python -m sopbus``)."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from support.cli import sopbus

pytestmark = pytest.mark.slow  # every test here starts sopbus as a subprocess


def test_the_hint_of_new_pastes_into_a_shell_when_the_folder_has_a_space(tmp_path: Path) -> None:
    made = sopbus("new", "a b", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    hints = [line.split("sopbus ", 1)[1] for line in made.stdout.splitlines() if "sopbus " in line]
    assert [shlex.split(h)[0] for h in hints] == ["validate", "run"]
    # The shell's reading of the hint is the one file `new` wrote, and validate accepts it.
    (scenario,) = {shlex.split(h)[1] for h in hints}
    assert (tmp_path / scenario).is_file() and " " in scenario
    checked = sopbus(*shlex.split(hints[0]), cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr
