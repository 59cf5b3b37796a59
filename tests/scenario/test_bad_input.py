"""Broken input files give exit 2 with the file, the place and a fix, and no traceback
(issue 13, item 10), run as a user runs sopbus."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from support.cli import sopbus
from support.paths import ROOT

TEAM = """[scenario]
name = "x"
idea = "a haiku"
sop = "{sop}"
[llm]
fixtures = {fixtures}
"""


def assert_usage_error(done: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and done.stderr.startswith("sopbus: error: ")
    for needle in needles:
        assert needle in done.stderr, done.stderr


@pytest.mark.parametrize("command", ["validate", "run"])
def test_toml_nested_600_deep(command: str, tmp_path: Path) -> None:
    path = tmp_path / "deep.toml"
    path.write_text(
        '[scenario]\nname = "x"\nsop = "software_company"\n[sop]\nv = '
        + "[" * 600
        + "]" * 600
        + "\n"
    )
    done = (
        sopbus(command, path, "--runs-dir", tmp_path / "runs")
        if command == "run"
        else sopbus(command, path)
    )
    assert_usage_error(done, str(path), "nested 600 levels deep", "flatten it")
    assert not (tmp_path / "runs").exists()


def test_an_output_type_nested_175_deep(tmp_path: Path) -> None:
    spec = "list[" * 175 + "str" + "]" * 175
    path = tmp_path / "spec.toml"
    path.write_text(
        f'[scenario]\nname = "x"\nidea = "y"\n[actions.A]\ninstruction = "do"\n'
        f'output = {{ f = "{spec}" }}\n[[roles]]\nname = "R"\n'
        f'watch = ["UserRequirement"]\nactions = ["A"]\n'
    )
    for command in ("validate", "run"):
        done = sopbus(command, path)
        assert_usage_error(
            done,
            str(path),
            "nested more than 32 deep",
            "$.actions.A.output.f",
            "flatten the output",
        )
        assert len(done.stderr) < 1000  # the spec is shortened, not echoed whole


def test_a_fixture_file_that_is_not_utf8(tmp_path: Path) -> None:
    (tmp_path / "fix.toml").write_bytes(
        b"simulated = true\n[[fixture]]\nresponses = ['\xff\xfe']\n"
    )
    path = tmp_path / "team.toml"
    path.write_text(TEAM.format(sop="software_company", fixtures='["fix.toml"]'))
    done = sopbus("run", path, "--runs-dir", tmp_path / "runs")
    assert_usage_error(
        done,
        f"{tmp_path / 'fix.toml'}: the fixture file is not UTF-8 text",
        "line 3, column 15",
        "save it as UTF-8",
    )
    assert not (tmp_path / "runs").exists()


def test_an_inject_file_that_is_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "edits.toml"
    path.write_bytes(b"[[inject]]\nround = 1\ncontent = '\xe9t\xe9'\n")
    done = sopbus(
        "run", "scenarios/flower_shop.toml", "--inject", path, "--runs-dir", tmp_path / "runs"
    )
    assert_usage_error(done, f"{path}: the --inject file is not UTF-8 text", "line 3, column 12")
    assert not (tmp_path / "runs").exists()


def test_a_sop_data_file_that_is_not_utf8(tmp_path: Path) -> None:
    scenario = (ROOT / "scenarios" / "book_writer.toml").read_text()
    (tmp_path / "outline.toml").write_bytes(b"[[heading]]\ntitle = '\x80'\n")
    path = tmp_path / "book.toml"
    path.write_text(
        scenario.replace(
            "fixtures/book_writer.toml", str(ROOT / "scenarios/fixtures/book_writer.toml")
        )
        .replace('outline = "data/book_writer/outline.toml"', 'outline = "outline.toml"')
        .replace('notes = "data/book_writer/notes.toml"\n', "")
        .replace('policies = "data/book_writer/policies.toml"\n', "")
        .replace("[scenario]", "[scenario]\nallow_outside = true", 1)
    )
    done = sopbus("validate", path)
    assert_usage_error(
        done,
        f"{tmp_path / 'outline.toml'}: the outline named at $.sop.outline is not UTF-8 text",
        "byte 0x80 at line 2",
    )


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            "raise RuntimeError('the database is down')\n",
            "RuntimeError: the database is down (at {module}, line 1)",
        ),
        ("X = 1\ndef broken(:\n", "SyntaxError: invalid syntax (at {module}, line 2)"),
        ("import json\nVALUE = json.loads('{{')\n", "JSONDecodeError: Expecting property name"),
    ],
)
def test_a_user_sop_module_that_raises_on_import(body: str, expected: str, tmp_path: Path) -> None:
    module = tmp_path / "my_team.py"
    module.write_text(body)
    path = tmp_path / "team.toml"
    path.write_text(TEAM.format(sop="my_team:SOP", fixtures="[]"))
    for command in ("validate", "run"):
        done = sopbus(command, path, cwd=tmp_path)
        assert_usage_error(
            done,
            f"{path}: the SOP module 'my_team' named at $.scenario.sop failed "
            f"while it was imported",
            expected.format(module=module),
            "fix the module",
        )
