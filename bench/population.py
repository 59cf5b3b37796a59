"""Population benchmark: build time and memory per agent, and one simulated round.

``build``: the shipped ``guess_two_thirds`` team built (scenario loaded, population's
columns drawn) at each size, each size in a fresh subprocess so that its peak RSS is its
own; the RSS of the same process before the build is subtracted, so ``bytes_per_agent`` is
what the agents cost, not the interpreter. ``round``: ``sopbus run guess_two_thirds`` for
one game round (``--set sop.rounds=1``: the guesses and the host's result) on the simulator
with its ledger and log written, its seconds, and the bytes the run directory's records
gained per agent-turn (one agent's one call: its reservation and settlement in
``events.jsonl``, its ledger line, its recorded answer).

    python bench/population.py build --sizes 10000 100000 1000000
    python bench/population.py round --count 100000
    python bench/population.py round --count 1000000 --active 0.01
    python bench/population.py rumor --count 100000 [--set sop.seed=Person-1]

``rumor``: ``sopbus run rumor_spread`` with ``--count`` agents on its small-world graph to
its end (no new post, or ``--rounds``): seconds, calls, the adoption curve (agents reached
and adopting after each round) and the records' bytes per agent-turn.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "scenarios" / "guess_two_thirds.toml"
RUMOR = ROOT / "scenarios" / "rumor_spread.toml"


def _rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def build_one(count: int) -> dict[str, Any]:
    """In this process: the team built with ``count`` players."""
    from sopbus.bus import load_scenario
    from sopbus.bus.store import with_settings
    from sopbus.sops import build_team

    scenario = with_settings(
        load_scenario(SCENARIO), (f"populations.Player.count={count}",), at_round=0
    )
    import sopbus.roles.builtin  # noqa: F401  (imports done before the clock starts)

    build_team(load_scenario(SCENARIO))  # warm: the SOP's module, the registry
    before = _rss_kib()
    start = time.perf_counter()
    team = build_team(scenario)
    seconds = time.perf_counter() - start
    after = _rss_kib()
    assert team.populations[0].size == count
    return {
        "count": count,
        "build_s": round(seconds, 3),
        "rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "bytes_per_agent": round((after - before) * 1024 / count, 1),
    }


def build(sizes: list[int]) -> list[dict[str, Any]]:
    rows = []
    for count in sizes:
        out = subprocess.run(
            [sys.executable, __file__, "_build_one", str(count)],
            capture_output=True,
            text=True,
            check=True,
        )
        rows.append(json.loads(out.stdout))
    return rows


def _sopbus_run(scenario: Path, *settings: str) -> tuple[float, dict[str, int], dict[str, Any]]:
    """``sopbus run SCENARIO --set ...`` on the simulator in a scratch folder, with a cap no
    run reaches: its seconds, its records' sizes and its summary."""
    with tempfile.TemporaryDirectory() as tmp:
        argv = [sys.executable, "-m", "sopbus", "run", str(scenario), "--quiet", "--runs-dir",
                tmp, *(x for kv in ("run.budget_usd=100000", *settings) for x in ("--set", kv))]  # fmt: skip
        start = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, text=True, cwd=tmp)
        seconds = time.perf_counter() - start
        if done.returncode != 0:
            raise SystemExit(done.stderr)
        (run_dir,) = [p for p in Path(tmp).iterdir() if p.is_dir()]
        sizes = {p.name: p.stat().st_size for p in run_dir.iterdir() if p.is_file()}
        return seconds, sizes, json.loads((run_dir / "summary.json").read_text())


def _records(sizes: dict[str, int]) -> int:
    return sum(sizes.get(n, 0) for n in ("events.jsonl", "costs.jsonl", "calls.jsonl"))


def one_round(count: int, active: float | None = None) -> dict[str, Any]:
    """``sopbus run`` of one game round with ``count`` players (``active``: the share that
    acts); seconds and bytes."""
    seconds, sizes, summary = _sopbus_run(
        SCENARIO,
        f"populations.Player.count={count}",
        "sop.rounds=1",
        "run.max_rounds=2",
        *([f"populations.Player.active={active}"] if active else []),
    )
    turns = summary["populations"]["Player"][0]["acted"]
    return {
        "count": count,
        "active": active,
        "seconds": round(seconds, 1),
        "run_duration_s": summary["duration_s"],
        "llm_calls": summary["llm_calls"],
        "bytes": sizes,
        "bytes_per_agent_turn": round(_records(sizes) / turns, 1),
        "events_bytes_per_agent_turn": round(sizes.get("events.jsonl", 0) / turns, 1),
        "cpus": os.cpu_count(),
    }


def rumor(count: int, rounds: int, settings: list[str]) -> dict[str, Any]:
    """``sopbus run rumor_spread`` with ``count`` agents to its end: seconds, calls, bytes
    and the adoption curve."""
    seconds, sizes, summary = _sopbus_run(
        RUMOR, f"populations.Person.count={count}", f"run.max_rounds={rounds}", *settings
    )
    curve = summary["populations"]["Person"]
    turns = sum(r["acted"] + r["failed"] for r in curve)
    return {
        "count": count,
        "settings": settings,
        "seconds": round(seconds, 1),
        "run_duration_s": summary["duration_s"],
        "rounds": len(curve),
        "llm_calls": summary["llm_calls"],
        "messages": summary.get("messages"),
        "bytes": sizes,
        "bytes_per_agent_turn": round(_records(sizes) / turns, 1),
        "curve": [(r["round"], r["acted"], r["reached"], r["adopters"]) for r in curve],
        "cpus": os.cpu_count(),
    }


def main() -> None:
    if sys.argv[1:2] == ["_build_one"]:
        print(json.dumps(build_one(int(sys.argv[2]))))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    b = sub.add_parser("build")
    b.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    r = sub.add_parser("round")
    r.add_argument("--count", type=int, default=100_000)
    r.add_argument("--active", type=float, default=None, help="the share that acts")
    m = sub.add_parser("rumor")
    m.add_argument("--count", type=int, default=100_000)
    m.add_argument("--rounds", type=int, default=30, help="max_rounds (default 30)")
    m.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="as run's")
    args = parser.parse_args()
    if args.what == "build":
        result: Any = build(args.sizes)
    elif args.what == "round":
        result = one_round(args.count, args.active)
    else:
        result = rumor(args.count, args.rounds, args.set)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
