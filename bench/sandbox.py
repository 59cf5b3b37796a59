"""What one sandboxed run costs to start, bwrap against local (target: bwrap under 50 ms).

Runs ``true`` through :func:`sopbus.bus.run_sandboxed` on each backend, alternately, and prints the
median wall time of the whole call (scratch directory, launcher, namespaces, teardown), of
the process alone (``SandboxResult.duration_s``), and the CPU time the started processes
used (user + system of the reaped children: on a shared, loaded machine wall time mostly
measures the queue for a core, CPU time does not), with bare ``subprocess.run(["true"])``
as the floor measured in the same run, and the ratio bwrap / local.

    python bench/sandbox.py [--runs N] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import trio

from sopbus.bus import SandboxSettings, run_sandboxed
from sopbus.bus.sandbox._bwrap import probe

TARGET_S = 0.050


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


async def one(backend: str, root: Path) -> tuple[float, float, float]:
    settings = SandboxSettings(backend=backend, scratch_root=root)  # type: ignore[arg-type]
    cpu, start = children_cpu(), time.perf_counter()
    result = await run_sandboxed(["true"], sandbox=settings)
    total = time.perf_counter() - start
    assert result.exit_code == 0, result.stderr
    return total, result.duration_s, children_cpu() - cpu


def bare() -> tuple[float, float]:
    cpu, start = children_cpu(), time.perf_counter()
    subprocess.run(["true"], check=True)
    return time.perf_counter() - start, children_cpu() - cpu


async def measure(runs: int) -> dict[str, dict[str, float]]:
    backends = ["local"] + (["bwrap"] if probe().bwrap else [])
    totals: dict[str, list[float]] = {b: [] for b in backends}
    procs: dict[str, list[float]] = {b: [] for b in backends}
    cpus: dict[str, list[float]] = {b: [] for b in [*backends, "bare"]}
    floor: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        for backend in backends:  # warm: probes, imports, page cache
            await one(backend, Path(tmp))
        for _ in range(runs):
            wall, cpu = bare()
            floor.append(wall)
            cpus["bare"].append(cpu)
            for backend in backends:
                total, proc, cpu = await one(backend, Path(tmp))
                totals[backend].append(total)
                procs[backend].append(proc)
                cpus[backend].append(cpu)
    out = {
        b: {
            "call_ms": statistics.median(totals[b]) * 1e3,
            "process_ms": statistics.median(procs[b]) * 1e3,
            "cpu_ms": statistics.median(cpus[b]) * 1e3,
        }
        for b in backends
    }
    out["bare"] = {
        "call_ms": statistics.median(floor) * 1e3,
        "process_ms": 0.0,
        "cpu_ms": statistics.median(cpus["bare"]) * 1e3,
    }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    figures = trio.run(measure, args.runs)
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print(f"one sandboxed run of `true`, median of {args.runs}:")
    for name, f in figures.items():
        print(
            f"  {name:<6} whole call {f['call_ms']:7.1f} ms   process {f['process_ms']:7.1f} ms"
            f"   cpu {f['cpu_ms']:6.1f} ms"
        )
    if "bwrap" not in figures:
        print("bwrap: not available here (install bubblewrap (apt-get install bubblewrap))")
        sys.exit(1)
    bwrap, local = figures["bwrap"]["call_ms"], figures["local"]["call_ms"]
    verdict = "ok" if bwrap < TARGET_S * 1e3 else "TOO SLOW"
    print(
        f"bwrap / local: {bwrap / local:.2f}x wall, "
        f"{figures['bwrap']['cpu_ms'] / figures['local']['cpu_ms']:.2f}x cpu; bwrap adds "
        f"{bwrap - local:+.1f} ms; target bwrap < {TARGET_S * 1e3:.0f} ms wall: {verdict} "
        f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cpus)"
    )


if __name__ == "__main__":
    main()
