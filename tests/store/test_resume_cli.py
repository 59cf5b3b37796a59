"""``sopbus resume`` on runs it has nothing to do for: a run killed before it wrote its
scenario copy (start it anew), a ``--runs-dir`` that is a file, and a run that completed
(left exactly as it is, unless ``--force``)."""

from __future__ import annotations

import hashlib
import json
import signal
from pathlib import Path

from sopbus.bus._util._faults import VARIABLE
from support.cli import sopbus
from support.teams import pipeline


def scenario(tmp_path: Path, max_rounds: int = 10) -> Path:
    path = tmp_path / "pair.toml"
    path.write_text(
        pipeline(
            ("Dora", "Draft"),
            ("Pete", "Polish"),
            run={"runs_dir": str(tmp_path / "runs"), "max_rounds": max_rounds},
        )
    )
    return path


def only_run(tmp_path: Path) -> Path:
    (run_dir,) = (tmp_path / "runs").iterdir()
    return run_dir


def hashes(run_dir: Path) -> dict[str, str]:
    return {
        str(p.relative_to(run_dir)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(run_dir.rglob("*"))
        if p.is_file()
    }


def test_a_run_killed_before_its_scenario_copy_is_to_be_started_anew(tmp_path: Path) -> None:
    killed = sopbus("run", scenario(tmp_path), "--quiet", env={VARIABLE: "run:started"})
    assert killed.returncode == -signal.SIGKILL
    run_dir = only_run(tmp_path)
    assert not (run_dir / "scenario.toml").exists()
    before = hashes(run_dir)

    done = sopbus("resume", run_dir)

    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert str(run_dir) in done.stderr and "start it anew with `sopbus run" in done.stderr
    assert hashes(run_dir) == before


def test_a_runs_dir_that_is_a_file_is_a_usage_error(tmp_path: Path) -> None:
    file = tmp_path / "runs"
    file.write_text("not a folder\n")
    for argv in (
        ("resume", "last", "--runs-dir", file),
        ("resume", "some-run", "--runs-dir", file),
        ("runs", "--runs-dir", file),
        ("run", scenario(tmp_path), "--runs-dir", file, "--quiet"),
    ):
        done = sopbus(*argv)
        assert done.returncode == 2, (argv, done.stderr)
        assert "Traceback" not in done.stderr and "is a file" in done.stderr, done.stderr
        assert str(file) in done.stderr
    assert file.read_text() == "not a folder\n"


def test_resuming_a_completed_run_changes_nothing(tmp_path: Path) -> None:
    assert sopbus("run", scenario(tmp_path), "--quiet").returncode == 0
    run_dir = only_run(tmp_path)
    before = hashes(run_dir)

    done = sopbus("resume", run_dir, "--quiet")

    assert done.returncode == 0, done.stderr
    assert "is complete" in done.stderr and "--force" in done.stderr
    assert hashes(run_dir) == before  # not one byte of any file, and no new file


def test_force_runs_a_completed_run_again_with_new_limits(tmp_path: Path) -> None:
    assert sopbus("run", scenario(tmp_path), "--quiet").returncode == 0
    run_dir = only_run(tmp_path)
    costs = (run_dir / "costs.jsonl").read_bytes()

    done = sopbus("resume", run_dir, "--force", "--max-rounds", "20", "--quiet")

    assert done.returncode == 0, done.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["resumes"] == 1 and summary["max_rounds"] == 20
    assert (run_dir / "events.1.jsonl").is_file()
    assert (run_dir / "costs.jsonl").read_bytes() == costs  # every answer came from the tape


def test_a_run_stopped_by_its_round_limit_goes_on_only_with_a_higher_one(tmp_path: Path) -> None:
    assert sopbus("run", scenario(tmp_path, max_rounds=1), "--quiet").returncode == 0
    run_dir = only_run(tmp_path)
    before = hashes(run_dir)

    for same in ((), ("--max-rounds", "1")):
        done = sopbus("resume", run_dir, *same, "--quiet")
        assert done.returncode == 0 and "is complete" in done.stderr
        assert hashes(run_dir) == before

    done = sopbus("resume", run_dir, "--max-rounds", "10", "--quiet")
    assert done.returncode == 0, done.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["end_reason"] == "idle" and summary["resumes"] == 1
