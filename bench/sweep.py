"""How much a sweep's --jobs buys: 40 simulator runs of the software company, ``--jobs``
equal to the cores against the same 40 runs one after another (``--jobs 1``), in one go.

Both are real ``sopbus sweep`` processes (the matrix: ``sop.review`` true and false x 20
seeds), timed from start to exit, in alternating order over ``--repeat`` rounds; the best of
each is reported, with the ratio. ``--cli-loop`` adds what a user without sweeps would do:
the 40 runs as 40 ``sopbus run`` processes one after another (each pays the interpreter's
start-up and imports, which the sweep's worker processes pay once).

Also printed: the spend of each sweep (the same runs, so the same money), and how far the
machine's load was from idle (other processes compete for the cores on a shared machine).

    python bench/sweep.py [--runs 40] [--jobs N] [--repeat 1] [--cli-loop] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMPANY = ROOT / "scenarios" / "software_company.toml"


def sweep(tmp: Path, runs: int, jobs: int, tag: str) -> dict[str, float | str]:
    started = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "sopbus",
            "sweep",
            str(COMPANY),
            "--seeds",
            str(runs // 2),
            "--set",
            "sop.review=true,false",
            "--jobs",
            str(jobs),
            "--runs-dir",
            str(tmp / f"runs-{tag}"),
            "--sweeps-dir",
            str(tmp / f"sweeps-{tag}"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"sweep --jobs {jobs} failed ({done.returncode}):\n{done.stderr}")
    shown = subprocess.run(
        [
            sys.executable,
            "-m",
            "sopbus",
            "sweeps",
            "--json",
            "--sweeps-dir",
            str(tmp / f"sweeps-{tag}"),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    (row,) = json.loads(shown.stdout)
    return {"wall_s": round(wall, 3), "spent_usd": row["spent_usd"], "runs": row["ended"]}


def cli_loop(tmp: Path, runs: int) -> float:
    started = time.perf_counter()
    for i in range(runs):
        review = "true" if i % 2 == 0 else "false"
        scenario = tmp / f"company-{review}.toml"
        if not scenario.exists():
            text = COMPANY.read_text().replace("review = true", f"review = {review}")
            scenario.write_text(text.replace('"fixtures/', f'"{COMPANY.parent}/fixtures/'))
        subprocess.run(
            [
                sys.executable,
                "-m",
                "sopbus",
                "run",
                str(scenario),
                "--seed",
                str(i // 2),
                "--quiet",
                "--runs-dir",
                str(tmp / "runs-cli"),
            ],
            cwd=ROOT,
            capture_output=True,
            check=True,
        )
    return round(time.perf_counter() - started, 3)


def main(runs: int, jobs: int, repeat: int, loop: bool) -> dict[str, object]:
    best: dict[str, dict[str, float | str]] = {}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        for r in range(repeat):
            order = [("sequential", 1), ("parallel", jobs)]
            for name, j in order if r % 2 == 0 else order[::-1]:
                figures = sweep(tmp, runs, j, f"{name}{r}")
                if name not in best or figures["wall_s"] < best[name]["wall_s"]:  # type: ignore[operator]
                    best[name] = figures
        result: dict[str, object] = {
            "runs": runs,
            "cores": os.cpu_count(),
            "jobs": jobs,
            "load_average_1m": round(os.getloadavg()[0], 2),
            **best,
            "speedup": round(
                float(best["sequential"]["wall_s"]) / float(best["parallel"]["wall_s"]), 2
            ),
        }
        if loop:
            result["cli_loop_wall_s"] = cli_loop(tmp, runs)
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40, help="runs in the matrix (even)")
    parser.add_argument(
        "--jobs", type=int, default=os.cpu_count() or 1, help="jobs of the parallel sweep"
    )
    parser.add_argument(
        "--repeat", type=int, default=1, help="measurements of each; the best is kept"
    )
    parser.add_argument(
        "--cli-loop", action="store_true", help="also time 40 `sopbus run` one by one"
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    figures = main(args.runs, args.jobs, args.repeat, args.cli_loop)
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        seq, par = figures["sequential"], figures["parallel"]
        assert isinstance(seq, dict) and isinstance(par, dict)
        print(
            f"{figures['runs']} simulator runs of the software company on {figures['cores']} cores "
            f"(load average {figures['load_average_1m']}):"
        )
        print(f"  one after another (--jobs 1): {seq['wall_s']:7.2f} s   spent ${seq['spent_usd']}")
        print(
            f"  --jobs {figures['jobs']}:{'':22}{par['wall_s']:7.2f} s   spent ${par['spent_usd']}"
        )
        print(f"  speed-up: {figures['speedup']}x")
        if "cli_loop_wall_s" in figures:
            print(
                f"  {figures['runs']} x `sopbus run` one by one: {figures['cli_loop_wall_s']:7.2f} s"
            )
