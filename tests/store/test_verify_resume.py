"""``sopbus verify`` on resumed runs (issue 13, items 5 and 6): every untampered run is
intact, killed or resumed or not, and edits are still found, including edits to
``calls.jsonl`` and to the totals of ``summary.json``.

The team is tests/data/resume_team/relay_sop.py (two concurrent calls in round 2); runs are
killed for real (SIGKILL) at points drawn from a seeded generator, in both modes, and
resumed, some of them several times.
"""

from __future__ import annotations

import json
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from sopbus._assemble import execute
from sopbus.bus import load_scenario, read_jsonl
from sopbus.bus._util._jsonl import JsonlWriter
from sopbus.bus.store._fork import plan_replay
from sopbus.bus.store._resume import plan_resume
from sopbus.bus.store._verify import verify_run
from support.cli import ARGV, start
from support.paths import DATA, ROOT

TEAM_DIR = DATA / "resume_team"
SCENARIO = """
[scenario]
name = "relay"
sop = "relay_sop:SOP"
idea = "a short guide to brewing green tea"
[run]
max_rounds = {max_rounds}
budget_usd = 1.0
runs_dir = "{runs}"
mode = "{mode}"
[llm]
latency_ms = {latency}
max_tokens = 300
"""


@pytest.fixture(autouse=True)
def team_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(TEAM_DIR))


def scenario_file(
    where: Path, *, mode: str = "rounds", latency: int = 0, max_rounds: int = 10
) -> Path:
    where.mkdir(parents=True, exist_ok=True)
    path = where / "relay.toml"
    path.write_text(
        SCENARIO.format(runs=where / "runs", mode=mode, latency=latency, max_rounds=max_rounds)
    )
    return path


def sopbus(*argv: str) -> subprocess.Popen[bytes]:
    return start(*argv, "--quiet", env={"PYTHONPATH": str(TEAM_DIR)}, stdout=subprocess.DEVNULL)


def assert_intact(run_dir: Path) -> None:
    verdict = verify_run(run_dir)
    assert verdict.intact, "\n".join(verdict.problems)


def kinds(path: Path) -> list[str]:
    try:
        return [e["kind"] for e in read_jsonl(path, dict)]
    except FileNotFoundError:  # not written yet, or a resume has just moved it aside
        return []


def wait_until(probe: Callable[[], bool], proc: subprocess.Popen[bytes]) -> bool:
    """Polls until ``probe`` holds (True) or the process ends (False)."""
    deadline = time.monotonic() + 120  # a guard against a hung test, not a timing assertion
    while time.monotonic() < deadline:
        if probe():
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.005)
    raise AssertionError("the run neither reached the kill point nor ended")


def kill_at(argv: list[str], runs: Path, reservations: int, extra_s: float) -> Path | None:
    """Runs ``sopbus *argv``; once the run directory's log holds ``reservations`` llm_reserved
    events, waits ``extra_s`` and SIGKILLs it. The run directory (None: it died too early)."""
    proc = sopbus(*argv)
    try:

        def reached() -> bool:
            logs = list(runs.glob("*/events.jsonl")) if runs.is_dir() else []
            return bool(logs) and kinds(logs[0]).count("llm_reserved") >= reservations

        if wait_until(reached, proc):
            time.sleep(extra_s)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
    dirs = [p for p in runs.iterdir() if p.is_dir()] if runs.is_dir() else []
    return dirs[0] if dirs and (dirs[0] / "scenario.toml").is_file() else None


CASES = 24


@pytest.mark.slow
@pytest.mark.parametrize("case", range(CASES))
def test_runs_killed_at_random_points_and_resumed_verify_intact(case: int, tmp_path: Path) -> None:
    rng = random.Random(1300 + case)
    mode = ("rounds", "events")[case % 2]
    scenario = scenario_file(tmp_path, mode=mode, latency=rng.choice((60, 150)))
    runs = tmp_path / "runs"
    argv = ["run", str(scenario)]
    run_dir = None
    for _ in range(1 + case % 3):  # one, two or three kills before the last resume
        killed = kill_at(argv, runs, rng.randint(1, 5), rng.uniform(0.0, 0.2))
        run_dir = run_dir or killed
        if run_dir is None:  # killed before it wrote its scenario: nothing to resume, start anew
            shutil.rmtree(runs, ignore_errors=True)
            continue
        assert_intact(run_dir)  # a killed run is not a tampered one
        argv = ["resume", str(run_dir)]
    if run_dir is None:
        pytest.skip("every kill came before the run wrote its scenario")
    proc = sopbus(*argv)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err.decode()
    assert kinds(run_dir / "events.jsonl")[-1] == "run_ended"
    assert_intact(run_dir)
    done = subprocess.run(
        [*ARGV, "verify", str(run_dir)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and done.stdout.strip().endswith("intact"), done.stdout


@pytest.mark.slow
def test_a_resume_after_a_call_was_lost_in_flight_verifies(tmp_path: Path) -> None:
    """The lost call is ledgered after the carried lines but logged before the replayed
    ones: pairing the two files by position called this run tampered."""
    scenario = scenario_file(tmp_path, latency=400)
    run_dir = kill_at(["run", str(scenario)], tmp_path / "runs", 4, 0.05)  # round 3 in flight
    assert run_dir is not None
    proc = sopbus("resume", str(run_dir))
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err.decode()
    outcomes = [line["outcome"] for line in read_jsonl(run_dir / "costs.jsonl", dict)]
    assert "lost" in outcomes and outcomes.index("lost") >= 3
    assert_intact(run_dir)


@pytest.mark.parametrize("mode", ["rounds", "events"])
async def test_runs_stopped_by_a_limit_resumed_twice_and_replayed_verify(
    mode: str, tmp_path: Path
) -> None:
    first = await execute(load_scenario(scenario_file(tmp_path, mode=mode, max_rounds=2)))
    assert_intact(first.run_dir)
    for rounds in (3, 10):
        scenario, continuation = plan_resume(first.run_dir, max_rounds=rounds)
        await execute(scenario, continuation=continuation)
        assert_intact(first.run_dir)
    assert (first.run_dir / "events.2.jsonl").is_file()
    scenario, continuation = plan_replay(first.run_dir, into=tmp_path / "replay")
    replayed = await execute(scenario, continuation=continuation)
    assert_intact(replayed.run_dir)


# -- edits are found ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def resumed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run in events mode stopped at round 2, resumed to its end: two event logs."""
    where = tmp_path_factory.mktemp("resumed")
    sys.path.insert(0, str(TEAM_DIR))
    try:
        first = trio.run(execute, load_scenario(scenario_file(where, mode="events", max_rounds=2)))
        scenario, continuation = plan_resume(first.run_dir, max_rounds=10)
        trio.run(lambda: execute(scenario, continuation=continuation))
    finally:
        sys.path.remove(str(TEAM_DIR))
    assert (first.run_dir / "events.1.jsonl").is_file()
    assert verify_run(first.run_dir).intact
    return first.run_dir


def rewrite(path: Path, change: Callable[[list[dict[str, Any]]], list[dict[str, Any]]]) -> None:
    """Rewrites a chained file through ``change`` with every hash recomputed, as an editor
    who knows the chain would: only the cross-checks can find such an edit."""
    lines = change(list(read_jsonl(path, dict)))
    path.unlink()
    with JsonlWriter(path) as writer:
        for line in lines:
            writer.write(line)


def edit_summary(**changes: Any) -> Callable[[Path], None]:
    def edit(run_dir: Path) -> None:
        path = run_dir / "summary.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), **changes}, indent=2))

    return edit


def flip_a_letter(name: str, line: int) -> Callable[[Path], None]:
    def edit(run_dir: Path) -> None:
        path = run_dir / name
        lines = path.read_bytes().split(b"\n")
        text = bytearray(lines[line - 1])
        at = next(i for i in range(len(text) // 3, len(text)) if chr(text[i]).isalpha())
        text[at] = ord(chr(text[at]).swapcase())
        lines[line - 1] = bytes(text)
        path.write_bytes(b"\n".join(lines))

    return edit


def chained(
    name: str, change: Callable[[list[dict[str, Any]]], list[dict[str, Any]]]
) -> Callable[[Path], None]:
    return lambda run_dir: rewrite(run_dir / name, change)


def set_in(
    index: int, *path: str, value: Any
) -> Callable[[list[dict[str, Any]]], list[dict[str, Any]]]:
    def change(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
        target = lines[index]
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
        return lines

    return change


EDITS: dict[str, tuple[Callable[[Path], None], str]] = {
    "summary total_usd": (edit_summary(total_usd="0.000001"), "summary.json: total_usd"),
    "summary llm_calls": (edit_summary(llm_calls=1), "summary.json: llm_calls"),
    "summary prompt_tokens": (edit_summary(prompt_tokens=7), "summary.json: prompt_tokens"),
    "summary completion_tokens": (
        edit_summary(completion_tokens=7),
        "summary.json: completion_tokens",
    ),
    "summary budget_usd": (edit_summary(budget_usd="100"), "summary.json: budget_usd"),
    "summary end_reason": (edit_summary(end_reason="stop_condition"), "summary.json: end_reason"),
    "summary status": (
        edit_summary(status="completed", end_reason="idle", rounds=99),
        "summary.json: rounds",
    ),
    "a letter in calls.jsonl": (flip_a_letter("calls.jsonl", 2), "calls.jsonl:2: edited"),
    "calls.jsonl answer usage, rechained": (
        chained("calls.jsonl", set_in(1, "completion", "usage", "completion_tokens", value=1)),
        "calls.jsonl:2: the answer's usage",
    ),
    "calls.jsonl ledger cost, rechained": (
        chained("calls.jsonl", set_in(0, "ledger", "cost_usd", value="0")),
        "calls.jsonl:1: its ledger line differs",
    ),
    "calls.jsonl last answer cut": (
        chained("calls.jsonl", lambda lines: lines[:-1]),
        "whose answer is not in calls.jsonl",
    ),
    "calls.jsonl answer twice": (
        chained("calls.jsonl", lambda lines: lines + lines[-1:]),
        "a second answer for ledger line",
    ),
    "a letter in the earlier event log": (
        flip_a_letter("events.1.jsonl", 3),
        "events.1.jsonl:3: edited",
    ),
    "a letter in the ledger": (flip_a_letter("costs.jsonl", 2), "costs.jsonl:2: edited"),
    "ledger cost, rechained": (
        chained("costs.jsonl", set_in(1, "cost_usd", value="0.5")),
        "total_usd",
    ),
    "ledger cost and totals, rechained": (
        chained(
            "costs.jsonl",
            lambda lines: [{**line, "cost_usd": "0", "total_usd": "0"} for line in lines],
        ),
        "differs from the call logged",
    ),
    "ledger last line cut": (chained("costs.jsonl", lambda lines: lines[:-1]), "missing"),
    "earlier log's call, rechained": (
        lambda run_dir: rewrite(
            run_dir / "events.1.jsonl",
            lambda lines: [
                {**e, "call": {**e["call"], "prompt_tokens": 1}} if e["kind"] == "llm_called" else e
                for e in lines
            ],
        ),
        "differs from the call logged at",
    ),
    "a call logged twice": (
        chained(
            "events.jsonl",
            lambda lines: (
                [*lines[:-1], next(e for e in lines if e["kind"] == "llm_called"), *lines[-1:]]
            ),
        ),
        "logged twice",
    ),
    "calls.jsonl removed": (
        lambda run_dir: (run_dir / "calls.jsonl").unlink(),
        "whose answer is not in calls.jsonl",
    ),
}


@pytest.mark.parametrize("edit", list(EDITS))
def test_an_edit_of_a_resumed_run_is_found(edit: str, resumed: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / resumed.name
    shutil.copytree(resumed, run_dir)
    change, expected = EDITS[edit]
    change(run_dir)
    verdict = verify_run(run_dir)
    assert not verdict.intact
    assert any(expected in problem for problem in verdict.problems), verdict.problems


def test_verify_lists_calls_jsonl_and_the_earlier_logs(resumed: Path) -> None:
    done = subprocess.run(
        [*ARGV, "verify", str(resumed)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout
    for name in ("events.1.jsonl", "events.jsonl", "costs.jsonl", "calls.jsonl"):
        count = len((resumed / name).read_bytes().splitlines())
        assert f"  {name}: {count} lines, intact" in done.stdout


class _Echo:
    """A member that answers without a model: its team's run has no ledger lines at all."""

    name, aliases, watch = "Echo", (), frozenset({"UserRequirement"})

    async def step(self, news: Any, turn: Any) -> list[Any]:
        from sopbus.bus import Message

        return [Message(cause_by="Echoed", sent_from=self.name, content=m.content) for m in news]


async def test_a_run_that_never_asked_a_model_verifies_and_an_added_total_is_caught(
    tmp_path: Path,
) -> None:
    from sopbus.bus import Environment, Message, RunStore, run_team

    store = RunStore.create(tmp_path, "echo")
    env = Environment(store.run_id, log=store)
    env.add_all([_Echo()])
    await run_team(
        env, seed=[Message(cause_by="UserRequirement", sent_from="Boss", content="hi")], store=store
    )
    store.close()
    assert verify_run(store.run_dir).intact  # no totals in its summary, none in its ledger
    summary = json.loads((store.run_dir / "summary.json").read_text())
    (store.run_dir / "summary.json").write_text(json.dumps({**summary, "total_usd": "1.00"}))
    assert not verify_run(store.run_dir).intact
