"""How fast ``sopbus --help`` answers, and what it imports (target: under 0.3 s).

Runs ``python -m sopbus --help`` a few times in fresh processes and prints the median
wall time, then one ``-X importtime`` run: the heavy packages imported (there should be
none) and the slowest imports, so a regression points at its cause.

    python bench/cli_help.py --runs 7
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEAVY = {"trio", "openai", "rich", "pydantic", "loguru", "bpe_openai", "roles", "sops"}
TARGET_S = 0.3


def run_help(*python_flags: str) -> tuple[float, str]:
    env = dict(os.environ)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, *python_flags, "-m", "sopbus", "--help"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return time.perf_counter() - start, done.stderr


def import_costs(stderr: str) -> list[tuple[int, str]]:
    """(cumulative microseconds, module) for each line of ``-X importtime``."""
    rows = []
    for line in stderr.splitlines():
        parts = line.removeprefix("import time:").split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            rows.append((int(parts[1]), parts[2].strip()))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    runs = parser.parse_args().runs
    run_help()  # warm the bytecode caches
    times = [run_help()[0] for _ in range(runs)]
    median = statistics.median(times)
    verdict = "ok" if median < TARGET_S else "TOO SLOW"
    print(
        f"sopbus --help: median {median * 1000:.0f} ms over {runs} runs "
        f"(min {min(times) * 1000:.0f} ms); target {TARGET_S * 1000:.0f} ms: {verdict}"
    )
    costs = import_costs(run_help("-X", "importtime")[1])
    heavy = sorted({m.split(".")[0] for _, m in costs} & HEAVY)
    print(f"heavy packages imported: {', '.join(heavy) or 'none'}")
    print("slowest top-level imports (cumulative):")
    top_level = [(us, m) for us, m in costs if "." not in m]
    for us, module in sorted(top_level, reverse=True)[:8]:
        print(f"  {us / 1000:8.1f} ms  {module}")


if __name__ == "__main__":
    main()
