"""The NATS server restarts in the middle of a run over NATS (same port, same JetStream store).

The coordinator and the worker reconnect; the effects the worker published while the
coordinator was cut off are on the stream and are applied once it is back (they are read
from the stream, not from a subscription), so the engineer's turn ends and the run ends as
the uninterrupted run in one process does, with every call ledgered.
"""

from __future__ import annotations

import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_nats_crash import in_process, ledger, mid_turn, slow_company, wait_for
from test_nats_run import ENGINEER, finish, sopbus

from sopbus.cli._cmd_diff import first_difference, messages
from support.nats_server import NatsServer

__all__ = ["in_process"]  # a fixture of test_nats_crash, used here


@pytest.fixture
def worker(nats_server: NatsServer, tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    proc = sopbus(
        "worker",
        "--bus",
        nats_server.url,
        "--workdir",
        str(tmp_path / "worker"),
        "--roles",
        ENGINEER,
        "--id",
        "w1",
        cwd=tmp_path,
    )
    yield proc
    if proc.poll() is None:
        proc.kill()
    out, err = proc.communicate()
    print((out + err).decode(errors="replace")[-6000:])  # shown when the test failed


def test_a_run_survives_a_server_restart_mid_turn(
    nats_server: NatsServer, worker: subprocess.Popen[bytes], in_process: Path, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    coordinator = sopbus(
        "run",
        str(slow_company(tmp_path)),
        "--quiet",
        "--sandbox",
        "local",
        "--runs-dir",
        str(runs),
        "--bus",
        nats_server.url,
        "--remote",
        ENGINEER,
        "--wait-workers",
        "30",
        cwd=tmp_path,
    )
    run_dir = wait_for(lambda: runs.is_dir() and next(iter(runs.iterdir()), None), coordinator)
    wait_for(lambda: mid_turn(run_dir), coordinator)
    nats_server.kill()
    time.sleep(1.0)  # the worker's calls go on meanwhile; their effects wait in its client
    nats_server.start()
    code, out = finish(coordinator, timeout=120)
    assert code == 0, out
    assert worker.poll() is None  # the worker rode it out too

    assert first_difference(messages(run_dir), messages(in_process)) is None
    answered = Counter(
        (x["round"], x["role"], x["action"]) for x in ledger(run_dir) if x["outcome"] == "ok"
    )
    assert answered == Counter(
        (x["round"], x["role"], x["action"]) for x in ledger(in_process) if x["outcome"] == "ok"
    )
    code, out = finish(sopbus("verify", str(run_dir), cwd=tmp_path))
    assert code == 0 and "intact" in out, out
