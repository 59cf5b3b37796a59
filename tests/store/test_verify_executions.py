"""``sopbus verify`` on a run resumed twice (issue 28 item 6): each execution's log is
chained to the one before, and the run records how many there were, so an earlier log
dropped, cut at a batch boundary, swapped with another or renamed is reported; a run
resumed before the chain existed still verifies, saying what was not checked.

The run is the relay team of tests/data/resume_team, stopped by its round limit and resumed
twice with a higher one (in process: no kill, nothing left to timing)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from sopbus._assemble import execute
from sopbus.bus import load_scenario
from sopbus.bus.store._resume import plan_resume
from sopbus.bus.store._verify import verify_run
from support.cli import sopbus
from support.killed_runs import TEAM_DIR, scenario_file
from support.tamper import copy_run, cut_last_batch, reseal


@pytest.fixture(scope="module")
def resumed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run with events.1.jsonl, events.2.jsonl and events.jsonl, never modified."""
    where = tmp_path_factory.mktemp("resumed")
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(TEAM_DIR))

        async def run_then_resume_twice() -> Path:
            first = await execute(load_scenario(scenario_file(where, "relay", max_rounds=1)))
            for rounds in (2, 10):
                scenario, continuation = plan_resume(first.run_dir, max_rounds=rounds)
                await execute(scenario, continuation=continuation)
            return first.run_dir

        return trio.run(run_then_resume_twice)


@pytest.fixture
def run_dir(resumed: Path, tmp_path: Path) -> Path:
    return copy_run(resumed, tmp_path)


def problems(run_dir: Path) -> str:
    verdict = verify_run(run_dir)
    assert not verdict.intact
    return "\n".join(verdict.problems)


def swap(run_dir: Path) -> None:
    one, two = run_dir / "events.1.jsonl", run_dir / "events.2.jsonl"
    one.rename(run_dir / "x")
    two.rename(one)
    (run_dir / "x").rename(two)


def test_the_untouched_run_has_three_logs_and_verifies_intact(resumed: Path) -> None:
    assert {p.name for p in resumed.glob("events*.jsonl")} == {
        "events.1.jsonl",
        "events.2.jsonl",
        "events.jsonl",
    }
    verdict = verify_run(resumed)
    assert verdict.intact, verdict.problems
    assert not [n for n in verdict.notes if "not checked" in n]
    done = sopbus("verify", resumed, env={"PYTHONPATH": str(TEAM_DIR)})
    assert done.returncode == 0, done.stdout + done.stderr


TAMPERING: dict[str, tuple[Callable[[Path], Any], str]] = {
    "events.1 deleted": (
        lambda d: (d / "events.1.jsonl").unlink(),
        "events.1.jsonl: missing: the log of execution 1 of 3",
    ),
    "events.1 cut at a batch boundary": (
        lambda d: cut_last_batch(d / "events.1.jsonl"),
        "the log was cut, replaced or swapped",
    ),
    "events.1 and events.2 swapped": (swap, "logs were swapped or renamed"),
    "events.2 renamed to events.7": (
        lambda d: (d / "events.2.jsonl").rename(d / "events.7.jsonl"),
        "events.7.jsonl: not a log of this run",
    ),
}


@pytest.mark.parametrize("case", TAMPERING)
def test_an_earlier_log_tampered_with_is_named(run_dir: Path, case: str) -> None:
    tamper, expected = TAMPERING[case]
    tamper(run_dir)
    assert expected in problems(run_dir)
    done = sopbus("verify", run_dir, env={"PYTHONPATH": str(TEAM_DIR)})
    assert done.returncode == 1 and "NOT intact" in done.stdout
    assert expected in done.stdout


def test_the_cut_log_is_named_with_its_lengths(run_dir: Path) -> None:
    left = cut_last_batch(run_dir / "events.1.jsonl")
    found = problems(run_dir)
    assert f"{run_dir / 'events.1.jsonl'}: ends with seal" in found
    assert f"after {left} lines" in found


def test_a_summary_that_hides_a_resume_is_reported(run_dir: Path) -> None:
    path = run_dir / "summary.json"
    path.write_text(path.read_text().replace('"resumes": 2', '"resumes": 1'))
    assert "summary.json: resumes is 1 but" in problems(run_dir)


def forget_the_chain(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The resumed event as runs before this change wrote it."""
    for record in records:
        if record.get("kind") == "resumed":
            record["data"].pop("previous_head")
            record["data"].pop("previous_lines")
    return records


def test_a_run_resumed_before_the_chain_verifies_and_says_what_it_could_not_check(
    run_dir: Path,
) -> None:
    for name in ("events.2.jsonl", "events.jsonl"):
        reseal(run_dir / name, forget_the_chain)
    verdict = verify_run(run_dir)
    assert verdict.intact, verdict.problems
    unchecked = [n for n in verdict.notes if "resumed before sopbus chained" in n]
    assert len(unchecked) == 2 and "whether events.1.jsonl was cut" in unchecked[0]
    # what its resumed events did record (the count and the names) is still checked
    (run_dir / "events.2.jsonl").rename(run_dir / "events.7.jsonl")
    assert "events.7.jsonl: not a log of this run" in problems(run_dir)
