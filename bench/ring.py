"""Relay-ring benchmark: the turn cycle of the run loop, with and without the event log.

Workload (issue 20): R roles in a ring, role ``r{i}`` watching ``A{i}`` and publishing
``A{i+1 mod R}``; T tokens, seeded evenly around the ring. A role relays every token it
received in its step, one message per token, and leaves ``parents`` to the run loop (so
each message answers everything its step received, as a role built on :class:`roles.Role`
does). A *turn* is one token passed on: one message published by a role. A stop condition
ends the run once ``--turns`` messages were relayed (a round, or in events mode a step,
that is under way finishes).

For each case the figures are turns per second (best of ``--repeat``), the role steps
that carried them, and with the log the bytes of ``events.jsonl`` per turn. With the log
on the run writes a real ``events.jsonl`` through a :class:`bus.RunStore` (a real run id,
hash-chained lines) and the log is checked with :func:`bus.store.verify_run` afterwards.

``--memory`` runs ``--memory-turns`` turns (default 1M) through ``--memory-roles`` roles
(default 1000) with the log on, in a subprocess, and reports its peak resident memory
(``ru_maxrss``).

    python bench/ring.py                       # the table of the issue, rounds and events, log off/on
    python bench/ring.py --roles 1000 --tokens 1 --mode rounds --json
    python bench/ring.py --memory
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, uninstalled

from bus import Environment, Message, RunStore, Turn, run_team  # noqa: E402
from bus.store import verify_run  # noqa: E402

# (roles, tokens): the ring workloads of the table.
CASES = ((100, 1), (1000, 1), (100, 100), (1000, 1000))


class Relay:
    """Passes every token it receives on to the next role of the ring."""

    __slots__ = ("name", "aliases", "watch", "steps", "_next")

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


def ring_once(roles: int, tokens: int, turns: int, mode: str, log_dir: Path | None,
              verify: bool = True) -> dict[str, Any]:
    """One run of the ring: elapsed seconds, turns, steps and (with a log) its size; with
    ``verify``, the run directory must pass :func:`bus.store.verify_run`."""
    store = RunStore.create(log_dir, "ring") if log_dir is not None else None
    env = Environment(store.run_id if store else "ring", log=store)
    ring = [Relay(i, roles) for i in range(roles)]
    env.add_all(ring)
    relayed = 0

    def enough(published: Sequence[Message], rnd: int) -> str | None:
        nonlocal relayed
        relayed += len(published)
        return "enough turns" if relayed >= turns else None

    t0 = time.perf_counter()
    result = trio.run(lambda: run_team(env, mode=mode, max_rounds=turns + 1, seed=seeds(roles, tokens),
                                       stop=enough, store=store))
    elapsed = time.perf_counter() - t0
    figures: dict[str, Any] = {"elapsed_s": elapsed, "turns": env.published - tokens,
                               "steps": sum(r.steps for r in ring), "end_reason": result.end_reason}
    if store is not None:
        store.close()
        events = store.run_dir / "events.jsonl"
        figures["log_bytes"] = events.stat().st_size
        if verify:
            verdict = verify_run(store.run_dir)
            assert verdict.intact, verdict.problems
    return figures


def measure(roles: int, tokens: int, turns: int, mode: str, log: bool, repeat: int) -> dict[str, Any]:
    best: dict[str, Any] | None = None
    for _ in range(repeat):
        with TemporaryDirectory() as tmp:
            once = ring_once(roles, tokens, turns, mode, Path(tmp) if log else None)
        if best is None or once["elapsed_s"] < best["elapsed_s"]:
            best = once
    assert best is not None
    row = {"roles": roles, "tokens": tokens, "mode": mode, "log": log, "turns": best["turns"],
           "steps": best["steps"],
           "turns_per_s": round(best["turns"] / best["elapsed_s"]), "end_reason": best["end_reason"]}
    if log:
        row["log_bytes"] = best["log_bytes"]
        row["log_bytes_per_turn"] = round(best["log_bytes"] / max(1, best["turns"]), 1)
    return row


def memory_child(roles: int, turns: int, mode: str) -> None:
    """Runs the ring with the log on and prints its figures with the peak RSS (in the child;
    not verified here, since reading the log back would be counted in the peak)."""
    with TemporaryDirectory() as tmp:
        once = ring_once(roles, 1000 if roles >= 1000 else roles, turns, mode, Path(tmp), verify=False)
    once["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    print(json.dumps(once))


def memory(roles: int, turns: int, mode: str) -> dict[str, Any]:
    out = subprocess.run([sys.executable, __file__, "--memory-child", "--memory-roles", str(roles),
                          "--memory-turns", str(turns), "--mode", mode],
                         check=True, capture_output=True, text=True).stdout
    child = json.loads(out)
    return {"roles": roles, "mode": mode, "log": True, "turns": child["turns"],
            "turns_per_s": round(child["turns"] / child["elapsed_s"]),
            "log_bytes_per_turn": round(child["log_bytes"] / max(1, child["turns"]), 1),
            "peak_rss_mib": child["peak_rss_mib"]}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--roles", type=int, help="one ring of this size (default: the issue's cases)")
    p.add_argument("--tokens", type=int, default=1)
    p.add_argument("--turns", type=int, default=20_000)
    p.add_argument("--mode", choices=["rounds", "events", "both"], default="both")
    p.add_argument("--log", choices=["off", "on", "both"], default="both")
    p.add_argument("--repeat", type=int, default=3, help="runs of each case; the best is reported")
    p.add_argument("--memory", action="store_true", help="also measure peak RSS of a long logged run")
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
    rows = []
    for roles, tokens in cases:
        for mode in modes:
            by_log = {log: measure(roles, tokens, a.turns, mode, log, a.repeat) for log in logs}
            for log, row in by_log.items():
                if log and False in by_log:
                    row["logged_ratio"] = round(row["turns_per_s"] / by_log[False]["turns_per_s"], 2)
                rows.append(row)
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
