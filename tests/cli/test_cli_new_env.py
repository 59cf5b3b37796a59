"""``sopbus new`` writes a ``.env.example`` beside the team: every variable sopbus reads,
one comment line each, nothing set, and nothing named that sopbus does not read (issue 41).
"""

from __future__ import annotations

import re
from pathlib import Path

from support.cli import sopbus
from support.paths import ROOT

# Read by sopbus but not a user's setting, so not in the file: a crash test's kill point, the
# variable a sweep hands its worker processes, and two NATS bucket names that look alike.
_NOT_SETTINGS = {"SOPBUS_KILL_AT", "SOPBUS_SWEEP_PARENT", "SOPBUS_RUNS", "SOPBUS_SWEEPS"}

# The names sopbus's own code reads (not a test's, not a comment's): `"NAME"` in the source.
_NAME_IN_SOURCE = re.compile(r"[\"']((?:OPENAI_|ANTHROPIC_|OTEL_|SOPBUS_)[A-Z0-9_]+)[\"']")


def _read_by_the_code() -> set[str]:
    names: set[str] = set()
    for package in ("sopbus", "bus", "roles", "sops"):
        for module in (ROOT / package).rglob("*.py"):
            names.update(_NAME_IN_SOURCE.findall(module.read_text(encoding="utf-8")))
    return names - _NOT_SETTINGS


def _documented(text: str) -> list[str]:
    return re.findall(r"^# ([A-Z][A-Z0-9_]+)=", text, flags=re.MULTILINE)


def test_a_new_team_gets_an_env_example_of_what_sopbus_reads(tmp_path: Path) -> None:
    made = sopbus("new", "my-team", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert "wrote my-team/.env.example" in made.stdout
    text = (tmp_path / "my-team" / ".env.example").read_text(encoding="utf-8")
    documented = _documented(text)
    assert {"OPENAI_API_KEY", "OPENAI_BASE_URL", "SOPBUS_SEAL_KEY"} <= set(documented)
    assert any(name.startswith("OTEL_") for name in documented)
    assert set(documented) == _read_by_the_code()  # all of them, and no invented one
    assert len(documented) == len(set(documented))
    lines = text.splitlines()
    for at, line in enumerate(lines):  # each variable with its own comment line above it
        if _documented(line):
            assert lines[at - 1].startswith("# ") and not _documented(lines[at - 1]), line
    # Nothing is set: copied to .env as it is, the file changes no run.
    assert all(line.startswith("#") or not line.strip() for line in lines)


def test_the_copied_env_example_leaves_a_simulated_run_as_it_was(tmp_path: Path) -> None:
    assert sopbus("new", "team", cwd=tmp_path).returncode == 0
    team = tmp_path / "team"
    (team / ".env").write_text((team / ".env.example").read_text(encoding="utf-8"))
    ran = sopbus("run", "scenario.toml", "--quiet", cwd=team, env={"OPENAI_API_KEY": None})
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "completed (stop_condition)" in ran.stdout


def test_a_copy_of_a_shipped_scenario_gets_one_too_and_none_is_replaced(tmp_path: Path) -> None:
    copied = sopbus("new", "shop", "--from", "flower_shop", cwd=tmp_path)
    assert copied.returncode == 0, copied.stderr
    assert _documented((tmp_path / "shop" / ".env.example").read_text(encoding="utf-8"))
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / ".env.example").write_text("OPENAI_API_KEY=my own\n")
    again = sopbus("new", "mine", cwd=tmp_path)
    assert again.returncode == 2 and "would overwrite" in again.stderr
    assert (mine / ".env.example").read_text() == "OPENAI_API_KEY=my own\n"
    assert not (mine / "scenario.toml").exists()
