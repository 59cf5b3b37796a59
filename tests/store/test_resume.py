"""sopbus resume: a run killed (a real SIGKILL) or stopped by a limit continues where it was,
paying no completed call twice, and ends as the uninterrupted run does.

The team is tests/data/resume_team/relay_sop.py: four rounds, two concurrent calls in round
2, an artifact per turn. The simulator's latency keeps calls in flight long enough to kill
the process in the middle of one.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

import pytest
import trio

from sopbus._assemble import execute
from sopbus.bus import ConfigError, load_scenario, read_jsonl, scenario_with_overrides
from sopbus.bus.llm._tape import CallRecord
from sopbus.bus.store._resume import plan_resume
from sopbus.bus.store._store import drop_torn_tail
from sopbus.cli import main
from sopbus.cli._cmd_diff import messages
from support.killed_runs import (
    TEAM_DIR,
    answered,
    artifacts,
    events,
    finished,
    ledger,
    reservations,
    run_and_kill,
    scenario_file,
    sopbus,
    spent,
    wait_for,
)


@pytest.fixture(autouse=True)
def team_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(TEAM_DIR))


def show_json(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    assert main(["show", str(run_dir), "--json"]) == 0
    return capsys.readouterr().out


@pytest.fixture
def baseline(tmp_path: Path) -> Path:
    """The uninterrupted run everything is compared with."""
    outcome = trio.run(execute, load_scenario(scenario_file(tmp_path, "baseline")))
    assert outcome.summary.end_reason == "idle" and outcome.summary.rounds == 5
    return outcome.run_dir


# -- killed for real ------------------------------------------------------------------------


# Kill points: each a condition on the run directory, checked while the run goes on.
KILL_POINTS: dict[str, Callable[[Path], bool]] = {
    "first call in flight": lambda d: len(reservations(d)) >= 1,
    "both drafts in flight": lambda d: sum(r["round"] == 2 for r in reservations(d)) == 2,
    "after the drafts": lambda d: answered(d) >= 3,
    "last call in flight": lambda d: any(r["round"] == 4 for r in reservations(d)),
}
# How many calls each point leaves in flight (the latency is far longer than the poll).
IN_FLIGHT = {
    "first call in flight": 1,
    "both drafts in flight": 2,
    "after the drafts": None,
    "last call in flight": 1,
}


@pytest.mark.slow
@pytest.mark.parametrize("point", list(KILL_POINTS))
def test_a_killed_run_resumes_to_the_uninterrupted_result(
    point: str, baseline: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = run_and_kill(
        scenario_file(tmp_path, "killed", latency=400), tmp_path / "killed", KILL_POINTS[point]
    )
    before = ledger(run_dir)
    in_flight = (
        [
            r
            for r in reservations(run_dir)
            if r["data"]["call"]
            not in {c.call for c in read_jsonl(run_dir / "calls.jsonl", CallRecord)}
        ]
        if (run_dir / "calls.jsonl").is_file()
        else reservations(run_dir)
    )
    assert not (run_dir / "summary.json").exists()
    assert IN_FLIGHT[point] in (None, len(in_flight))

    finished(sopbus("resume", str(run_dir)))

    assert messages(run_dir) == messages(baseline)
    assert show_json(run_dir, capsys) == show_json(baseline, capsys)
    assert artifacts(run_dir) == artifacts(baseline)
    lines = ledger(run_dir)
    assert lines[: len(before)] == before  # the earlier lines stand
    lost = [line for line in lines if line.outcome == "lost"]
    assert [(line.round, line.role, line.cost_usd) for line in lost] == [
        (r["round"], r["role"], Decimal(r["data"]["amount"])) for r in in_flight
    ]
    assert all(line.resume == 1 for line in lines[len(before) :])
    # Every call is paid once; what was in flight is paid once more, at its reservation.
    assert sorted((ln.round, ln.role) for ln in lines if ln.outcome == "ok") == sorted(
        (ln.round, ln.role) for ln in ledger(baseline)
    )
    assert spent(run_dir) == spent(baseline) + sum((line.cost_usd for line in lost), Decimal(0))
    assert [ln.seq for ln in lines] == list(range(1, len(lines) + 1))
    kinds = [e["kind"] for e in events(run_dir)]
    assert kinds[:2] == ["run_started", "resumed"] and kinds[-1] == "run_ended"
    assert (run_dir / "events.1.jsonl").is_file()


@pytest.mark.slow
def test_a_run_killed_twice_and_torn_resumes_to_the_same_result(
    baseline: Path, tmp_path: Path
) -> None:
    scenario = scenario_file(tmp_path, "twice", latency=400)
    run_dir = run_and_kill(scenario, tmp_path / "twice", KILL_POINTS["first call in flight"])
    # The resume is killed in its turn, in round 3 (rounds 1 and 2 replayed from the tape).
    proc = sopbus("resume", str(run_dir))
    try:
        wait_for(lambda: any(r["round"] == 3 for r in reservations(run_dir)) or None, proc)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
    for name in ("events.jsonl", "costs.jsonl", "calls.jsonl"):  # as if killed mid-write
        with open(run_dir / name, "ab") as f:
            f.write(b'{"kind": "half a li')

    finished(sopbus("resume", str(run_dir)))

    assert messages(run_dir) == messages(baseline)
    assert artifacts(run_dir) == artifacts(baseline)
    lines = ledger(run_dir)
    lost = [line for line in lines if line.outcome == "lost"]
    assert {line.resume for line in lost} == {1, 2} and {line.round for line in lost} == {1, 3}
    assert spent(run_dir) == spent(baseline) + sum((line.cost_usd for line in lost), Decimal(0))
    assert (run_dir / "events.2.jsonl").is_file()
    assert [e["data"]["resume"] for e in events(run_dir) if e["kind"] == "resumed"] == [2]


# -- stopped by a limit ------------------------------------------------------------------------


async def test_a_run_stopped_by_its_round_limit_resumes_with_a_higher_one(
    baseline: Path, tmp_path: Path
) -> None:
    first = await execute(load_scenario(scenario_file(tmp_path, "limited", max_rounds=2)))
    assert first.summary.end_reason == "max_rounds"
    paid = ledger(first.run_dir)

    scenario, continuation = plan_resume(first.run_dir, max_rounds=10)
    outcome = await execute(scenario, continuation=continuation)

    assert outcome.summary.end_reason == "idle" and outcome.run_dir == first.run_dir
    assert messages(first.run_dir) == messages(baseline)
    assert artifacts(first.run_dir) == artifacts(baseline)
    lines = ledger(first.run_dir)
    assert lines[: len(paid)] == paid and {ln.resume for ln in lines[len(paid) :]} == {1}
    assert [ln.round for ln in lines[len(paid) :]] == [3, 4]  # rounds 1-2 were not paid again
    assert spent(first.run_dir) == spent(baseline)
    assert outcome.summary.llm_calls == 5 and outcome.summary.taped_calls == 3
    assert Decimal(outcome.summary.total_usd) == spent(baseline)
    assert outcome.summary.resumes == 1 and outcome.summary.max_rounds == 10


async def test_a_run_stopped_by_its_budget_resumes_with_a_higher_one(
    baseline: Path, tmp_path: Path
) -> None:
    cap = sum((ln.cost_usd for ln in ledger(baseline)[:3]), Decimal(0)) + Decimal("0.0002")
    first = await execute(load_scenario(scenario_file(tmp_path, "poor", budget=str(cap))))
    assert first.summary.end_reason == "budget_exhausted"
    assert [ln.outcome for ln in ledger(first.run_dir)].count("refused") >= 1

    with pytest.raises(ConfigError, match="already spent"):
        plan_resume(first.run_dir, budget_usd=Decimal("0.00001"))
    scenario, continuation = plan_resume(first.run_dir, budget_usd=Decimal(1))
    outcome = await execute(scenario, continuation=continuation)

    assert outcome.summary.end_reason == "idle"
    assert messages(first.run_dir) == messages(baseline)
    assert artifacts(first.run_dir) == artifacts(baseline)
    assert spent(first.run_dir) == spent(baseline)
    assert ledger(first.run_dir)[-1].budget_usd == 1


async def test_a_ledger_line_lost_between_answer_and_ledger_is_restored(
    baseline: Path, tmp_path: Path
) -> None:
    first = await execute(load_scenario(scenario_file(tmp_path, "cut", max_rounds=2)))
    costs = first.run_dir / "costs.jsonl"
    whole = costs.read_bytes()
    costs.write_bytes(whole[: whole.rstrip(b"\n").rfind(b"\n") + 1])  # the last line never made it
    assert len(ledger(first.run_dir)) == 2

    scenario, continuation = plan_resume(first.run_dir, max_rounds=10)
    await execute(scenario, continuation=continuation)

    lines = ledger(first.run_dir)
    assert [ln.seq for ln in lines] == [1, 2, 3, 4, 5] and [ln.resume for ln in lines] == [
        0,
        0,
        0,
        1,
        1,
    ]
    assert spent(first.run_dir) == spent(baseline)
    assert messages(first.run_dir) == messages(baseline)


def test_a_torn_tail_is_cut_before_appending(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_bytes(b'{"a": 1}\n{"b": 2}\n{"c": 3')
    assert drop_torn_tail(path) == len(b'{"c": 3')
    assert path.read_bytes() == b'{"a": 1}\n{"b": 2}\n'
    assert drop_torn_tail(path) == 0 and drop_torn_tail(tmp_path / "missing.jsonl") == 0
    path.write_bytes(b"no newline at all")
    assert drop_torn_tail(path) == 17 and path.read_bytes() == b""


async def test_a_run_that_is_still_executing_is_not_resumed(tmp_path: Path) -> None:
    from sopbus.bus import RunStore

    first = await execute(load_scenario(scenario_file(tmp_path, "busy", max_rounds=1)))
    holder = RunStore.open(first.run_dir)
    holder.lock()
    try:
        scenario, continuation = plan_resume(first.run_dir, max_rounds=3)
        with pytest.raises(ConfigError, match="still executing"):
            await execute(scenario, continuation=continuation)
        assert not (first.run_dir / "events.1.jsonl").exists()  # nothing was changed
    finally:
        holder.close()


def test_resume_names_what_is_not_a_run(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a run directory"):
        plan_resume(tmp_path)
    (tmp_path / "events.jsonl").write_text("")
    with pytest.raises(ConfigError, match=r"scenario.toml"):
        plan_resume(tmp_path)


async def test_every_run_records_its_answers_and_reservations(tmp_path: Path) -> None:
    sc = scenario_with_overrides(load_scenario(scenario_file(tmp_path, "plain")), max_rounds=2)
    outcome = await execute(sc)
    calls = list(read_jsonl(outcome.run_dir / "calls.jsonl", CallRecord))
    reserved = [e for e in events(outcome.run_dir) if e["kind"] == "llm_reserved"]
    assert sorted((c.round, c.role, c.action) for c in calls) == [
        (1, "Planner", "RelayPlan"),
        (2, "Ann", "RelayDraft"),
        (2, "Ben", "RelayDraft"),
    ]
    assert sorted(c.call for c in calls) == sorted(e["data"]["call"] for e in reserved) == [1, 2, 3]
    assert [c.ledger.seq for c in calls if c.ledger] == [1, 2, 3]
    for record, line in zip(calls, ledger(outcome.run_dir), strict=True):
        assert record.ledger == line
    # The run's calls.jsonl is a cassette the replay provider reads.
    from sopbus.bus import ReplayProvider

    ReplayProvider(outcome.run_dir / "calls.jsonl")
