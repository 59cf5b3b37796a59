"""Relay-ring benchmark: the turn cycle of the run loop, with and without the event log.

Workload (issue 20): R roles in a ring, role ``r{i}`` watching ``A{i}`` and publishing
``A{i+1 mod R}``; T tokens, seeded evenly around the ring. A role relays every token it
received in its step, one message per token, and leaves ``parents`` to the run loop (so
each message answers everything its step received, as a role built on :class:`sopbus.roles.Role`
does). A *turn* is one token passed on: one message published by a role. A stop condition
ends the run once ``--turns`` messages were relayed (a round, or in events mode a step,
that is under way finishes).

For each case the figures are turns per second (the median of ``--repeat`` runs, the best,
and by CPU time, which another busy process on the machine disturbs less), the role steps
that carried them, and with the log the bytes of ``events.jsonl`` per turn; logged and
unlogged runs alternate, and ``logged_ratio`` compares their medians. ``--profile`` runs
each case once under cProfile and prints where the time goes. With the log
on the run writes a real ``events.jsonl`` through a :class:`sopbus.bus.RunStore` (a real run id,
hash-chained lines) and the log is checked with :func:`sopbus.bus.store.verify_run` afterwards.

``--memory`` runs ``--memory-turns`` turns (default 1M) through ``--memory-roles`` roles
(default 1000) with the log on, in a subprocess, and reports its peak resident memory
(``ru_maxrss``).

    python bench/ring.py                       # the table of the issue, rounds and events, log off/on
    python bench/ring.py --roles 1000 --tokens 1 --mode rounds --json
    python bench/ring.py --memory
    python bench/ring.py --roles 1000 --mode rounds --log on --profile
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, uninstalled

from sopbus.bus import Environment, Message, RunStore, Turn, run_team
from sopbus.bus.store import verify_run

# (roles, tokens): the ring workloads of the table.
CASES = ((100, 1), (1000, 1), (100, 100), (1000, 1000))


class Relay:
    """Passes every token it receives on to the next role of the ring."""

    __slots__ = ("_next", "aliases", "name", "steps", "watch")

    def __init__(self, i: int, roles: int):
        self.name = f"r{i}"
        self.aliases = ()
        self.watch = frozenset((f"A{i}",))
        self._next = f"A{(i + 1) % roles}"
        self.steps = 0

    async def step(self, news: Sequence[Message], turn: Turn) -> Sequence[Message]:
        self.steps += 1
        out = Message(cause_by=self._next, sent_from=self.name)
        return [out] * len(news)


def seeds(roles: int, tokens: int) -> list[Message]:
    return [Message(cause_by=f"A{j * roles // tokens}", sent_from="Boss") for j in range(tokens)]


def ring_once(
    roles: int, tokens: int, turns: int, mode: str, log_dir: Path | None, verify: bool = True
) -> dict[str, Any]:
    """One run of the ring: elapsed seconds, turns, steps and (with a log) its size; with
    ``verify``, the run directory must pass :func:`sopbus.bus.store.verify_run`."""
    store = RunStore.create(log_dir, "ring") if log_dir is not None else None
    env = Environment(store.run_id if store else "ring", log=store)
    ring = [Relay(i, roles) for i in range(roles)]
    env.add_all(ring)
    relayed = 0

    def enough(published: Sequence[Message], rnd: int) -> str | None:
        nonlocal relayed
        relayed += len(published)
        return "enough turns" if relayed >= turns else None

    t0, c0 = time.perf_counter(), time.process_time()
    result = trio.run(
        lambda: run_team(
            env,
            mode=mode,
            max_rounds=turns + 1,
            seed=seeds(roles, tokens),
            stop=enough,
            store=store,
        )
    )
    if store is not None:
        store.close()  # in the time: the last records are written here
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    figures: dict[str, Any] = {
        "elapsed_s": elapsed,
        "cpu_s": cpu,
        "turns": env.published - tokens,
        "steps": sum(r.steps for r in ring),
        "end_reason": result.end_reason,
    }
    if store is not None:
        events = store.run_dir / "events.jsonl"
        figures["log_bytes"] = events.stat().st_size
        if verify:
            verdict = verify_run(store.run_dir)
            assert verdict.intact, verdict.problems
    return figures


def measure(
    roles: int, tokens: int, turns: int, mode: str, logs: Sequence[bool], repeat: int
) -> list[dict[str, Any]]:
    """One row per entry of ``logs``: the median of ``repeat`` runs (and the best), by wall
    clock and by CPU time. Logged and unlogged runs alternate, so that a busy machine slows
    both alike and ``logged_ratio`` compares runs made under the same load."""
    runs: dict[bool, list[dict[str, Any]]] = {log: [] for log in logs}
    for _ in range(repeat):
        for log in logs:
            with TemporaryDirectory() as tmp:
                runs[log].append(ring_once(roles, tokens, turns, mode, Path(tmp) if log else None))
    rows = []
    for log, done in runs.items():
        wall = statistics.median(r["elapsed_s"] for r in done)
        cpu = statistics.median(r["cpu_s"] for r in done)
        first = done[0]
        row = {
            "roles": roles,
            "tokens": tokens,
            "mode": mode,
            "log": log,
            "turns": first["turns"],
            "steps": first["steps"],
            "turns_per_s": round(first["turns"] / wall),
            "best_turns_per_s": round(first["turns"] / min(r["elapsed_s"] for r in done)),
            "cpu_turns_per_s": round(first["turns"] / cpu),
            "end_reason": first["end_reason"],
        }
        if log:
            row["log_bytes"] = first["log_bytes"]
            row["log_bytes_per_turn"] = round(first["log_bytes"] / max(1, first["turns"]), 1)
            if False in runs:
                plain = rows[0]
                row["logged_ratio"] = round(row["turns_per_s"] / plain["turns_per_s"], 2)
                row["logged_ratio_cpu"] = round(
                    row["cpu_turns_per_s"] / plain["cpu_turns_per_s"], 2
                )
        rows.append(row)
    return rows


def profile(roles: int, tokens: int, turns: int, mode: str, log: bool, top: int = 25) -> None:
    """Runs one case under cProfile and prints the functions that took the most time of
    their own: where a turn's time goes."""
    with TemporaryDirectory() as tmp:
        prof = cProfile.Profile()
        prof.enable()
        figures = ring_once(roles, tokens, turns, mode, Path(tmp) if log else None, verify=False)
        prof.disable()
    print(f"roles={roles} tokens={tokens} mode={mode} log={log}: {figures}")
    pstats.Stats(prof).sort_stats("tottime").print_stats(top)


def memory_child(roles: int, turns: int, mode: str) -> None:
    """Runs the ring with the log on and prints its figures with the peak RSS (in the child;
    not verified here, since reading the log back would be counted in the peak)."""
    with TemporaryDirectory() as tmp:
        once = ring_once(
            roles, 1000 if roles >= 1000 else roles, turns, mode, Path(tmp), verify=False
        )
    once["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    print(json.dumps(once))


def memory(roles: int, turns: int, mode: str) -> dict[str, Any]:
    out = subprocess.run(
        [
            sys.executable,
            __file__,
            "--memory-child",
            "--memory-roles",
            str(roles),
            "--memory-turns",
            str(turns),
            "--mode",
            mode,
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    child = json.loads(out)
    return {
        "roles": roles,
        "mode": mode,
        "log": True,
        "turns": child["turns"],
        "turns_per_s": round(child["turns"] / child["elapsed_s"]),
        "log_bytes_per_turn": round(child["log_bytes"] / max(1, child["turns"]), 1),
        "peak_rss_mib": child["peak_rss_mib"],
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--roles", type=int, help="one ring of this size (default: the issue's cases)")
    p.add_argument("--tokens", type=int, default=1)
    p.add_argument("--turns", type=int, default=20_000)
    p.add_argument("--mode", choices=["rounds", "events", "both"], default="both")
    p.add_argument("--log", choices=["off", "on", "both"], default="both")
    p.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="runs of each case; medians (and the best) are reported",
    )
    p.add_argument(
        "--profile", action="store_true", help="run each case once under cProfile instead"
    )
    p.add_argument(
        "--memory", action="store_true", help="also measure peak RSS of a long logged run"
    )
    p.add_argument("--memory-roles", type=int, default=1000)
    p.add_argument("--memory-turns", type=int, default=1_000_000)
    p.add_argument("--memory-child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    modes = ("rounds", "events") if a.mode == "both" else (a.mode,)
    if a.memory_child:
        memory_child(a.memory_roles, a.memory_turns, modes[0])
        return
    logs = {"off": (False,), "on": (True,), "both": (False, True)}[a.log]
    cases = ((a.roles, a.tokens),) if a.roles else CASES
    for roles, tokens in cases:
        for mode in modes:
            if a.profile:
                for log in logs:
                    profile(roles, tokens, a.turns, mode, log)
                continue
            for row in measure(roles, tokens, a.turns, mode, logs, a.repeat):
                _print(row, a.json)
    if a.memory:
        for mode in modes:
            _print(memory(a.memory_roles, a.memory_turns, mode), a.json)


def _print(row: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(row), flush=True)
    else:
        print("  ".join(f"{k}={v}" for k, v in row.items()), flush=True)


if __name__ == "__main__":
    main()
