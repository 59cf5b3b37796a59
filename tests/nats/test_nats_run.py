"""A run over NATS with roles on worker processes (issue 18), as a user runs it: a real
nats-server, `sopbus worker` and `sopbus run --bus` as subprocesses.

The software company with the engineer and QA on two workers gives the same logical log as
the same scenario and seed in one process; its directory verifies, and its costs show the
workers' calls. Without workers the roles run in the coordinator; a server that is not
there is a usage error said before any run directory is made; a worker that is told to
stop (SIGTERM) gives its claims back.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import trio

from sopbus.cli._cmd_diff import first_difference, messages
from support.cli import start
from support.nats_server import NatsServer, free_port, server_env
from support.paths import ROOT

COMPANY = ROOT / "scenarios" / "software_company.toml"
ENGINEER, QA = "Alex", "Edward"


def sopbus(*argv: str, cwd: Path) -> subprocess.Popen[bytes]:
    return start(*argv, cwd=cwd, env=server_env())


def finish(proc: subprocess.Popen[bytes], timeout: float = 90) -> tuple[int, str]:
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, (out + err).decode(errors="replace")


@pytest.fixture
def workers(
    shared_nats_server: NatsServer, tmp_path: Path
) -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    """Starts `sopbus worker` processes for the test; every one is stopped at its end."""
    started: list[subprocess.Popen[bytes]] = []

    def start(*argv: str) -> subprocess.Popen[bytes]:
        proc = sopbus(
            "worker",
            "--bus",
            shared_nats_server.url,
            "--workdir",
            str(tmp_path / f"worker{len(started)}"),
            *argv,
            cwd=tmp_path,
        )
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


def run_dir_of(runs: Path) -> Path:
    (found,) = list(runs.iterdir())
    return found


def company_run(tmp_path: Path, name: str, *bus: str) -> Path:
    runs = tmp_path / name
    code, out = finish(
        sopbus(
            "run",
            str(COMPANY),
            "--quiet",
            "--sandbox",
            "local",
            "--runs-dir",
            str(runs),
            *bus,
            cwd=tmp_path,
        )
    )
    assert code == 0, out
    return run_dir_of(runs)


@pytest.fixture(scope="module")
def in_process(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The software company run in one process: the reference of the runs over NATS."""
    return company_run(tmp_path_factory.mktemp("in-process"), "local")


def test_company_with_engineer_and_qa_on_two_workers_logs_as_in_process(
    shared_nats_server: NatsServer,
    workers: Callable[..., subprocess.Popen[bytes]],
    in_process: Path,
    tmp_path: Path,
) -> None:
    workers("--roles", ENGINEER, "--id", "w-engineer")
    workers("--roles", QA, "--id", "w-qa")
    remote = company_run(
        tmp_path,
        "nats",
        "--bus",
        shared_nats_server.url,
        "--remote",
        f"{ENGINEER},{QA}",
        "--wait-workers",
        "30",
    )
    local = in_process

    over_nats, in_one = messages(remote), messages(local)
    assert len(over_nats) >= 8
    assert first_difference(over_nats, in_one) is None
    summary = json.loads((remote / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["verdict"]["passed"]
    joined = {e["role"] for e in _events(remote, "llm_called")}
    assert {ENGINEER, QA} <= joined

    code, out = finish(sopbus("verify", str(remote), cwd=tmp_path))
    assert code == 0 and "intact" in out, out
    code, out = finish(sopbus("costs", str(remote), "--json", cwd=tmp_path))
    assert code == 0, out
    costs, local_costs = json.loads(out), _costs(tmp_path, local)
    assert costs["by_role"] == local_costs["by_role"]
    by_role = costs["by_role"]
    assert by_role[ENGINEER]["calls"] >= 4 and by_role[QA]["calls"] >= 1, by_role
    # the workers' files are the run's files
    assert _artifacts(remote) == _artifacts(local)
    # one budget: every process's calls went through the run's account on NATS
    state = trio.run(_account_state, shared_nats_server.url, remote.name)
    assert state.spent == Decimal(summary["total_usd"]) and state.held == 0
    assert {"coordinator", "w-engineer", "w-qa"} <= set(state.by_holder)
    assert state.by_holder["w-engineer"] == Decimal(str(by_role[ENGINEER]["cost_usd"]))


def test_a_refusal_on_a_worker_ends_the_run_on_its_budget(
    shared_nats_server: NatsServer, workers: Callable[..., subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    """The engineer's first file does not fit under the run's cap on its worker: the refusal
    travels back as data, the run ends ``budget_exhausted`` (exit 3) in the coordinator,
    and the cap held in the run's account across the processes."""
    workers("--roles", ENGINEER, "--id", "w-poor")
    runs = tmp_path / "runs"
    code, out = finish(
        sopbus(
            "run",
            str(COMPANY),
            "--quiet",
            "--sandbox",
            "local",
            "--runs-dir",
            str(runs),
            "--budget",
            "0.003",
            "--bus",
            shared_nats_server.url,
            "--remote",
            ENGINEER,
            "--wait-workers",
            "30",
            cwd=tmp_path,
        )
    )
    assert code == 3, out
    run_dir = run_dir_of(runs)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert (
        summary["end_reason"] == "budget_exhausted" and "next call needs up to" in summary["detail"]
    )
    refused = [
        e["call"] for e in _events(run_dir, "llm_called") if e["call"]["outcome"] == "refused"
    ]
    assert refused and all(call["role"] == ENGINEER for call in refused)
    state = trio.run(_account_state, shared_nats_server.url, run_dir.name)
    assert state.spent == Decimal(summary["total_usd"]) <= Decimal("0.003")
    assert state.refused >= 1 and state.held == 0


def test_without_workers_every_role_runs_in_the_coordinator(
    shared_nats_server: NatsServer, in_process: Path, tmp_path: Path
) -> None:
    remote = company_run(tmp_path, "nats", "--bus", shared_nats_server.url, "--wait-workers", "0.3")
    assert first_difference(messages(remote), messages(in_process)) is None


def test_a_missing_remote_role_is_said_with_the_command_to_start_its_worker(
    shared_nats_server: NatsServer, tmp_path: Path
) -> None:
    code, out = finish(
        sopbus(
            "run",
            str(COMPANY),
            "--quiet",
            "--runs-dir",
            str(tmp_path / "runs"),
            "--bus",
            shared_nats_server.url,
            "--remote",
            QA,
            "--wait-workers",
            "0.5",
            cwd=tmp_path,
        )
    )
    assert code == 2, out
    assert f"no worker claimed {QA} within 0.5 s" in out and "sopbus worker --bus" in out


def test_no_server_is_a_usage_error_before_any_run_directory(tmp_path: Path) -> None:
    url = f"nats://127.0.0.1:{free_port()}"
    code, out = finish(
        sopbus(
            "run",
            str(COMPANY),
            "--quiet",
            "--runs-dir",
            str(tmp_path / "runs"),
            "--bus",
            url,
            cwd=tmp_path,
        )
    )
    assert code == 2, out
    assert f"cannot reach a NATS server at {url}" in out and "Traceback" not in out
    assert not (tmp_path / "runs").exists()


def test_a_stopped_worker_gives_its_claims_back(
    shared_nats_server: NatsServer, workers: Callable[..., subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    """A worker holding a role of a run waiting for workers releases it on SIGTERM, so
    another worker can claim it at once (not after the lease)."""
    from sopbus.bus.nats import NatsAccount, open_link
    from sopbus.bus.nats._claims import RunBoard, ScenarioPlan, announce, bucket_name
    from sopbus.bus.nats._stream import RunStream

    run_id = f"20261201-000000-claims-{os.getpid():x}"

    async def claims() -> dict[str, Any]:
        async with open_link(shared_nats_server.url) as link:
            board = RunBoard(link, run_id)
            return await board.claims([ENGINEER, QA])

    async def announce_run() -> None:
        async with open_link(shared_nats_server.url) as link:
            await RunStream(link, run_id).create()
            board = RunBoard(link, run_id)
            await board.open()
            await NatsAccount(link, bucket_name(run_id)).open(Decimal("1"))
            await board.put_scenario(
                ScenarioPlan(
                    text=COMPANY.read_text().replace(
                        'fixtures = ["fixtures/software_company.toml"]', ""
                    )
                )
            )
            await announce(link, run_id, "waiting")

    trio.run(announce_run)
    worker = workers("--run", run_id, "--roles", ENGINEER, "--lease", "60", "--id", "w-stop")
    deadline = time.monotonic() + 30
    while ENGINEER not in (found := trio.run(claims)):
        assert worker.poll() is None and time.monotonic() < deadline, finish(worker)[1]
        time.sleep(0.2)
    assert found[ENGINEER].worker == "w-stop" and QA not in found
    worker.send_signal(signal.SIGTERM)
    code, out = finish(worker, timeout=30)
    assert code == 0, out
    assert ENGINEER not in trio.run(claims), out


async def _account_state(url: str, run_id: str) -> Any:
    from sopbus.bus.nats import NatsAccount, open_link
    from sopbus.bus.nats._claims import bucket_name

    async with open_link(url) as link:
        account = NatsAccount(link, bucket_name(run_id))
        await account.open(None)
        return await account.state()


def _events(run_dir: Path, kind: str) -> list[dict[str, Any]]:
    lines = (run_dir / "events.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e.get("kind") == kind]


def _costs(cwd: Path, run_dir: Path) -> Any:
    code, out = finish(sopbus("costs", str(run_dir), "--json", cwd=cwd))
    assert code == 0, out
    return json.loads(out)


def _artifacts(run_dir: Path) -> dict[str, bytes]:
    root = run_dir / "artifacts"
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts and ".pytest_cache" not in p.parts
    }
