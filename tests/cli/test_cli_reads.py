"""What a user reads at the end of a command (issue 30): an empty idea is a usage error,
``diff`` has its own exit code, a status is not repeated as its reason, a sweep says when
its seeds could not differ, a cycle the SOP bounds itself is not flagged, and the shipped
files say what they are. Every command is a subprocess, as a user runs it."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from support.cli import sopbus
from support.paths import DATA, ROOT

pytestmark = pytest.mark.slow

PAIR = DATA / "scenarios" / "review_pair.toml"


def test_an_empty_idea_is_a_usage_error_and_runs_nothing(tmp_path: Path) -> None:
    for idea in ("", "   "):
        done = sopbus("run", PAIR, "--runs-dir", "runs", "--idea", idea, cwd=tmp_path)
        assert done.returncode == 2, done.stderr
        assert "--idea" in done.stderr and "the first message is empty" in done.stderr
        assert "[scenario].idea" in done.stderr  # the way out
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_diff_exits_5_when_runs_differ_and_0_when_they_do_not(tmp_path: Path) -> None:
    for runs, extra in (("a", ()), ("b", ()), ("c", ("--idea", "something else entirely"))):
        done = sopbus("run", PAIR, "--runs-dir", runs, "--quiet", *extra, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    a, b, c = (next((tmp_path / r).iterdir()) for r in "abc")
    same = sopbus("diff", a, b, cwd=tmp_path)
    assert same.returncode == 0 and same.stdout.startswith("same ")
    other = sopbus("diff", a, c, cwd=tmp_path)
    assert other.returncode == 5 and "differ" in other.stdout
    assert "5  sopbus diff: the two runs differ" in sopbus("--help").stdout


def test_the_summary_says_a_status_once_and_no_verdict_plainly(tmp_path: Path) -> None:
    broke = sopbus("run", PAIR, "--runs-dir", "runs", "--budget", "0.000001", cwd=tmp_path)
    assert broke.returncode == 3
    assert "budget_exhausted (budget_exhausted)" not in broke.stdout
    assert re.search(r"status\s+│?\s*budget_exhausted", broke.stdout), broke.stdout
    shown = " ".join(sopbus("show", "last", "--runs-dir", "runs", cwd=tmp_path).stdout.split())
    assert "verdict no verdict" not in shown and "the SOP states no verdict" in shown


def test_a_sweep_says_when_its_seeds_gave_the_same_runs(tmp_path: Path) -> None:
    done = sopbus("sweep", "software_company", "--seeds", "2", "--jobs", "1", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    flat = " ".join(done.stdout.split())
    assert "every seed gave the same messages in every variant" in flat
    lines = done.stdout.splitlines()
    note = lines[next(i for i, line in enumerate(lines) if line.startswith("note:")) :][:-1]
    assert note[-1].endswith("without fixtures") and all(len(line) <= 100 for line in note)


def test_a_sweep_whose_seeds_differ_has_no_such_note(tmp_path: Path) -> None:
    # Generated answers (no fixtures) are a function of the seed.
    done = sopbus("sweep", PAIR, "--seeds", "2", "--jobs", "1", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "gave the same messages" not in done.stdout


def test_a_cycle_the_sop_bounds_is_not_flagged_one_it_does_not_is() -> None:
    company = sopbus("validate", "software_company")
    assert company.returncode == 0 and "cycle" not in company.stdout + company.stderr
    camel = sopbus("validate", "camel_roleplay")
    assert "cycle" not in camel.stdout + camel.stderr
    reviewed = sopbus("validate", "software_company_reviewed")
    assert "cycle Alex -> Sam -> Alex is bounded only by" in reviewed.stdout + reviewed.stderr


def test_each_shipped_scenario_is_in_the_docs_table_and_its_header_is_its_own() -> None:
    table = (ROOT / "docs" / "scenarios.md").read_text()
    for path in sorted((ROOT / "scenarios").glob("*.toml")):
        assert f"| `{path.stem}` |" in table, path.name
    python = (ROOT / "scenarios" / "software_company_python_reviewer.toml").read_text()
    header = python.split("[scenario]")[0]
    assert "without any Python" not in header and "my_reviewer.py" in header
    assert tomllib.loads(python)["scenario"]["sop"] == "my_reviewer:SOP"
