"""Crashes of a run over NATS (issue 18): kill -9 of the worker hosting the engineer in the
middle of its turn, and kill -9 of the coordinator.

The software company runs on the simulator with 300 ms of latency per call, so a turn of
the engineer (files written side by side, each reviewed, then summarised) lasts about a
second and can be cut in the middle. The run must end as the uninterrupted run in one
process ends: the same messages (nothing lost, nothing delivered twice to a step), every
call answered once (answers recorded before the kill are given again, not asked or paid
again; calls in flight at the kill are counted ``lost`` and asked again), and a directory
that verifies.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import trio
from test_nats_run import ENGINEER, finish, run_dir_of, sopbus, workers

from sopbus.cli._cmd_diff import first_difference, messages
from support.nats_server import NatsServer
from support.paths import ROOT

__all__ = ["workers"]  # a fixture of test_nats_run, used here

COMPANY = ROOT / "scenarios" / "software_company.toml"
FIXTURES = ROOT / "scenarios" / "fixtures" / "software_company.toml"


def slow_company(tmp_path: Path) -> Path:
    text = COMPANY.read_text().replace(
        'fixtures = ["fixtures/software_company.toml"]',
        f'fixtures = ["{FIXTURES}"]\nlatency_ms = 300',
    )
    text = text.replace("[scenario]\n", "[scenario]\nallow_outside = true\n", 1)
    path = tmp_path / "slow_company.toml"
    path.write_text(text)
    return path


def events(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "events.jsonl"
    if not path.is_file():
        return []
    lines = path.read_text().splitlines()
    out = []
    for line in lines:
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            break  # a line being written
    return out


def ledger(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "costs.jsonl").read_text().splitlines()]


def wait_for(what: Callable[[], Any], proc: subprocess.Popen[bytes], timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = what()
        if found:
            return found
        assert proc.poll() is None, finish(proc)[1]
        time.sleep(0.03)
    raise AssertionError(f"timed out waiting for {what}")


def mid_turn(run_dir: Path) -> bool:
    """The engineer has had an answer in its building turn and not yet published."""
    seen = events(run_dir)
    called = any(e.get("kind") == "llm_called" and e.get("role") == ENGINEER for e in seen)
    published = any(
        e.get("kind") == "message_published" and e["message"].get("sent_from") == ENGINEER
        for e in seen
    )
    return called and not published


def holder(url: str, run_id: str, role: str) -> str | None:
    async def claims() -> str | None:
        from sopbus.bus.nats import open_link
        from sopbus.bus.nats._claims import RunBoard

        async with open_link(url) as link:
            found = (await RunBoard(link, run_id).claims([role])).get(role)
            return found.worker if found else None

    return trio.run(claims)


def engineer_with_a_standby(
    url: str, workers: Callable[..., subprocess.Popen[bytes]], tmp_path: Path
) -> tuple[dict[str, subprocess.Popen[bytes]], subprocess.Popen[bytes], Path]:
    """The slow company with the engineer on one of two workers that may host it (1.5 s
    leases): the workers by name, the coordinator, and the run directory once it exists."""
    scenario = slow_company(tmp_path)
    hosts = {
        name: workers("--roles", ENGINEER, "--lease", "1.5", "--id", name) for name in ("w1", "w2")
    }
    runs = tmp_path / "nats"
    coordinator = sopbus(
        "run",
        str(scenario),
        "--quiet",
        "--sandbox",
        "local",
        "--runs-dir",
        str(runs),
        "--bus",
        url,
        "--remote",
        ENGINEER,
        "--wait-workers",
        "30",
        cwd=tmp_path,
    )
    run_dir = wait_for(lambda: runs.is_dir() and next(iter(runs.iterdir()), None), coordinator)
    return hosts, coordinator, run_dir


def assert_paid_once(run_dir: Path, local: Path, tmp_path: Path) -> None:
    """Every call of the run answered once, as in process: the recorded answers were given
    again, not asked again; what it spent beyond the in-process run is exactly the engineer's
    calls counted ``lost``; no answer recorded twice; and ``sopbus verify`` finds it intact."""
    lines, local_lines = ledger(run_dir), ledger(local)
    answered = Counter((x["round"], x["role"], x["action"]) for x in lines if x["outcome"] == "ok")
    assert answered == Counter(
        (x["round"], x["role"], x["action"]) for x in local_lines if x["outcome"] == "ok"
    )
    lost = [x for x in lines if x["outcome"] == "lost"]
    assert all(x["role"] == ENGINEER for x in lost)
    spent = Decimal(json.loads((run_dir / "summary.json").read_text())["total_usd"])
    local_spent = Decimal(json.loads((local / "summary.json").read_text())["total_usd"])
    assert spent == local_spent + sum((Decimal(x["cost_usd"]) for x in lost), Decimal(0))
    keys = Counter(
        (c["round"], c["role"], c["key"])
        for c in map(json.loads, (run_dir / "calls.jsonl").read_text().splitlines())
    )
    assert max(keys.values()) == 1
    code, out = finish(sopbus("verify", str(run_dir), cwd=tmp_path))
    assert code == 0 and "intact" in out, out


@pytest.fixture(scope="module")
def in_process(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The slow company run in one process, uninterrupted: the reference."""
    folder = tmp_path_factory.mktemp("in-process")
    runs = folder / "local"
    code, out = finish(
        sopbus(
            "run",
            str(slow_company(folder)),
            "--quiet",
            "--sandbox",
            "local",
            "--runs-dir",
            str(runs),
            cwd=folder,
        )
    )
    assert code == 0, out
    return run_dir_of(runs)


def test_a_worker_killed_mid_turn_is_replaced_and_nothing_is_lost_or_paid_twice(
    shared_nats_server: NatsServer,
    workers: Callable[..., subprocess.Popen[bytes]],
    in_process: Path,
    tmp_path: Path,
) -> None:
    hosts, coordinator, run_dir = engineer_with_a_standby(shared_nats_server.url, workers, tmp_path)
    wait_for(lambda: mid_turn(run_dir), coordinator)
    killed = holder(shared_nats_server.url, run_dir.name, ENGINEER)
    assert killed in hosts
    hosts[killed].send_signal(signal.SIGKILL)
    code, out = finish(coordinator, timeout=120)
    assert code == 0, out
    local = in_process
    assert first_difference(messages(run_dir), messages(local)) is None
    survivor = next(n for n in hosts if n != killed)
    assert holder(shared_nats_server.url, run_dir.name, ENGINEER) in (None, survivor)

    # every call answered once: the recorded answers were given again, not asked again
    assert_paid_once(run_dir, local, tmp_path)


def test_a_killed_coordinator_resumes_over_nats_with_its_workers(
    shared_nats_server: NatsServer,
    workers: Callable[..., subprocess.Popen[bytes]],
    in_process: Path,
    tmp_path: Path,
) -> None:
    """kill -9 of `sopbus run --bus` while the engineer's turn runs on its worker; `sopbus
    resume RUN --bus URL` runs the run again from its recording and the stream: the worker
    starts the role afresh and takes every answer it already had from the stream, answers
    the worker got while the coordinator was down are ledgered, and the run ends as the
    uninterrupted one."""
    scenario = slow_company(tmp_path)
    workers("--roles", ENGINEER, "--id", "w-engineer")
    runs = tmp_path / "nats"
    bus = ("--bus", shared_nats_server.url, "--remote", ENGINEER, "--wait-workers", "30")
    coordinator = sopbus(
        "run",
        str(scenario),
        "--quiet",
        "--sandbox",
        "local",
        "--runs-dir",
        str(runs),
        *bus,
        cwd=tmp_path,
    )
    run_dir = wait_for(lambda: runs.is_dir() and next(iter(runs.iterdir()), None), coordinator)
    wait_for(lambda: mid_turn(run_dir), coordinator)
    coordinator.send_signal(signal.SIGKILL)
    coordinator.communicate()
    assert not (run_dir / "summary.json").exists()

    code, out = finish(
        sopbus("resume", run_dir.name, "--runs-dir", str(runs), "--quiet", *bus, cwd=tmp_path),
        timeout=120,
    )
    assert code == 0, out
    local = in_process
    assert first_difference(messages(run_dir), messages(local)) is None
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["resumes"] == 1

    lines, local_lines = ledger(run_dir), ledger(local)
    ok = Counter((x["round"], x["role"], x["action"]) for x in lines if x["outcome"] == "ok")
    lost = Counter((x["round"], x["role"], x["action"]) for x in lines if x["outcome"] == "lost")
    wanted = Counter(
        (x["round"], x["role"], x["action"]) for x in local_lines if x["outcome"] == "ok"
    )
    assert ok <= wanted and wanted <= ok + lost, (ok, lost, wanted)
    assert (
        sum(ok.values()) > 0
        and ok[(4, ENGINEER, "WriteCode")] + lost[(4, ENGINEER, "WriteCode")] >= 4
    )
    code, out = finish(sopbus("verify", str(run_dir), cwd=tmp_path))
    assert code == 0 and "intact" in out, out


def test_answers_on_the_stream_when_the_coordinator_died_are_taken_in_and_replay(
    shared_nats_server: NatsServer,
    workers: Callable[..., subprocess.Popen[bytes]],
    in_process: Path,
    tmp_path: Path,
) -> None:
    """The coordinator is killed (a stepped fault point, every time at the same place) as it
    reads the engineer's first WriteCode answer from the stream: reserved in its log, not yet
    in its ledger or calls.jsonl. The resume takes that answer in from the stream instead of
    counting the call lost, so the run's recording is whole and `sopbus replay` runs it."""
    from sopbus.bus._util._faults import VARIABLE
    from support.cli import start
    from support.nats_server import server_env

    scenario = slow_company(tmp_path)
    workers("--roles", ENGINEER, "--id", "w-engineer")
    runs = tmp_path / "nats"
    bus = ("--bus", shared_nats_server.url, "--remote", ENGINEER, "--wait-workers", "30")
    argv = ("--quiet", "--runs-dir", str(runs), *bus)
    coordinator = start(
        "run",
        scenario,
        "--sandbox",
        "local",
        *argv,
        cwd=tmp_path,
        env={**server_env(), VARIABLE: "nats:answer-read"},
    )
    code, out = finish(coordinator, timeout=120)
    assert code == -signal.SIGKILL, out
    run_dir = run_dir_of(runs)
    reserved = [e for e in events(run_dir) if e.get("kind") == "llm_reserved"]
    assert reserved and reserved[-1]["role"] == ENGINEER  # the kill came with its call open
    assert not any(e.get("role") == ENGINEER for e in ledger(run_dir))

    code, out = finish(sopbus("resume", run_dir.name, *argv, cwd=tmp_path), timeout=120)
    assert code == 0, out

    assert first_difference(messages(run_dir), messages(in_process)) is None
    lines = ledger(run_dir)
    assert not [x for x in lines if x["outcome"] == "lost"]  # its answer was found, not lost
    assert_paid_once(run_dir, in_process, tmp_path)
    calls = [json.loads(line) for line in (run_dir / "calls.jsonl").read_text().splitlines()]
    assert reserved[-1]["data"]["call"] in {c["call"] for c in calls}
    code, out = finish(
        sopbus("replay", str(run_dir), "--into", str(tmp_path / "replay"), "--quiet", cwd=tmp_path)
    )
    assert code == 0, out
    assert first_difference(messages(run_dir_of(tmp_path / "replay")), messages(run_dir)) is None
