"""Sweeps as the sweep tests (local and on NATS) run and read them: the CLI in a folder, the sweep directory and its record, a run's ledger, spend and summary, a one-role sweep on a real provider."""

from __future__ import annotations

import json
import subprocess
from decimal import Decimal
from pathlib import Path
from typing import Any

from sopbus.bus import LedgerLine, read_jsonl
from support.cli import sopbus as cli
from support.killed_runs import reservations
from support.paths import ROOT

COMPANY = ROOT / "scenarios" / "software_company.toml"


def sopbus(
    tmp_path: Path, *argv: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return cli(*argv, cwd=tmp_path, env=env, timeout=600)


def sweep_dir(sweeps: Path) -> Path:
    (found,) = [p for p in sweeps.iterdir() if (p / "sweep.json").is_file()]
    return found


def record(sdir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((sdir / "sweep.json").read_text())
    return data


def ledger(run_dir: Path) -> list[LedgerLine]:
    return (
        list(read_jsonl(run_dir / "costs.jsonl", LedgerLine))
        if (run_dir / "costs.jsonl").is_file()
        else []
    )


def spent(run_dir: Path) -> Decimal:
    return sum((line.cost_usd for line in ledger(run_dir)), Decimal(0))


def summary(run_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run_dir / "summary.json").read_text())
    return data


def in_flight(run_dir: Path) -> bool:
    answered = (
        {c["call"] for c in read_jsonl(run_dir / "calls.jsonl", dict)}
        if (run_dir / "calls.jsonl").is_file()
        else set()
    )
    return any(r["data"]["call"] not in answered for r in reservations(run_dir))


def greet_sweep(folder: Path, base_url: str, sweep: str) -> Path:
    """A one-role, one-call scenario on the OpenAI-compatible server at ``base_url``, swept
    over two temperatures with the ``[sweep]`` settings ``sweep`` and a $0.50 budget."""
    scenario = folder / "greet.toml"
    scenario.write_text(f"""
[scenario]
name = "greet"
idea = "say hello"
[[roles]]
name = "Ann"
profile = "Greeter"
watch = ["UserRequirement"]
actions = ["Greet"]
[actions.Greet]
instruction = "Say hello."
[llm]
provider = "openai"
base_url = "{base_url}"
max_tokens = 50
[sweep]
{sweep}
budget_usd = 0.5
[sweep.set]
llm.temperature = [0.0, 1.0]
""")
    return scenario
