"""A population run as a user runs it: ``sopbus run``, ``validate``, ``costs``,
``populations``, ``replay``, ``verify`` and ``resume``, in subprocesses."""

from __future__ import annotations

import csv
import io
import json
from decimal import Decimal
from pathlib import Path

import pytest

from support.cli import sopbus
from support.killed_runs import ledger
from support.populations import small_game


def _only_run(runs: Path) -> Path:
    (run_dir,) = [p for p in runs.iterdir() if p.is_dir()]
    return run_dir


def _summary(run_dir: Path) -> dict:
    return json.loads((run_dir / "summary.json").read_text())


def test_a_small_game_runs_and_sums_each_round(tmp_path: Path) -> None:
    done = sopbus("run", small_game(tmp_path), "--quiet", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    run_dir = _only_run(tmp_path / "runs")
    rounds = _summary(run_dir)["populations"]["Player"]
    assert [r["round"] for r in rounds] == [1, 3]
    assert all(
        r["acted"] == 20 and r["woke"] == 20 and sum(r["bins"]["counts"]) == 20 for r in rounds
    )
    assert all(0 <= r["mean"] <= 100 for r in rounds)
    assert "populations, round by round" in done.stdout
    # The log: one message per population round, not one per agent.
    kinds = [
        json.loads(line)["kind"] for line in (run_dir / "events.jsonl").read_text().splitlines()
    ]
    assert kinds.count("message_published") == 5  # seed, guesses, result, guesses, last result
    # The ledger: one line per batch (a round's 20 agents), exact per call in its columns.
    lines = ledger(run_dir)
    assert [(ln.round, ln.role, ln.calls) for ln in lines] == [(1, "Player", 20), (3, "Player", 20)]
    for line in lines:
        assert line.batch is not None and line.batch.agents == list(range(20))
        assert sum(line.batch.cost_usd, Decimal(0)) == line.cost_usd > 0
        assert sum(line.batch.prompt_tokens) == line.prompt_tokens
        assert sum(line.batch.completion_tokens) == line.completion_tokens
    summary = _summary(run_dir)
    assert summary["llm_calls"] == 40
    assert Decimal(summary["total_usd"]) == sum((ln.cost_usd for ln in lines), Decimal(0))
    costs = json.loads(sopbus("costs", run_dir, "--json").stdout)
    assert list(costs["by_role"]) == ["Player"] and costs["by_role"]["Player"]["agents"] == 20
    assert costs["calls"] == 40 and costs["by_role"]["Player"]["calls"] == 40
    table = sopbus("populations", run_dir, "--csv")
    rows = list(csv.DictReader(io.StringIO(table.stdout)))
    assert [r["round"] for r in rows] == ["1", "3"] and rows[0]["acted"] == "20"


def test_set_changes_the_count_from_the_command_line(tmp_path: Path) -> None:
    done = sopbus(
        "run", small_game(tmp_path), "--set", "populations.Player.count=7", "--quiet", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    rounds = _summary(_only_run(tmp_path / "runs"))["populations"]["Player"]
    assert [r["acted"] for r in rounds] == [7, 7]


def test_validate_states_the_worst_case_of_a_round_and_of_the_run(tmp_path: Path) -> None:
    done = sopbus("validate", small_game(tmp_path), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "population Player: worst case $" in done.stdout and "for the whole run" in done.stdout
    assert "20 agents x 3 attempts" in done.stdout


def test_run_refuses_a_cap_short_of_one_round_before_any_run_directory(tmp_path: Path) -> None:
    done = sopbus("run", small_game(tmp_path, budget="0.001"), "--quiet", cwd=tmp_path)
    assert done.returncode == 2
    assert "cannot cover one round of population Player" in done.stderr and "more" in done.stderr
    assert "$.run.budget_usd" in done.stderr
    assert not (tmp_path / "runs").exists()
    warned = sopbus("validate", small_game(tmp_path, budget="0.001"), cwd=tmp_path)
    assert "will refuse to start" in warned.stdout


def test_the_cap_stops_agents_cleanly_and_says_how_many_acted(tmp_path: Path) -> None:
    # A cap that covers one round's worst case (about $0.0079 for 20 agents) but not the
    # rounds a long game spends at the actual price (about $0.00056 a round).
    path = small_game(tmp_path, rounds=40, budget="0.0085")
    done = sopbus("run", path, "--quiet", cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    run_dir = _only_run(tmp_path / "runs")
    summary = _summary(run_dir)
    assert summary["status"] == "budget_exhausted"
    assert "agents acted in round" in summary["detail"]
    last = summary["populations"]["Player"][-1]
    assert (
        f"{last['acted'] + last['failed']} of 20 agents acted in round {last['round']}"
        in summary["detail"]
    )
    assert sum((ln.cost_usd for ln in ledger(run_dir)), Decimal(0)) <= Decimal("0.0085")


def test_replay_verify_and_resume_keep_the_aggregates(tmp_path: Path) -> None:
    path = small_game(tmp_path, count=12)
    assert sopbus("run", path, "--quiet", cwd=tmp_path).returncode == 0
    run_dir = _only_run(tmp_path / "runs")
    sums = _summary(run_dir)["populations"]
    assert sopbus("verify", run_dir).returncode == 0

    replayed = sopbus("replay", run_dir, "--quiet", cwd=tmp_path)
    assert replayed.returncode == 0, replayed.stderr
    (copy,) = [p for p in (tmp_path / "runs").iterdir() if p != run_dir]
    assert _summary(copy)["populations"] == sums and Decimal(_summary(copy)["total_usd"]) == 0

    killed_runs = tmp_path / "killed"
    killed = small_game(tmp_path, count=12, name="killed.toml").read_text()
    killed_path = tmp_path / "killed.toml"
    killed_path.write_text(killed.replace(str(tmp_path / "runs"), str(killed_runs)))
    # Killed in the second game round's batch: answered, neither recorded nor ledgered.
    dead = sopbus("run", killed_path, "--quiet", env={"SOPBUS_KILL_AT": "llm:answered#2"})
    assert dead.returncode == -9
    victim = _only_run(killed_runs)
    assert not (victim / "summary.json").exists()
    resumed = sopbus("resume", victim, "--quiet", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert _summary(victim)["populations"] == sums
    lines = ledger(victim)
    paid = [
        (ln.round, i) for ln in lines if ln.outcome == "ok" and ln.batch for i in ln.batch.agents
    ]
    assert len(paid) == len(set(paid)) == 24  # every agent's call paid once
    # The batch in flight at the kill is counted lost at its reservation, then made again.
    assert [(ln.round, ln.outcome, ln.resume) for ln in lines] == [
        (1, "ok", 0),
        (3, "lost", 1),
        (3, "ok", 1),
    ]
    assert sopbus("verify", victim).returncode == 0


def test_the_rounds_export_as_parquet_as_in_the_csv(tmp_path: Path) -> None:
    pq = pytest.importorskip(
        "pyarrow.parquet",
        reason="needs pyarrow: pip install -e '.[parquet]' (the test extra has it)",
    )
    done = sopbus("run", small_game(tmp_path, count=30, rounds=3), "--quiet", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    run_dir = _only_run(tmp_path / "runs")
    out = tmp_path / "rounds.parquet"
    wrote = sopbus("populations", run_dir, "--parquet", out, cwd=tmp_path)
    assert wrote.returncode == 0 and f"wrote 3 rows (1 populations) to {out}" in wrote.stdout
    table = pq.read_table(out).to_pylist()
    text = sopbus("populations", run_dir, "--csv", cwd=tmp_path).stdout
    as_csv = list(csv.DictReader(io.StringIO(text)))
    assert [list(r) for r in table] == [list(r) for r in as_csv]  # the same columns, in order
    for got, row in zip(table, as_csv, strict=True):
        assert {k: "" if v is None else str(v) for k, v in got.items()} == row
    # a path that cannot be written: exit 2 naming the flag; the file written before stays
    bad = sopbus("populations", run_dir, "--parquet", tmp_path / "no" / "x.parquet")
    assert bad.returncode == 2 and "--parquet" in bad.stderr
    assert pq.read_table(out).num_rows == 3
