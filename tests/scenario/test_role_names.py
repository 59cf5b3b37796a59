"""A role name that reads as a path (``../../x``, ``/abs``, ``a\\b``, ``..``) or holds a NUL
is exit 2 from ``validate`` and ``run`` before any call, naming the file, the field and the
fix (issue 28, item 10: such names passed validate and failed in round 3 after paid calls).
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from support.cli import sopbus

HOSTILE = [
    "../../../../../ROLE_ESCAPE",
    "/tmp/ROLE_ESCAPE_ABS",
    "a/ROLE_ESCAPE",
    "a\\b",
    "..",
    "A\0B",
]


def assert_rejected(path: Path, runs: Path, field: str, *needles: str) -> None:
    for command in ("validate", "run"):
        extra = ("--runs-dir", runs) if command == "run" else ()
        done: subprocess.CompletedProcess[str] = sopbus(command, path, *extra, cwd=path.parent)
        assert done.returncode == 2, (command, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr
        for needle in (
            str(path.name),
            f"at `{field}`",
            'use letters, digits, spaces, "-"',
            *needles,
        ):
            assert needle in done.stderr, done.stderr
    assert not runs.exists()  # nothing ran, so nothing was paid for or written


@pytest.mark.parametrize("name", HOSTILE)
def test_a_declared_role_named_like_a_path(
    name: str, tmp_path: Path, team_file: Callable[..., Path]
) -> None:
    path = team_file(("Dora", "Draft"), ("Pete", "Polish"))
    path.write_text(path.read_text().replace('"Dora"', _toml(name)))
    assert_rejected(path, tmp_path / "runs", "$.roles[0].name")
    assert not list(tmp_path.parent.glob("**/ROLE_ESCAPE*"))
    assert not Path("/tmp/ROLE_ESCAPE_ABS").exists()


def test_an_alias_named_like_a_path(tmp_path: Path, team_file: Callable[..., Path]) -> None:
    path = team_file(("Dora", "Draft"), ("Pete", "Polish"))
    text = path.read_text().replace('name = "Pete"', 'name = "Pete"\naliases = ["ok", "../up"]')
    path.write_text(text)
    assert_rejected(path, tmp_path / "runs", "$.roles[1].aliases[1]", "path separator")


def test_a_group_chat_participant_named_like_a_path(tmp_path: Path) -> None:
    path = tmp_path / "chat.toml"
    path.write_text(
        '[scenario]\nname = "c"\nsop = "group_chat"\nidea = "plan"\n'
        '[[sop.participants]]\nname = "Ann"\ndescription = "plans"\n'
        '[[sop.participants]]\nname = "../../ROLE_ESCAPE"\ndescription = "writes"\n'
    )
    assert_rejected(path, tmp_path / "runs", "$.sop.participants[1].name", "path separator")


def _toml(text: str) -> str:
    """``text`` as a TOML basic string (a NUL must be written as an escape)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\0", "\\u0000") + '"'


def test_a_python_sop_that_names_a_role_like_a_path(tmp_path: Path) -> None:
    (tmp_path / "my_team.py").write_text(
        "import sopbus\n"
        "from sopbus.sops.software_company import SOP as COMPANY\n\n"
        "def build(ctx):\n"
        "    team = COMPANY.build(ctx)\n"
        "    team.roles[0].name = '../../ROLE_ESCAPE'\n"
        "    return team\n\n"
        "SOP = sopbus.SOP(name='mine', description='renames', build=build)\n"
    )
    path = tmp_path / "team.toml"
    path.write_text('[scenario]\nname = "x"\nidea = "y"\nsop = "my_team:SOP"\n')
    assert_rejected(
        path, tmp_path / "runs", "$.scenario.sop", "in the team the SOP 'my_team:SOP' built"
    )
