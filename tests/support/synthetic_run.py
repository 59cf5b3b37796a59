"""A run directory made up for the report's tests and bench/report.py, written through the
run store's real writers (:class:`sopbus.bus.RunStore`, the event types, :class:`sopbus.bus.LedgerLine`),
so it has exactly the format a real run has: chained JSON lines, a ledger that sums,
artifacts with their events, a summary.

It can be big (10,000 messages), have undelivered messages, retries, repairs, refusals
and overlapping calls, and carry hostile content (script tags, remote images).
"""

from __future__ import annotations

import random
import struct
import time
import zlib
from decimal import Decimal
from pathlib import Path

from sopbus.bus import LedgerLine, Message, RunStore, RunSummary, Verdict
from sopbus.bus import _events as ev

# Sealed in run_ended and copied into summary.json, as a real run does.
SYNTHETIC_VERDICT = Verdict(passed=False, reason="synthetic runs check nothing")

HOSTILE = (
    '<script>document.title="pwned"</script><img src="http://127.0.0.1:9/leak.png"></script><!-- '
)
HOSTILE_MD = (
    '# Notes\n\n![remote](http://127.0.0.1:9/md.png)\n\n<img src="http://127.0.0.1:9/raw.png">\n\n'
    "<script>document.title='pwned'</script>\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n"
    "```python\nprint('hi')\n```\n"
)


def write_run(
    runs_dir: Path,
    *,
    messages: int = 200,
    roles: int = 6,
    per_round: int = 40,
    seed: int = 0,
    hostile: bool = False,
    content_chars: int = 400,
) -> Path:
    """Writes a run of ``messages`` messages among ``roles`` roles; returns its directory."""
    rng = random.Random(seed)
    names = [f"Role{i}" for i in range(roles)]
    store = RunStore.create(runs_dir, "synthetic")
    budget, total = Decimal("50"), Decimal(0)
    store.log(
        ev.RunStarted(
            run_id=store.run_id,
            scenario="synthetic",
            mode="rounds",
            seed=seed,
            max_rounds=messages // per_round + 2,
            settings={"provider": "sim", "model": "gpt-4o-mini", "budget_usd": str(budget)},
        )
    )
    for i, name in enumerate(names):
        store.log(ev.RoleJoined(round=0, name=name, aliases=(f"Alias{i}",), watch=(f"Act{i - 1}",)))
    t0, seq, undelivered, prompt, completion, sent = time.time(), 0, 0, 0, 0, 0
    for i in range(messages):
        rnd, src = i // per_round, "Boss" if i == 0 else names[i % roles]
        text = (HOSTILE if hostile and i % 7 == 0 else "") + _text(rng, i, content_chars)
        msg = Message(
            cause_by=f"Act{i % roles}",
            sent_from=src,
            content=text,
            payload={"i": i, "ok": i % 3 != 0, "items": [i, i + 1]},
            parents=(f"m{i}",) if i else (),
            id=f"m{i + 1}",
            run_id=store.run_id,
            round=rnd,
        )
        if i % 50 == 49:
            undelivered += 1
            store.log(ev.MessageUndelivered(message=msg, reason=f"nobody watches Act{i % roles}"))
        else:
            to = (
                (names[(i + 1) % roles],)
                if i % 5
                else (names[(i + 1) % roles], names[(i + 2) % roles])
            )
            store.log(ev.MessagePublished(message=msg, recipients=to))
        if i == 0:
            continue
        for attempt, outcome in _attempts(i):
            seq += 1
            sent += outcome != "refused"
            p, c = rng.randint(200, 3000), rng.randint(50, 800) if outcome == "ok" else 0
            cost = (Decimal(p) * Decimal("0.15") + Decimal(c) * Decimal("0.6")) / Decimal(1_000_000)
            cost = cost if outcome == "ok" else Decimal(0)
            total += cost
            prompt, completion = prompt + (p if outcome == "ok" else 0), completion + c
            latency = rng.uniform(200, 2500) if outcome != "refused" else 0.0
            store.record_call(
                LedgerLine(
                    seq=seq,
                    round=rnd,
                    role=names[i % roles],
                    action=f"Act{i % roles}",
                    provider="sim",
                    model="gpt-4o-mini" if i % 4 else "gpt-4o",
                    prompt_tokens=p if outcome == "ok" else 0,
                    completion_tokens=c,
                    cached_tokens=0,
                    cost_usd=cost,
                    total_usd=total,
                    budget_usd=budget,
                    attempt=attempt,
                    outcome=outcome,  # type: ignore[arg-type]
                    latency_ms=latency,
                    t=t0 + rnd * 3.0 + (i % per_round) * 0.05 + latency / 1000,
                )
            )
    _artifacts(store, hostile)
    last = (messages - 1) // per_round
    store.log(ev.RunEnded(round=last, reason="idle", verdict=SYNTHETIC_VERDICT))
    store.write_summary(
        _summary(store, messages, undelivered, sent, prompt, completion, total, budget, last)
    )
    store.close()
    return store.run_dir


def _attempts(i: int) -> list[tuple[int, str]]:
    if i % 97 == 0:
        return [(1, "error"), (2, "ok")]  # a retry
    if i % 89 == 0:
        return [(1, "ok"), (2, "ok")]  # a repair
    if i % 211 == 0:
        return [(1, "refused")]
    return [(1, "ok")]


def _text(rng: random.Random, i: int, chars: int) -> str:
    words = ["wordcount", "design", "budget", "parser", "counts", "lines", "files", "tests"]
    body = " ".join(rng.choice(words) for _ in range(chars // 7))
    return f"## Message {i}\n\n{body}"[:chars]


def _artifacts(store: RunStore, hostile: bool) -> None:
    store.write_artifact(
        "docs/prd.md",
        HOSTILE_MD if hostile else "# PRD\n\n- goal one\n- goal two\n",
        role="Role0",
        round=1,
    )
    store.write_artifact("src/app.py", "def main() -> int:\n    return 0\n", role="Role1", round=2)
    store.write_artifact("img/dot.png", tiny_png(), role="Role2", round=2)


def tiny_png(size: int = 8) -> bytes:
    """A small red PNG square."""
    raw = b"".join(b"\x00" + b"\xff\x00\x00" * size for _ in range(size))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


def _summary(
    store: RunStore,
    messages: int,
    undelivered: int,
    calls: int,
    prompt: int,
    completion: int,
    total: Decimal,
    budget: Decimal,
    rounds: int,
) -> RunSummary:
    return RunSummary(
        run_id=store.run_id,
        status="completed",
        end_reason="idle",
        mode="rounds",
        rounds=rounds,
        max_rounds=rounds + 2,
        messages=messages,
        undelivered=undelivered,
        scenario="synthetic",
        provider="sim",
        model="gpt-4o-mini",
        total_usd=total,
        budget_usd=budget,
        llm_calls=calls,
        prompt_tokens=prompt,
        completion_tokens=completion,
        verdict=SYNTHETIC_VERDICT,
    )
