"""``sopbus verify`` as a user runs it (subprocess), on a run of the shipped gated writer."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from support.cli import sopbus
from support.tamper import cut_last_batch


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One run of scenarios/gated_writer.toml made with `sopbus run`, never modified."""
    runs = tmp_path_factory.mktemp("runs")
    done = sopbus("run", "scenarios/gated_writer.toml", "--runs-dir", runs, "--quiet")
    assert done.returncode == 0, done.stderr
    [run_dir] = [p for p in runs.iterdir() if p.is_dir()]
    return run_dir


@pytest.fixture
def run_dir(pristine: Path, tmp_path: Path) -> Path:
    """A copy of the pristine run that a test may tamper with."""
    copy = tmp_path / "runs" / pristine.name
    shutil.copytree(pristine, copy)
    return copy


def edit_one_char(path: Path, line_no: int) -> None:
    """Flips the case of one letter inside the record part of line ``line_no`` (from 1)."""
    lines = path.read_bytes().split(b"\n")
    line = bytearray(lines[line_no - 1])
    pos = next(i for i in range(len(line) // 3, len(line)) if chr(line[i]).isalpha())
    line[pos] = ord(chr(line[pos]).swapcase())
    lines[line_no - 1] = bytes(line)
    path.write_bytes(b"\n".join(lines))


def test_run_then_verify_last_is_intact(pristine: Path) -> None:
    done = sopbus("verify", "last", "--runs-dir", pristine.parent)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "events.jsonl" in done.stdout and "costs.jsonl" in done.stdout
    assert "artifacts/receipts.jsonl: 1 lines, intact" in done.stdout
    assert done.stdout.strip().endswith("intact")


def test_by_run_id_and_by_directory(pristine: Path) -> None:
    assert sopbus("verify", pristine.name, "--runs-dir", pristine.parent).returncode == 0
    assert sopbus("verify", pristine).returncode == 0


@pytest.mark.parametrize(
    ("file", "line"),
    [
        ("artifacts/receipts.jsonl", 1),
        ("events.jsonl", 5),
        ("events.jsonl", 1),
        ("costs.jsonl", 2),
    ],
)
def test_one_edited_character_is_named(run_dir: Path, file: str, line: int) -> None:
    edit_one_char(run_dir / file, line)
    done = sopbus("verify", run_dir)
    assert done.returncode == 1
    assert f"{run_dir / file}:{line}: edited" in done.stdout
    assert "NOT intact" in done.stdout


def test_a_dropped_event_line_is_named(run_dir: Path) -> None:
    path = run_dir / "events.jsonl"
    lines = path.read_bytes().split(b"\n")
    path.write_bytes(b"\n".join(lines[:9] + lines[10:]))
    done = sopbus("verify", run_dir)
    assert done.returncode == 1 and f"{path}:10: dropped" in done.stdout


def test_reordered_event_lines_are_named(run_dir: Path) -> None:
    path = run_dir / "events.jsonl"
    lines = path.read_bytes().split(b"\n")
    lines[3], lines[4] = lines[4], lines[3]
    path.write_bytes(b"\n".join(lines))
    done = sopbus("verify", run_dir)
    assert done.returncode == 1 and f"{path}:4: reordered" in done.stdout


def test_ledger_lines_cut_from_the_end_are_found(run_dir: Path) -> None:
    path = run_dir / "costs.jsonl"
    lines = path.read_bytes().split(b"\n")[:-1]
    path.write_bytes(b"\n".join(lines[:-1]) + b"\n")  # the chain alone cannot see this
    done = sopbus("verify", run_dir)
    assert done.returncode == 1
    assert f"{path}:{len(lines)}: missing" in done.stdout


def test_a_changed_artifact_is_found(run_dir: Path) -> None:
    chapter = run_dir / "artifacts" / "ch07" / "chapter.md"
    chapter.write_text(chapter.read_text().replace("grey", "blue"))
    done = sopbus("verify", run_dir)
    assert done.returncode == 1 and f"{chapter}: changed since it was written" in done.stdout


def test_a_receipted_draft_changed_is_found(run_dir: Path) -> None:
    draft = run_dir / "artifacts" / "ch07" / "draft-2.md"
    draft.write_text(draft.read_text() + " ")
    done = sopbus("verify", run_dir)
    assert done.returncode == 1
    assert (
        f"{run_dir / 'artifacts' / 'receipts.jsonl'}:1: its draft ch07/draft-2.md has changed"
        in done.stdout
    )


def test_a_torn_last_line_is_reported_as_torn(run_dir: Path) -> None:
    # As a run killed mid-line leaves it: no summary, and a log cut before its run_ended
    # (a log that holds run_ended is a finished run, whose summary.json must be there).
    (run_dir / "summary.json").unlink()
    cut_last_batch(run_dir / "events.jsonl")
    assert b'"run_ended"' not in (run_dir / "events.jsonl").read_bytes()
    with open(run_dir / "events.jsonl", "ab") as f:
        f.write(b'{"kind":"round_started","seq":99')
    done = sopbus("verify", run_dir)
    assert done.returncode == 0, done.stdout
    assert "torn" in done.stdout and "edited" not in done.stdout


def test_an_unknown_run_is_a_usage_error(tmp_path: Path) -> None:
    done = sopbus("verify", "nope", "--runs-dir", tmp_path)
    assert done.returncode == 2 and "cannot find run 'nope'" in done.stderr
