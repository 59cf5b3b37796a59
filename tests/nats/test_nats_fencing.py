"""A worker paused past its lease (SIGSTOP: a long GC pause, a laptop lid) is fenced off.

It comes back (SIGCONT) with a turn half done: the answer of the call it had in flight, its
ledger line, maybe its turn's answer. Meanwhile its claim lapsed, another worker took the
role over and the coordinator counted the paused worker's open call ``lost``. Whatever the
paused one delivers late must not count: the run's spend equals its ledger, no call is
answered or paid twice, the log is the uninterrupted run's, and the directory verifies.
"""

from __future__ import annotations

import json
import signal
import subprocess
from collections import Counter
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

import msgspec
import trio
from test_nats_crash import (
    assert_paid_once,
    engineer_with_a_standby,
    events,
    holder,
    in_process,
    ledger,
    wait_for,
)
from test_nats_run import ENGINEER, finish, workers

from sopbus.bus.nats import open_link
from sopbus.bus.nats._subjects import fx_subject
from sopbus.bus.nats._wire import Called, encode, stored_effects
from sopbus.cli._cmd_diff import first_difference, messages
from support.nats_server import NatsServer

__all__ = ["in_process", "workers"]  # fixtures of the modules imported above


def written(run_dir: Path) -> Counter[tuple[str, int, str, str]]:
    """The artifacts and notes the log says were written: a takeover writes none twice."""
    out: Counter[tuple[str, int, str, str]] = Counter()
    for event in events(run_dir):
        if event["kind"] == "artifact_written":
            out[(event["kind"], event["round"], event["role"], event["path"])] += 1
        elif event["kind"] == "code_reviewed":
            out[
                (
                    event["kind"],
                    event["round"],
                    event["role"],
                    json.dumps(event["data"], sort_keys=True),
                )
            ] += 1
    return out


def mid_review(run_dir: Path) -> bool:
    """The engineer's building turn has noted a review (so a takeover cuts a turn that wrote
    something already) and not yet published."""
    seen = events(run_dir)
    return any(
        e["kind"] == "code_reviewed" and e.get("role") == ENGINEER for e in seen
    ) and not any(
        e["kind"] == "message_published" and e["message"].get("sent_from") == ENGINEER for e in seen
    )


def hosted_by(url: str, run_id: str, worker: str) -> bool:
    """The new holder has been asked the turn: the stream has its effects for the role."""

    async def look() -> bool:
        async with open_link(url) as link:
            return any(e.host == worker for e in await stored_effects(link, run_id, ENGINEER))

    return trio.run(look)


def late_delivery(url: str, run_id: str, worker: str) -> None:
    """Publishes what the paused ``worker`` may deliver when it wakes: the ledger line and
    answer of its last call, as its own effect sender does (same subject, envelope, tenure)."""

    async def publish() -> None:
        async with open_link(url) as link:
            mine = [
                e
                for e in await stored_effects(link, run_id, ENGINEER)
                if e.host == worker and isinstance(e.effect, Called)
            ]
            last = mine[-1]
            late = msgspec.structs.replace(last, n=last.n + 1000)
            await link.publish_many(
                [
                    (
                        fx_subject(run_id, ENGINEER),
                        encode(late),
                        {"Nats-Msg-Id": f"{run_id}/late/{worker}"},
                    )
                ]
            )

    trio.run(publish)


def test_a_worker_paused_past_its_lease_cannot_deliver_its_turn_late(
    shared_nats_server: NatsServer,
    workers: Callable[..., subprocess.Popen[bytes]],
    in_process: Path,
    tmp_path: Path,
) -> None:
    hosts, coordinator, run_dir = engineer_with_a_standby(shared_nats_server.url, workers, tmp_path)
    wait_for(lambda: mid_review(run_dir), coordinator)
    paused = holder(shared_nats_server.url, run_dir.name, ENGINEER)
    assert paused in hosts
    other = next(n for n in hosts if n != paused)
    hosts[paused].send_signal(signal.SIGSTOP)
    try:
        # the lease lapses, the other worker takes the role over and is asked the turn
        wait_for(
            lambda: holder(shared_nats_server.url, run_dir.name, ENGINEER) == other, coordinator
        )
        wait_for(lambda: hosted_by(shared_nats_server.url, run_dir.name, other), coordinator)
        # Whether the paused worker delivers its call in flight on waking or first hears that
        # its claim is gone is a race inside it; what it may deliver, it delivers here for sure.
        late_delivery(shared_nats_server.url, run_dir.name, paused)
    finally:
        hosts[paused].send_signal(signal.SIGCONT)
    code, out = finish(coordinator, timeout=120)
    assert code == 0, out

    assert first_difference(messages(run_dir), messages(in_process)) is None
    assert written(run_dir) == written(in_process)
    # the summary's spend is the ledger's sum, and beyond that every call was paid once (a
    # call in flight at the pause, if any, is the engineer's, counted lost)
    spent = Decimal(json.loads((run_dir / "summary.json").read_text())["total_usd"])
    assert spent == sum((Decimal(x["cost_usd"]) for x in ledger(run_dir)), Decimal(0))
    assert_paid_once(run_dir, in_process, tmp_path)
