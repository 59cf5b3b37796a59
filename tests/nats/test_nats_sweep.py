"""Sweeps across machines (issue 18): ``sopbus sweep --bus URL`` queues its runs on a real
nats-server and ``sopbus worker --bus URL`` subprocesses execute them, each into its own
runs directory (as on machines of their own), under the sweep's one budget in NATS KV.

Each worker here has its own ``--runs-dir``; the sweep finds the runs through the links it
makes to them (the test machine is one filesystem), and a test of the record the sweep
keeps when it cannot see a worker's directory stands at the end.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from sopbus.bus.money._file_account import FileAccount
from sopbus.bus.store._verify import verify_run
from sopbus.cli._cmd_diff import messages
from support.cli import ARGV
from support.killed_runs import wait_for
from support.nats_server import NatsServer
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

MATRIX = ["--seeds", "1", "--set", "sop.review=true,false"]


class Worker:
    """A ``sopbus worker`` subprocess with a runs directory of its own."""

    def __init__(self, home: Path, url: str, jobs: int = 1, env: dict[str, str] | None = None):
        self.home, self.runs = home, home / "runs"
        self.log = home / f"worker-{time.monotonic_ns()}.log"
        home.mkdir(parents=True, exist_ok=True)
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [*ARGV, "worker", "--bus", url, "--jobs", str(jobs), "--runs-dir", str(self.runs)],
                cwd=home,
                stdout=log,
                stderr=log,
                env={**os.environ, **(env or {})},
            )

    def wait_ready(self) -> None:
        wait_for(lambda: "taking sweep runs from" in self.log.read_text() or None, self.proc)

    def run_ids(self) -> set[str]:
        return (
            {p.name for p in self.runs.iterdir() if (p / "summary.json").is_file()}
            if self.runs.is_dir()
            else set()
        )

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=60)


@contextmanager
def workers(
    tmp_path: Path, url: str, count: int = 2, env: dict[str, str] | None = None
) -> Iterator[list[Worker]]:
    started = [Worker(tmp_path / f"worker-{i}", url, env=env) for i in range(count)]
    try:
        for worker in started:
            worker.wait_ready()
        yield started
    finally:
        for worker in started:
            worker.stop()


def shown(sweeps: Path) -> dict[str, dict[str, Any]]:
    """``sopbus sweep-show``'s rows of the one sweep in ``sweeps``, by variant."""
    from sopbus.sweep._record import SweepDir
    from sopbus.sweep._stats import variant_rows

    return {row["variant"]: row for row in variant_rows(SweepDir(sweep_dir(sweeps)).read())}


def books_balance(sdir: Path, runs: Path) -> Decimal:
    """The sweep's account (copied from NATS at its end) booked what the runs' ledgers say."""
    state = FileAccount(sdir / "budget.json").read()
    ledgers = {
        e["run_id"]: spent(runs / e["run_id"])
        for e in record(sdir)["runs"]
        if (runs / e["run_id"]).exists()
    }
    assert {k: v for k, v in state.by_holder.items() if v} == {
        k: v for k, v in ledgers.items() if v
    }
    assert state.held == 0 and state.spent <= state.cap
    return state.spent


@pytest.mark.slow
def test_a_sweep_on_two_workers_finds_what_the_same_sweep_finds_locally(
    tmp_path: Path, shared_nats_server: NatsServer
) -> None:
    url = shared_nats_server.url
    local = sopbus(
        tmp_path,
        "sweep",
        str(COMPANY),
        *MATRIX,
        "--jobs",
        "2",
        "--runs-dir",
        "local-runs",
        "--sweeps-dir",
        "local-sweeps",
    )
    assert local.returncode == 0, local.stderr
    with workers(tmp_path, url) as (one, two):
        done = sopbus(tmp_path, "sweep", str(COMPANY), *MATRIX, "--bus", url, "--runs-dir", "runs")
        assert done.returncode == 0, done.stderr
    sdir, runs = sweep_dir(tmp_path / "sweeps"), tmp_path / "runs"
    data = record(sdir)
    assert data["bus"] == url and data["state"] == "finished"
    assert {(e["state"], e["status"]) for e in data["runs"]} == {("done", "completed")}
    # Every run ran on exactly one worker, into that worker's runs directory, and both worked.
    ids = {e["run_id"] for e in data["runs"]}
    assert one.run_ids() | two.run_ids() == ids and not one.run_ids() & two.run_ids()
    assert one.run_ids() and two.run_ids()
    for entry in data["runs"]:
        assert (runs / entry["run_id"]).resolve().parent in (one.runs.resolve(), two.runs.resolve())
        assert summary(runs / entry["run_id"])["seed"] == entry["seed"]
    # Same findings per variant as the local sweep of the same matrix.
    keys = (
        "runs",
        "ended",
        "skipped",
        "verdicts",
        "passed",
        "pass_rate",
        "spend_total_usd",
        "spend_max_usd",
        "tokens_mean",
        "rounds_mean",
        "end_reasons",
    )
    here, there = shown(tmp_path / "sweeps"), shown(tmp_path / "local-sweeps")
    assert {v: [row[k] for k in keys] for v, row in here.items()} == {
        v: [row[k] for k in keys] for v, row in there.items()
    }
    assert here["v1"]["pass_rate"] == 1.0 and here["v1"]["ended"] == 1
    total = books_balance(sdir, runs)
    assert total == sum((Decimal(e["total_usd"]) for e in data["runs"]), Decimal(0)) > 0
    assert re.search(
        r"\[2/2\] v\d seed \d: completed \(idle\) \$[\d.]+ - run \S+ on \S+:\d+", done.stderr
    )


@pytest.mark.slow
def test_the_sweeps_budget_holds_across_both_workers_and_the_rest_is_skipped(
    tmp_path: Path, shared_nats_server: NatsServer
) -> None:
    url = shared_nats_server.url
    budget = Decimal("0.012")  # a run costs $0.0036 to $0.0043, but reserves much more
    with workers(tmp_path, url) as (one, two):
        done = sopbus(
            tmp_path,
            "sweep",
            str(COMPANY),
            "--seeds",
            "3",
            "--set",
            "sop.review=true,false",
            "--budget",
            str(budget),
            "--bus",
            url,
            "--runs-dir",
            "runs",
        )
    assert done.returncode == 3, done.stderr
    sdir, runs = sweep_dir(tmp_path / "sweeps"), tmp_path / "runs"
    data = record(sdir)
    skipped = [e for e in data["runs"] if e["state"] == "skipped"]
    assert skipped and data["state"] == "budget_exhausted"
    assert f"the sweep's budget ran out: {len(skipped)} run(s) skipped" in done.stdout
    assert "skipped" not in done.stderr  # no line per skipped run, as locally
    for entry in skipped:  # never started anywhere
        assert not any((where / entry["run_id"]).exists() for where in (runs, one.runs, two.runs))
    ran = [e for e in data["runs"] if e["state"] == "done"]
    total = sum((spent(runs / e["run_id"]) for e in ran), Decimal(0))
    assert 0 < total <= budget  # every ledger of every run on both workers, under the one cap
    assert books_balance(sdir, runs) == total
    refused = [
        line for e in ran for line in ledger(runs / e["run_id"]) if line.outcome == "refused"
    ]
    assert refused and any(e["end_reason"] == "budget_exhausted" for e in ran)
    assert {w for w in (one, two) if w.run_ids()} == {one, two}  # both drew on it


@pytest.mark.slow
def test_a_sweep_on_a_real_provider_runs_as_tasks_on_the_workers_with_their_keys(
    tmp_path: Path, shared_nats_server: NatsServer
) -> None:
    url = shared_nats_server.url
    with OpenAIServer() as server:
        server.script(Answer("hello", prompt_tokens=20, completion_tokens=10))
        scenario = greet_sweep(tmp_path, server.base_url, 'seeds = "3..4"')
        # The key is the workers' (they make the calls); the sweep only plans.
        with workers(tmp_path, url, env={"OPENAI_API_KEY": "sk-test"}) as (one, two):
            done = sopbus(
                tmp_path, "sweep", str(scenario), "--bus", url, env={"OPENAI_API_KEY": "sk-plan"}
            )
        assert done.returncode == 0, done.stderr
        temperatures = sorted(r.body["temperature"] for r in server.requests)
        keys = {r.headers.get("authorization") for r in server.requests}
    sdir, runs = sweep_dir(tmp_path / "sweeps"), tmp_path / "runs"
    data = record(sdir)
    assert (data["executor"], data["seeds"]) == ("tasks", [3, 4])
    assert temperatures == [0.0] * 2 + [1.0] * 2 and keys == {"Bearer sk-test"}
    assert one.run_ids() | two.run_ids() == {e["run_id"] for e in data["runs"]}
    assert all(summary(runs / e["run_id"])["llm_calls"] == 1 for e in data["runs"])
    assert books_balance(sdir, runs) > 0


def victim_run(worker: Worker) -> Path | None:
    """A run of ``worker`` that has paid for calls and has one in flight."""
    dirs = [d for d in worker.runs.iterdir() if d.is_dir()] if worker.runs.is_dir() else []
    return next(
        (d for d in dirs if not (d / "summary.json").is_file() and in_flight(d) and spent(d) > 0),
        None,
    )


@pytest.mark.slow
def test_a_worker_killed_mid_run_leaves_its_run_to_the_other_worker(
    tmp_path: Path, shared_nats_server: NatsServer
) -> None:
    url = shared_nats_server.url
    with workers(tmp_path, url) as (one, two):
        sweep = subprocess.Popen(
            [
                *ARGV,
                "sweep",
                str(COMPANY),
                "--seeds",
                "2",
                "--bus",
                url,
                "--lease",
                "3",
                "--set",
                "llm.latency_ms=150",
                "--runs-dir",
                "runs",
            ],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            killed_dir = wait_for(lambda: victim_run(one), sweep)
            one.proc.send_signal(signal.SIGKILL)  # its run process notices and dies with it
            one.proc.wait()
            _out, err = sweep.communicate(timeout=300)
        finally:
            if sweep.poll() is None:
                sweep.kill()
    assert sweep.returncode == 0, err.decode()
    sdir, runs = sweep_dir(tmp_path / "sweeps"), tmp_path / "runs"
    data = record(sdir)
    assert {(e["state"], e["status"]) for e in data["runs"]} == {("done", "completed")}
    victim = killed_dir.name
    assert not (killed_dir / "summary.json").exists()  # the dead attempt stays as it was
    assert two.run_ids() == {e["run_id"] for e in data["runs"]}  # the survivor did both
    assert (runs / victim).resolve() == (two.runs / victim).resolve()
    assert re.search(
        rf"completed \(idle\) \$[\d.]+ - run {victim} on \S+:{two.proc.pid}", err.decode()
    )
    # The sim's runs of one variant cost the same: the second attempt ran the whole run,
    # and the account kept what the dead attempt had paid besides (nothing held is left).
    other = next(e["run_id"] for e in data["runs"] if e["run_id"] != victim)
    assert summary(two.runs / victim)["total_usd"] == summary(two.runs / other)["total_usd"]
    state = FileAccount(sdir / "budget.json").read()
    assert state.by_holder[victim] == spent(killed_dir) + spent(two.runs / victim)
    assert spent(killed_dir) > 0 and state.held == 0


def test_a_workers_run_the_sweep_cannot_see_is_kept_as_its_summary(tmp_path: Path) -> None:
    from sopbus.bus._summary import RunSummary, encode_summary, read_summary
    from sopbus.sweep._dispatch import _place
    from sopbus.sweep._job import JobResult
    from sopbus.sweep._wire import RunEvent

    def ended(total: str) -> RunSummary:
        return RunSummary(
            run_id="r1", status="completed", end_reason="idle", total_usd=Decimal(total)
        )

    event = RunEvent(
        kind="ended",
        run_id="r1",
        worker="gpu-box:42",
        run_dir="/elsewhere/runs/r1",
        result=JobResult(run_id="r1", state="done", status="completed"),
        summary=ended("0.5"),
        ledger_usd=Decimal("0.5"),
    )
    _place(tmp_path / "runs" / "r1", event)
    assert read_summary(tmp_path / "runs" / "r1") == event.summary
    where = json.loads((tmp_path / "runs" / "r1" / "worker.json").read_text())
    assert where == {"worker": "gpu-box:42", "run_dir": "/elsewhere/runs/r1", "ledger_usd": "0.5"}
    # A later attempt's report (another worker took the run again) replaces the first.
    newer = ended("0.25")
    later = RunEvent(
        kind="ended",
        run_id="r1",
        worker="cpu-box:7",
        run_dir=str(tmp_path / "w2" / "r1"),
        result=JobResult(run_id="r1", state="done", status="completed"),
        summary=newer,
        ledger_usd=Decimal("0.25"),
    )
    (tmp_path / "w2" / "r1").mkdir(parents=True)
    (tmp_path / "w2" / "r1" / "summary.json").write_bytes(encode_summary(newer))
    _place(tmp_path / "runs" / "r1", later)
    assert (tmp_path / "runs" / "r1").resolve() == (tmp_path / "w2" / "r1").resolve()
    assert (
        json.loads((tmp_path / "runs" / "r1" / "summary.json").read_text())["total_usd"] == "0.25"
    )


@pytest.mark.slow
def test_a_worker_restarted_on_its_runs_resumes_the_run_and_pays_no_call_twice(
    tmp_path: Path, shared_nats_server: NatsServer
) -> None:
    url = shared_nats_server.url
    base = sopbus(
        tmp_path,
        "sweep",
        str(COMPANY),
        "--seeds",
        "1",
        "--set",
        "llm.latency_ms=0",
        "--runs-dir",
        "base-runs",
        "--sweeps-dir",
        "base-sweeps",
    )
    assert base.returncode == 0, base.stderr
    (twin,) = list((tmp_path / "base-runs").iterdir())
    with workers(tmp_path, url, count=1) as (first,):
        sweep = subprocess.Popen(
            [
                *ARGV,
                "sweep",
                str(COMPANY),
                "--seeds",
                "1",
                "--bus",
                url,
                "--lease",
                "3",
                "--set",
                "llm.latency_ms=150",
                "--runs-dir",
                "runs",
            ],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            run_dir = wait_for(lambda: victim_run(first), sweep)
            first.proc.send_signal(signal.SIGKILL)
            first.proc.wait()
            again = Worker(first.home, url)  # restarted: the same machine, the same runs
            try:
                again.wait_ready()
                _out, err = sweep.communicate(timeout=300)
            finally:
                again.stop()
        finally:
            if sweep.poll() is None:
                sweep.kill()
    assert sweep.returncode == 0, err.decode()
    sdir = sweep_dir(tmp_path / "sweeps")
    assert [(e["state"], e["status"]) for e in record(sdir)["runs"]] == [("done", "completed")]
    lines = ledger(run_dir)
    lost = [line for line in lines if line.outcome == "lost"]
    assert lost  # the call in flight at the kill, counted at its reservation
    # Every call answered before the kill was answered again from the run's recording.
    assert sorted((ln.round, ln.role, ln.action) for ln in lines if ln.outcome == "ok") == sorted(
        (ln.round, ln.role, ln.action) for ln in ledger(twin) if ln.outcome == "ok"
    )
    assert spent(run_dir) == spent(twin) + sum((line.cost_usd for line in lost), Decimal(0))
    assert books_balance(sdir, tmp_path / "runs") == spent(run_dir)
    assert messages(run_dir) == messages(twin)  # killed, resumed: the run it would have been
    assert verify_run(run_dir).intact, verify_run(run_dir).problems


async def server_has(url: str, stream: str) -> bool:
    from sopbus.bus.nats import open_link

    async def names(nc: Any, js: Any) -> list[str]:
        return [info.config.name for info in await js.streams_info()]

    async with open_link(url) as link:
        return stream in await link.call(names)


@pytest.mark.slow
def test_ctrl_c_withdraws_the_sweep_and_its_workers_cancel_their_runs_of_it(
    tmp_path: Path, shared_nats_server: NatsServer
) -> None:
    import trio

    url = shared_nats_server.url
    with workers(tmp_path, url, count=1) as (worker,):
        sweep = subprocess.Popen(
            [
                *ARGV,
                "sweep",
                str(COMPANY),
                "--seeds",
                "3",
                "--bus",
                url,
                "--set",
                "llm.latency_ms=300",
                "--runs-dir",
                "runs",
            ],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        run_dir = wait_for(lambda: victim_run(worker), sweep)
        sweep.send_signal(signal.SIGINT)
        _, err = sweep.communicate(timeout=60)
        assert sweep.returncode == 130, err.decode()
        assert f"queued on {url}".encode() in err  # it was on the server
        assert b"withdrawn from the workers" in err and b"Traceback" not in err
        sdir = sweep_dir(tmp_path / "sweeps")
        wait_for(lambda: (run_dir / "summary.json").is_file() or None, worker.proc)
        assert summary(run_dir)["status"] == "cancelled"
        assert worker.proc.poll() is None  # it goes on serving other sweeps
    assert not trio.run(server_has, url, f"SOPBUS_SWEEP_{sdir.name}")
    data = record(sdir)
    assert data["state"] == "interrupted"
    assert {e["state"] for e in data["runs"]} <= {"interrupted", "pending"}
    (going,) = [e for e in data["runs"] if e["run_id"] == run_dir.name]
    assert (going["state"], going["error"]) == ("interrupted", "the sweep was withdrawn")
    assert FileAccount(sdir / "budget.json").read().spent > 0  # the books as they stood


def test_a_run_that_every_worker_dies_on_is_given_up_after_three_deliveries(
    tmp_path: Path, shared_nats_server: NatsServer
) -> None:
    """A job that kills every worker that takes it is not delivered forever: after
    ``MAX_DELIVER`` (3) deliveries the queue gives it up and the sweep counts it crashed."""
    from sopbus.bus.nats._sweep import MAX_DELIVER

    url = shared_nats_server.url
    sweep = subprocess.Popen(
        [
            *ARGV,
            "sweep",
            str(COMPANY),
            "--seeds",
            "1",
            "--bus",
            url,
            "--lease",
            "1",
            "--set",
            "llm.latency_ms=300",
            "--runs-dir",
            "runs",
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    killed = []
    try:
        for attempt in range(MAX_DELIVER):
            worker = Worker(tmp_path / f"worker-{attempt}", url)
            killed.append(worker)
            wait_for(lambda: victim_run(worker), sweep)  # noqa: B023 (called within the iteration)
            worker.proc.send_signal(signal.SIGKILL)  # as a run that brings its worker down
            worker.proc.wait()
        # A healthy worker asks for work: the server finds the job spent (it checks when
        # asked) and says so; the job is not delivered a fourth time.
        healthy = Worker(tmp_path / "worker-healthy", url)
        out, err = sweep.communicate(timeout=60)
    finally:
        if sweep.poll() is None:
            sweep.kill()
        if "healthy" in locals():
            healthy.stop()
    data = record(sweep_dir(tmp_path / "sweeps"))
    (run,) = data["runs"]
    assert run["state"] == "crashed", err.decode()
    assert f"delivered {MAX_DELIVER} times" in run["error"]
    assert all(w.run_ids() == set() for w in killed)  # no attempt ended
    assert not healthy.runs.exists() or not any(healthy.runs.iterdir())


@pytest.mark.slow
def test_a_sweep_with_credentials_in_its_base_url_runs_on_the_workers_and_writes_none(
    tmp_path: Path, shared_nats_server: NatsServer
) -> None:
    # issue 28 item 13: the worker failed with a traceback and the run exited 2 after 20 s
    from urllib.parse import quote

    from support.leaks import leaks, secret_forms
    from support.openai_server import Echo

    user, password, key = "ann", "nats?>>~~pw9", "sk-worker-0123456789"
    forms = secret_forms(user, password, key)
    url = shared_nats_server.url
    with OpenAIServer() as server:
        server.script(Echo(" ".join(forms)))
        base = server.base_url.replace("http://", f"http://{user}:{quote(password, safe='')}@")
        scenario = greet_sweep(tmp_path, base, 'seeds = "1..1"')
        with workers(tmp_path, url, env={"OPENAI_API_KEY": key}) as (one, two):
            done = sopbus(tmp_path, "sweep", str(scenario), "--bus", url)
            logs: dict[str, str | bytes] = {str(w.log): w.log.read_bytes() for w in (one, two)}
        requests = len(server.requests)
    assert done.returncode == 0, done.stdout + done.stderr
    data = record(sweep_dir(tmp_path / "sweeps"))
    assert [e["state"] for e in data["runs"]] == ["done"] * 2 and requests == 2
    texts = {"stdout": done.stdout, "stderr": done.stderr, **logs}
    stores = [tmp_path / "sweeps", one.runs, two.runs, shared_nats_server.store]
    assert leaks(forms, stores, texts) == {}
    assert not any(b"Traceback" in log for log in logs.values())
