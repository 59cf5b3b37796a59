"""Runs killed with SIGKILL at a chosen point and read back: the relay team of tests/data/resume_team, a run started in the background, the kill, and what the run directory holds (its ledger, events, artifacts, spend, reservations)."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

from sopbus.bus import LedgerLine, read_jsonl
from sopbus.bus.llm._tape import CallRecord
from support.cli import start
from support.paths import DATA

TEAM_DIR = DATA / "resume_team"


SCENARIO = """
[scenario]
name = "relay"
sop = "relay_sop:SOP"
idea = "a short guide to brewing green tea"
[run]
max_rounds = {max_rounds}
budget_usd = {budget}
runs_dir = "{runs}"
[llm]
latency_ms = {latency}
max_tokens = 300
"""


def scenario_file(
    tmp_path: Path, name: str, *, latency: int = 0, max_rounds: int = 10, budget: str = "1.0"
) -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(
        SCENARIO.format(runs=tmp_path / name, latency=latency, max_rounds=max_rounds, budget=budget)
    )
    return path


def ledger(run_dir: Path) -> list[LedgerLine]:
    return list(read_jsonl(run_dir / "costs.jsonl", LedgerLine))


def events(run_dir: Path, name: str = "events.jsonl") -> list[dict[str, Any]]:
    return list(read_jsonl(run_dir / name, dict))


def artifacts(run_dir: Path) -> dict[str, bytes]:
    root = run_dir / "artifacts"
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def spent(run_dir: Path) -> Decimal:
    return sum((line.cost_usd for line in ledger(run_dir)), Decimal(0))


def sopbus(*argv: str) -> subprocess.Popen[bytes]:
    return start(*argv, "--quiet", env={"PYTHONPATH": str(TEAM_DIR)}, stdout=subprocess.DEVNULL)


def reservations(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "events.jsonl"
    return (
        [e for e in read_jsonl(path, dict) if e.get("kind") == "llm_reserved"]
        if path.is_file()
        else []
    )


def answered(run_dir: Path) -> int:
    path = run_dir / "calls.jsonl"
    return len(list(read_jsonl(path, CallRecord))) if path.is_file() else 0


def run_and_kill(scenario: Path, runs: Path, when: Callable[[Path], bool]) -> Path:
    """Starts ``sopbus run`` and SIGKILLs it as soon as ``when`` holds for its directory."""
    proc = sopbus("run", str(scenario))
    try:
        run_dir = wait_for(
            lambda: next(iter(runs.iterdir()), None) if runs.is_dir() else None, proc
        )
        wait_for(lambda: when(run_dir) or None, proc)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    return run_dir


def finished(proc: subprocess.Popen[bytes]) -> None:
    _, err = proc.communicate()
    assert proc.returncode == 0, err.decode()


def wait_for(probe: Callable[[], Any], proc: subprocess.Popen[bytes]) -> Any:
    """Polls ``probe`` until it returns something; the run must not end first."""
    deadline = time.monotonic() + 120  # a guard against a hung test, not a timing assertion
    while time.monotonic() < deadline:
        found = probe()
        if found is not None:
            return found
        assert proc.poll() is None, "the run ended before the kill point"
        time.sleep(0.005)
    raise AssertionError("the kill point never came")
