"""A shipped population scenario against a real server, at concurrency 1 and at the server's
slots: what the slots buy in wall time.

By default the server is llama.cpp's ``llama-server`` with SmolLM2-135M-Instruct (built by
``.ci/llama-server``), started as the tests start it (tests/support/llama_server.py: one
thread) but with ``--slots`` slots (``-np``) of 2048 tokens each, a fresh server for each
measurement so that no run finds its prompts in the cache another left. With ``--base-url``
(and ``--model``) any OpenAI-compatible endpoint instead (vLLM, a hosted API: the key from
``OPENAI_API_KEY``; then ``--slots`` is only the concurrency to compare with 1).

Each measurement is ``sopbus run SCENARIO --provider openai --base-url ... --model ...
--price 0,0`` with ``--set`` for the population's count and concurrency, the games
(``sop.rounds``; ``run.max_rounds`` for ``rumor_spread``, which runs until no new post), ``max_tokens`` and temperature 0, as a user runs it. Printed per
concurrency: wall seconds, LLM calls, prompt, cached and completion tokens, the agents woken,
acted and failed over all rounds, calls a second, how the run ended; then the speedup (wall
at concurrency 1 over wall at the slots).

    python bench/population_llama.py [--scenario guess_two_thirds] [--count 200]
        [--games 3] [--slots 4] [--max-tokens 32] [--base-url URL --model M] [--json FILE]
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
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from support.llama_server import MODEL, bench_endpoint  # noqa: E402


def population_of(scenario: str) -> str:
    """The name of the shipped scenario's (first) population; exits naming the fix."""
    path = ROOT / "scenarios" / f"{scenario}.toml"
    if not path.is_file():
        sys.exit(f"no shipped scenario {scenario!r} ({path} is missing)")
    doc = tomllib.loads(path.read_text(encoding="utf-8"))
    populations = doc.get("populations", [])
    if not populations:
        sys.exit(f"{path} has no [[populations]]: this bench runs a population scenario")
    return str(populations[0]["name"])


def rounds_key(scenario: str) -> str:
    """Where ``--games`` goes: the SOP's ``rounds`` (a game's rounds), else the run's
    ``max_rounds`` (``rumor_spread`` runs until no new post)."""
    doc = tomllib.loads((ROOT / "scenarios" / f"{scenario}.toml").read_text(encoding="utf-8"))
    return "sop.rounds" if "rounds" in doc.get("sop", {}) else "run.max_rounds"


def measure(args: argparse.Namespace, concurrency: int, work: Path) -> dict[str, Any]:
    """One ``sopbus run`` at ``concurrency``: its figures from ``summary.json``."""
    runs = work / f"runs-{concurrency}"
    name = population_of(args.scenario)
    settings = (
        f"populations.{name}.count={args.count}",
        f"populations.{name}.concurrency={concurrency}",
        f"{rounds_key(args.scenario)}={args.games}",
        f"llm.max_tokens={args.max_tokens}",
        "llm.temperature=0.0",
        "llm.timeout_s=300.0",
    )
    log = work / f"llama-{concurrency}.log"
    with bench_endpoint(args.base_url, args.model, log, slots=args.slots) as (url, model):
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "sopbus", "run", args.scenario, "--provider", "openai",
             "--base-url", url, "--model", model, "--price", "0,0", "--runs-dir", str(runs),
             "--quiet", *(x for s in settings for x in ("--set", s))],
            cwd=work, env={"OPENAI_API_KEY": "local", **os.environ},
            capture_output=True, text=True, timeout=4 * 3600,
        )  # fmt: skip
        wall = time.monotonic() - started
    (run_dir,) = [p for p in runs.iterdir() if p.is_dir()]
    return figures(run_dir, name, wall, done)


def figures(
    run_dir: Path, name: str, wall: float, done: subprocess.CompletedProcess[str]
) -> dict[str, Any]:
    summary = json.loads((run_dir / "summary.json").read_text())
    rounds = summary.get("populations", {}).get(name, [])
    cached = sum(
        json.loads(line).get("cached_tokens", 0)
        for line in (run_dir / "costs.jsonl").read_text().splitlines()
    )
    return {
        "exit_code": done.returncode,
        "ended": f"{summary['status']} ({summary['end_reason']})",
        "verdict": (summary.get("verdict") or {}).get("reason", ""),
        "wall_s": round(wall, 1),
        "calls": summary["llm_calls"],
        "prompt_tokens": summary["prompt_tokens"],
        "cached_tokens": cached,
        "completion_tokens": summary["completion_tokens"],
        "rounds": len(rounds),
        "woke": sum(r["woke"] for r in rounds),
        "acted": sum(r["acted"] for r in rounds),
        "failed": sum(r["failed"] for r in rounds),
        "means": [r.get("mean") for r in rounds],
        "adopters": [r.get("adopters") for r in rounds],
    }


def table(rows: dict[int, dict[str, Any]]) -> str:
    lines = [f"{'concurrency':24}" + "".join(f"{c:>16}" for c in rows)]

    def line(label: str, value: Any) -> None:
        lines.append(f"{label:24}" + "".join(f"{value(r):>16}" for r in rows.values()))

    line("wall seconds", lambda r: f"{r['wall_s']:.1f}")
    line("LLM calls", lambda r: r["calls"])
    line("calls a second", lambda r: f"{r['calls'] / max(r['wall_s'], 1e-9):.2f}")
    line("prompt tokens", lambda r: f"{r['prompt_tokens']:,}")
    line("  of them cached", lambda r: f"{r['cached_tokens']:,}")
    line("completion tokens", lambda r: f"{r['completion_tokens']:,}")
    line("population rounds", lambda r: r["rounds"])
    line("agents woken", lambda r: r["woke"])
    line("acted", lambda r: r["acted"])
    line("failed", lambda r: r["failed"])
    line("exit code", lambda r: r["exit_code"])
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", default="guess_two_thirds")
    parser.add_argument("--count", type=int, default=200, help="agents")
    parser.add_argument(
        "--games", type=int, default=3, help="the SOP's rounds (rumor_spread: max_rounds)"
    )
    parser.add_argument("--slots", type=int, default=4, help="llama-server -np, and the concurrency compared with 1")  # fmt: skip
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--base-url", help="an OpenAI-compatible endpoint instead of llama.cpp")
    parser.add_argument("--model", default=MODEL)
    parser.add_argument("--json", type=Path, help="write the figures to this file")
    args = parser.parse_args()
    if args.count < 1 or args.games < 1 or args.slots < 2:
        parser.error("--count and --games must be 1 or more, --slots 2 or more")
    population_of(args.scenario)  # a wrong scenario fails before a server starts
    # A kill ends the runner through its `finally`s, so the server it started stops too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    rows: dict[int, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="sopbus-population-llama-") as tmp:
        for concurrency in (1, args.slots):
            rows[concurrency] = measure(args, concurrency, Path(tmp))
            print(f"concurrency {concurrency}: {rows[concurrency]}", flush=True)
    print(f"\n{args.scenario}: {args.count} agents x {args.games} games, max_tokens "
          f"{args.max_tokens}, {args.model} with {args.slots} slots")  # fmt: skip
    print(table(rows))
    speedup = rows[1]["wall_s"] / max(rows[args.slots]["wall_s"], 1e-9)
    print(f"speedup at {args.slots} slots: {speedup:.2f}x")
    if args.json:
        result = {"args": {k: str(v) for k, v in vars(args).items()}, "rows": rows}
        args.json.write_text(json.dumps({**result, "speedup": round(speedup, 2)}, indent=2) + "\n")


if __name__ == "__main__":
    main()
