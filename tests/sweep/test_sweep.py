"""sopbus sweep, sweeps and sweep-show as a user runs them (the CLI as a subprocess), on the
software company and the simulator: a 2 x 5 matrix, a budget smaller than the matrix needs,
a kill -9 of the sweep then --resume, a [sweep] table on a real (local) OpenAI server, and
the errors a user can make.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from sopbus.bus.money._file_account import FileAccount
from sopbus.bus.store._verify import verify_run
from sopbus.cli._cmd_diff import messages
from support.cli import ARGV
from support.killed_runs import wait_for
from support.openai_server import Answer, OpenAIServer
from support.sweeps import (
    COMPANY,
    greet_sweep,
    in_flight,
    ledger,
    record,
    sopbus,
    spent,
    summary,
    sweep_dir,
)


def start(tmp_path: Path, *argv: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [*ARGV, *argv], cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )


def account_matches_ledgers(sdir: Path, runs: Path) -> Decimal:
    """The shared account booked exactly what the runs' ledgers say; returns the total."""
    state = FileAccount(sdir / "budget.json").read()
    ledgers = {
        e["run_id"]: spent(runs / e["run_id"])
        for e in record(sdir)["runs"]
        if (runs / e["run_id"]).is_dir()
    }
    assert {k: v for k, v in state.by_holder.items() if v} == {
        k: v for k, v in ledgers.items() if v
    }
    assert state.held == 0
    assert state.spent == sum(ledgers.values(), Decimal(0))
    return state.spent


@pytest.mark.slow
def test_a_sweep_of_the_software_company_two_variants_by_five_seeds(tmp_path: Path) -> None:
    done = sopbus(
        tmp_path,
        "sweep",
        str(COMPANY),
        "--seeds",
        "5",
        "--set",
        "sop.review=true,false",
        "--jobs",
        "2",
        "--runs-dir",
        "runs",
        "--sweeps-dir",
        "sweeps",
    )
    assert done.returncode == 0, done.stderr
    sdir, runs = sweep_dir(tmp_path / "sweeps"), tmp_path / "runs"
    data = record(sdir)
    assert data["executor"] == "processes" and data["state"] == "finished"
    assert data["seeds"] == [0, 1, 2, 3, 4]
    assert [(v["id"], v["settings"]) for v in data["variants"]] == [
        ("v1", [["sop.review", True]]),
        ("v2", [["sop.review", False]]),
    ]
    assert len(data["runs"]) == 10 and {e["state"] for e in data["runs"]} == {"done"}
    for entry in data["runs"]:
        run_dir = runs / entry["run_id"]
        assert summary(run_dir)["status"] == entry["status"] == "completed"
        assert summary(run_dir)["seed"] == entry["seed"]
        review = "true" if entry["variant"] == "v1" else "false"
        assert f"review = {review}" in (run_dir / "scenario.toml").read_text()
        assert Decimal(entry["total_usd"]) == spent(run_dir) > 0
    total = account_matches_ledgers(sdir, runs)
    rows = (sdir / "results.csv").read_text().splitlines()
    assert rows[0].startswith(
        "sweep_id,variant,settings,seed,run_id,state,status,end_reason,verdict"
    )
    assert sorted(r.split(",")[1] for r in rows[1:]) == ["v1"] * 5 + ["v2"] * 5

    shown = json.loads(sopbus(tmp_path, "sweep-show", "last", "--json").stdout)
    by_variant = {row["variant"]: row for row in shown["variants"]}
    for vid in ("v1", "v2"):
        row = by_variant[vid]
        costs = sorted(Decimal(e["total_usd"]) for e in data["runs"] if e["variant"] == vid)
        assert (row["runs"], row["ended"], row["skipped"]) == (5, 5, 0)
        assert row["pass_rate"] == 1.0  # QA's tests pass in every run of the simulated company
        assert Decimal(row["spend_max_usd"]) == costs[-1]
        assert Decimal(row["spend_median_usd"]) == costs[2]
        assert Decimal(row["spend_mean_usd"]) == sum(costs, Decimal(0)) / 5
        assert row["end_reasons"] == {"idle": 5} and row["rounds_mean"] > 0
    assert by_variant["v2"]["tokens_mean"] < by_variant["v1"]["tokens_mean"]  # no review calls
    assert sum(Decimal(r["spend_total_usd"]) for r in shown["variants"]) == total

    table = sopbus(tmp_path, "sweep-show", sdir.name[:20]).stdout
    assert "sop.review=false" in table and "100% (5/5)" in table
    csv_rows = sopbus(tmp_path, "sweep-show", str(sdir), "--csv").stdout.splitlines()
    assert csv_rows[0].startswith("variant,settings,runs,ended") and len(csv_rows) == 3
    listed = json.loads(sopbus(tmp_path, "sweeps", "--json").stdout)
    assert [(s["sweep_id"], s["ended"], s["runs"], s["state"]) for s in listed] == [
        (sdir.name, 10, 10, "finished")
    ]


@pytest.mark.slow
def test_the_sweeps_budget_holds_over_all_runs_and_the_runs_it_cannot_pay_are_skipped(
    tmp_path: Path,
) -> None:
    budget = Decimal("0.012")  # a run costs $0.0036 to $0.0043, but reserves much more
    done = sopbus(
        tmp_path,
        "sweep",
        str(COMPANY),
        "--seeds",
        "4",
        "--set",
        "sop.review=true,false",
        "--jobs",
        "2",
        "--budget",
        str(budget),
        "--runs-dir",
        "runs",
    )
    assert done.returncode == 3, done.stderr
    sdir, runs = sweep_dir(tmp_path / "sweeps"), tmp_path / "runs"
    entries = record(sdir)["runs"]
    skipped = [e for e in entries if e["state"] == "skipped"]
    assert skipped and record(sdir)["state"] == "budget_exhausted"
    assert all(not (runs / e["run_id"]).exists() for e in skipped)
    assert f"the sweep's budget ran out: {len(skipped)} run(s) skipped" in done.stdout
    # The cap held exactly: every ledger of every run together stays under it.
    total = sum(
        (spent(runs / e["run_id"]) for e in entries if (runs / e["run_id"]).is_dir()), Decimal(0)
    )
    assert 0 < total <= budget
    assert account_matches_ledgers(sdir, runs) == total
    assert FileAccount(sdir / "budget.json").read().refused >= 1
    refused = [
        line for e in entries for line in ledger(runs / e["run_id"]) if line.outcome == "refused"
    ]
    assert refused  # a call of a run was refused by the sweep's cap, not by its own ($2.00)
    assert any(e["end_reason"] == "budget_exhausted" for e in entries)
    shown = json.loads(sopbus(tmp_path, "sweep-show", "last", "--json").stdout)
    assert sum(row["skipped"] for row in shown["variants"]) == len(skipped)
    for entry in entries:  # every run a sweep made verifies intact (issue 13, item 5)
        if (runs / entry["run_id"]).is_dir():
            assert verify_run(runs / entry["run_id"]).intact, verify_run(
                runs / entry["run_id"]
            ).problems


def kill_point(runs: Path) -> bool | None:
    """One run has ended and another has a call in flight."""
    dirs = [d for d in runs.iterdir() if d.is_dir()] if runs.is_dir() else []
    ended = any((d / "summary.json").is_file() for d in dirs)
    return (ended and any(in_flight(d) for d in dirs if not (d / "summary.json").is_file())) or None


@pytest.mark.slow
def test_a_sweep_killed_with_kill_9_resumes_and_pays_no_call_twice(tmp_path: Path) -> None:
    matrix = ["--seeds", "2", "--set", "sop.review=true,false", "--jobs", "2"]
    base = sopbus(
        tmp_path,
        "sweep",
        str(COMPANY),
        *matrix,
        "--set",
        "llm.latency_ms=0",
        "--runs-dir",
        "base-runs",
        "--sweeps-dir",
        "base-sweeps",
    )
    assert base.returncode == 0, base.stderr
    baseline = {
        (e["variant"], e["seed"]): tmp_path / "base-runs" / e["run_id"]
        for e in record(sweep_dir(tmp_path / "base-sweeps"))["runs"]
    }

    # Each call takes 2 s: the kill point (a reservation with no answer yet, seen by a poll
    # every 5 ms) comes long before the call could end, so the kill always lands while a call
    # is in flight. At 300 ms a slow poll on a loaded machine saw the call as in flight just
    # as it ended, and now and then the kill found none (lost_total was 0).
    proc = start(
        tmp_path,
        "sweep",
        str(COMPANY),
        *matrix,
        "--set",
        "llm.latency_ms=2000",
        "--runs-dir",
        "runs",
    )
    try:
        wait_for(lambda: kill_point(tmp_path / "runs"), proc)
    finally:
        proc.send_signal(signal.SIGKILL)  # the coordinator only; its workers must go with it
        proc.communicate()
    sdir, runs = sweep_dir(tmp_path / "sweeps"), tmp_path / "runs"
    killed = [
        e
        for e in record(sdir)["runs"]
        if (runs / e["run_id"]).is_dir() and not (runs / e["run_id"] / "summary.json").is_file()
    ]
    assert killed
    # What the test is about: the kill left a call in flight (reserved, never answered).
    assert any(in_flight(runs / e["run_id"]) for e in killed)

    resumed = sopbus(tmp_path, "sweep", "--resume", sdir.name)
    assert resumed.returncode == 0, resumed.stderr
    data = record(sdir)
    assert data["resumes"] == 1 and data["state"] == "finished"
    assert {e["state"] for e in data["runs"]} == {"done"}
    lost_total = Decimal(0)
    for entry in data["runs"]:
        run_dir, twin = runs / entry["run_id"], baseline[entry["variant"], entry["seed"]]
        assert summary(run_dir)["status"] == "completed"
        assert messages(run_dir) == messages(twin)
        lines = ledger(run_dir)
        lost = [line for line in lines if line.outcome == "lost"]
        lost_total += sum((line.cost_usd for line in lost), Decimal(0))
        # No completed call was paid twice: the paid calls are the uninterrupted twin's,
        # plus the calls the kill left in flight (paid once more, at their reservation).
        assert sorted(
            (ln.round, ln.role, ln.action) for ln in lines if ln.outcome == "ok"
        ) == sorted((ln.round, ln.role, ln.action) for ln in ledger(twin) if ln.outcome == "ok")
        assert spent(run_dir) == spent(twin) + sum((line.cost_usd for line in lost), Decimal(0))
        assert verify_run(run_dir).intact, verify_run(run_dir).problems  # killed and resumed
    assert lost_total > 0
    account_matches_ledgers(sdir, runs)


@pytest.mark.slow
def test_a_sweep_table_in_the_file_on_a_real_provider_runs_as_concurrent_tasks(
    tmp_path: Path,
) -> None:
    with OpenAIServer() as server:
        server.script(Answer("hello", prompt_tokens=20, completion_tokens=10))
        scenario = greet_sweep(tmp_path, server.base_url, 'seeds = "3..5"\njobs = 3')
        done = sopbus(tmp_path, "sweep", str(scenario), env={"OPENAI_API_KEY": "sk-test"})
        assert done.returncode == 0, done.stderr
        temperatures = sorted(r.body["temperature"] for r in server.requests)
    sdir = sweep_dir(tmp_path / "sweeps")
    data = record(sdir)
    assert (data["executor"], data["jobs"], data["seeds"]) == ("tasks", 3, [3, 4, 5])
    assert Decimal(data["budget_usd"]) == Decimal("0.5")
    assert temperatures == [0.0] * 3 + [1.0] * 3
    assert all(summary(tmp_path / "runs" / e["run_id"])["llm_calls"] == 1 for e in data["runs"])
    assert account_matches_ledgers(sdir, tmp_path / "runs") > 0


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--set", "llm.modle=gpt-4o,gpt-4o-mini"], "no key 'modle' in llm; did you mean 'model'?"),
        (["--set", "llm.model"], "expected key=value1,value2"),
        (["--seed", "5..2"], "expected a range of seeds A..B with A <= B"),
        (["--seeds", "3", "--seed", "1..2"], "give one of them"),
        (["--set", "llm.model=no-such-model"], "no-such-model"),
    ],
)
def test_a_bad_matrix_is_a_usage_error_before_anything_runs(
    argv: list[str], words: str, tmp_path: Path
) -> None:
    done = sopbus(tmp_path, "sweep", str(COMPANY), *argv)
    assert done.returncode == 2
    assert words in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "sweeps").exists() and not (tmp_path / "runs").exists()


def test_resume_takes_no_new_matrix_and_names_an_unknown_sweep(tmp_path: Path) -> None:
    done = sopbus(tmp_path, "sweep", str(COMPANY), "--resume", "abc")
    assert done.returncode == 2 and "drop SCENARIO" in done.stderr
    done = sopbus(tmp_path, "sweep", "--resume", "abc")
    assert done.returncode == 2 and "sweep 'abc' not found in sweeps/" in done.stderr
    done = sopbus(tmp_path, "sweep-show", "abc")
    assert done.returncode == 2 and "sopbus sweeps --sweeps-dir sweeps" in done.stderr


@pytest.mark.slow
def test_ctrl_c_stops_a_sweep_cleanly_and_resume_finishes_it(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [
            *ARGV,
            "sweep",
            str(COMPANY),
            "--seeds",
            "3",
            "--jobs",
            "2",
            "--set",
            "llm.latency_ms=300",
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        wait_for(lambda: kill_point(tmp_path / "runs"), proc)
    finally:
        os.killpg(proc.pid, signal.SIGINT)  # as a terminal sends it: to the whole group
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err.decode()
    sdir, runs = sweep_dir(tmp_path / "sweeps"), tmp_path / "runs"
    assert f"sopbus sweep --resume {sdir.name}" in err.decode() and b"Traceback" not in err
    data = record(sdir)
    assert data["state"] == "interrupted"
    stopped = [runs / e["run_id"] for e in data["runs"] if e["state"] == "interrupted"]
    # The workers cancelled their runs: each wrote its end and gave its holds back (a run
    # whose job had just been sent may not have begun its loop).
    begun = [d for d in stopped if (d / "summary.json").is_file()]
    assert begun and all(summary(d)["status"] == "cancelled" for d in begun)
    assert all(
        summary(runs / e["run_id"])["status"] == e["status"]
        for e in data["runs"]
        if e["state"] == "done"
    )
    assert FileAccount(sdir / "budget.json").read().held == 0

    resumed = sopbus(tmp_path, "sweep", "--resume", "last")
    assert resumed.returncode == 0, resumed.stderr
    assert {(e["state"], e["status"]) for e in record(sdir)["runs"]} == {("done", "completed")}
    account_matches_ledgers(sdir, runs)


def test_sweep_show_counts_verdicts_and_says_n_a_without_them(tmp_path: Path) -> None:
    from sopbus.cli._cmd_sweep_show import print_variants
    from sopbus.sweep._plan import Variant
    from sopbus.sweep._record import RunEntry, SweepRecord
    from sopbus.sweep._stats import variant_rows

    verdicts: dict[str, list[Any]] = {
        "v1": [{"passed": True, "reason": "ok"}, {"passed": False, "reason": "tests failed"}, None],
        "v2": [None, "absent"],
    }
    entries = []
    for vid, values in verdicts.items():
        for seed, verdict in enumerate(values):
            run_id = f"s-{vid}-s{seed}"
            entries.append(RunEntry(run_id=run_id, variant=vid, seed=seed, state="done"))
            fields: dict[str, Any] = {
                "status": "completed",
                "end_reason": "idle",
                "rounds": 3 + seed,
                "total_usd": f"0.00{seed + 1}",
                "prompt_tokens": 10,
                "completion_tokens": 5,
                "duration_s": 1.5,
            }
            if verdict != "absent":
                fields["verdict"] = verdict
            (tmp_path / run_id).mkdir()
            (tmp_path / run_id / "summary.json").write_text(json.dumps(fields))
    entries.append(RunEntry(run_id="s-v2-s9", variant="v2", seed=9, state="skipped"))
    rec = SweepRecord(
        sweep_id="s",
        scenario="x",
        scenario_path="x.toml",
        runs_dir=str(tmp_path),
        budget_usd=Decimal(1),
        jobs=1,
        executor="processes",
        seeds=(0, 1, 2, 9),
        variants=(Variant(id="v1", settings=(("a", 1),)), Variant(id="v2", settings=(("a", 2),))),
        runs=entries,
        created_at=0.0,
    )
    v1, v2 = variant_rows(rec)
    assert (v1["verdicts"], v1["passed"], v1["pass_rate"]) == (2, 1, 0.5)
    assert (v1["spend_mean_usd"], v1["spend_median_usd"], v1["spend_max_usd"]) == (
        Decimal("0.002"),
        Decimal("0.002"),
        Decimal("0.003"),
    )
    assert (v1["rounds_mean"], v1["tokens_mean"], v1["wall_s_mean"]) == (4.0, 15.0, 1.5)
    assert (v2["pass_rate"], v2["runs"], v2["ended"], v2["skipped"]) == (None, 3, 2, 1)
    from rich.console import Console

    for width in (200, 40):  # a line per variant, or stacked
        console = Console(width=width, record=True)
        print_variants(console, rec, [v1, v2], Decimal("0.01"))
        text = console.export_text()
        assert "50% (1/2)" in text and "n/a" in text and "2/3 (1 skipped)" in text


def children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


def open_run_dirs(pid: int, runs: Path) -> list[Path]:
    """The run directories process ``pid`` holds open (a run locks its directory)."""
    found = []
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = Path(os.readlink(fd))
        except OSError:
            continue
        if target.parent == runs:
            found.append(target)
    return found


@pytest.mark.slow
@pytest.mark.skipif(
    not Path("/proc/self/task").is_dir(), reason="finds worker processes in /proc (Linux)"
)
def test_a_worker_killed_mid_run_is_reported_and_its_run_resumed(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [
            *ARGV,
            "sweep",
            str(COMPANY),
            "--seeds",
            "3",
            "--jobs",
            "2",
            "--set",
            "llm.latency_ms=300",
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    runs = tmp_path / "runs"
    wait_for(lambda: kill_point(runs), proc)
    assert len(children(proc.pid)) == 2  # the two worker processes
    victim = wait_for(
        lambda: next(
            (
                pid
                for pid in children(proc.pid)
                if any(in_flight(d) for d in open_run_dirs(pid, runs))
            ),
            None,
        ),
        proc,
    )
    os.kill(victim, signal.SIGKILL)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 1, err.decode()
    sdir = sweep_dir(tmp_path / "sweeps")
    crashed = [e for e in record(sdir)["runs"] if e["state"] == "crashed"]
    assert len(crashed) == 1 and "ended with exit code -9" in crashed[0]["error"]
    assert f"run {crashed[0]['run_id']} could not be executed" in out.decode()
    others = [e for e in record(sdir)["runs"] if e["state"] != "crashed"]
    assert {e["status"] for e in others} == {"completed"}  # a new worker took the next runs

    resumed = sopbus(tmp_path, "sweep", "--resume", sdir.name)
    assert resumed.returncode == 0, resumed.stderr
    assert {e["state"] for e in record(sdir)["runs"]} == {"done"}
    assert any(line.outcome == "lost" for line in ledger(runs / crashed[0]["run_id"]))
    account_matches_ledgers(sdir, runs)
