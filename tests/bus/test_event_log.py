"""What a run writes to events.jsonl: round records, parents and times written once, no run id
on messages, one write per publish."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sopbus.bus import (
    Environment,
    Message,
    RunStore,
    Turn,
    decode_event,
    read_events,
    read_jsonl,
    run_team,
)
from sopbus.bus._chain import verify_file
from sopbus.bus._events import whole_messages
from support.fakes import Echo

GO = Message(cause_by="Go", sent_from="Boss")


class Fan:
    """Answers all its news with ``n`` messages, leaving ``parents`` to the run loop."""

    def __init__(self, name: str, watch: str, reply: str, n: int):
        self.name, self.aliases, self.watch = name, (), frozenset((watch,))
        self.reply, self.n = reply, n

    async def step(self, news: Sequence[Message], turn: Turn) -> Sequence[Message]:
        return [
            Message(cause_by=self.reply, sent_from=self.name, content=str(i)) for i in range(self.n)
        ]


async def run(
    tmp: Path, members: list[Any], seed: list[Message], **kwargs: Any
) -> list[dict[str, Any]]:
    store = RunStore(tmp, "run")
    env = Environment("run", log=store)
    env.add_all(members)
    await run_team(env, seed=seed, store=store, **kwargs)
    store.close()
    assert verify_file(tmp / "events.jsonl").intact
    return list(read_jsonl(tmp / "events.jsonl", dict))


async def test_a_round_that_only_publishes_is_logged_by_its_round_ended(tmp_path: Path) -> None:
    def note(news: Sequence[Message], turn: Turn) -> None:
        turn.emit("looked", at=news[0].id)

    team = [
        Echo("A", ["Go"], replies=["Ping"]),
        Echo("B", ["Ping"], replies=["Pong"], on_step=note),
    ]
    events = await run(tmp_path, team, [GO], max_rounds=5)
    kinds = [e["kind"] for e in events if e["kind"] not in ("role_joined",)]
    assert kinds == [
        "message_published",
        "message_published",
        "round_ended",
        "round_started",
        "looked",
        "message_undelivered",
        "round_ended",
        "run_ended",
    ]
    ended = [e for e in events if e["kind"] == "round_ended"]
    assert [(e["round"], e["turns"], e["published"]) for e in ended] == [
        (1, ["A"], 1),
        (2, ["B"], 1),
    ]


async def test_a_steps_parents_are_written_once_and_read_back_for_every_message(
    tmp_path: Path,
) -> None:
    seed = [Message(cause_by="Go", sent_from="Boss", content=str(i)) for i in range(3)]
    events = await run(tmp_path, [Fan("F", "Go", "Out", 4)], seed, max_rounds=1)
    raw = [
        e for e in events if e["kind"].startswith("message_") and e["message"]["sent_from"] == "F"
    ]
    assert [e["message"].get("parents") for e in raw] == [["m1", "m2", "m3"], None, None, None]
    assert [e.get("parents_as") for e in raw] == [None, "m4", "m4", "m4"]
    whole = [e for e in read_events(tmp_path / "events.jsonl") if e["kind"].startswith("message_")]
    assert [e["message"]["parents"] for e in whole[3:]] == [["m1", "m2", "m3"]] * 4
    assert all("parents_as" not in e for e in whole)
    assert whole[0]["message"]["send_to"] == [] and whole[0]["message"]["payload"] is None
    typed = decode_event(whole[4])
    assert typed.message.parents == ("m1", "m2", "m3") and typed.message.content == "1"


async def test_a_publish_writes_its_time_once_and_no_message_its_run_id(tmp_path: Path) -> None:
    seed = [Message(cause_by="Go", sent_from="Boss", content=str(i)) for i in range(3)]
    run_dir = tmp_path / "20261201-000000-fan-0a0a"
    events = await run(run_dir, [Fan("F", "Go", "Out", 4)], seed, max_rounds=1)
    raw = [e for e in events if e["kind"].startswith("message_")]
    assert ["t" in e for e in raw] == [True, False, False, True, False, False, False]
    assert not any("run_id" in e["message"] for e in raw)
    whole = [e for e in read_events(run_dir / "events.jsonl") if e["kind"].startswith("message_")]
    assert [e["t"] for e in whole] == [raw[0]["t"]] * 3 + [raw[3]["t"]] * 4
    assert {e["message"]["run_id"] for e in whole} == {run_dir.name}  # a run's directory is its id
    # a log that says which run it is (sopbus run logs run_started first) is read by that
    named = [{"kind": "run_started", "run_id": "the-run", "t": 1.0}, *events]
    assert {
        e["message"]["run_id"]
        for e in whole_messages(named, run_id="elsewhere")
        if e["kind"].startswith("message_")
    } == {"the-run"}


async def test_a_publish_larger_than_a_batch_reads_back_whole(tmp_path: Path) -> None:
    # 2500 replies to three messages: handed to the log in chunks, sealed in batches; each
    # chunk's first line carries the time, every line after the first names its parents
    seed = [Message(cause_by="Go", sent_from="Boss", content=str(i)) for i in range(3)]
    events = await run(tmp_path, [Fan("F", "Go", "Out", 2500)], seed, max_rounds=1)
    raw = [
        e for e in events if e["kind"].startswith("message_") and e["message"]["sent_from"] == "F"
    ]
    timed = [i for i, e in enumerate(raw) if "t" in e]
    assert timed[0] == 0 and len(timed) > 1  # more than one chunk, each with its time
    sealed = [
        line for line in (tmp_path / "events.jsonl").read_bytes().split(b"\n") if b'"_h":' in line
    ]
    assert len(sealed) > 2  # more than one batch for the publish
    whole = [
        e
        for e in read_events(tmp_path / "events.jsonl")
        if e["kind"].startswith("message_") and e["message"]["sent_from"] == "F"
    ]
    assert [e["message"]["content"] for e in whole] == [str(i) for i in range(2500)]
    assert all(e["message"]["parents"] == ["m1", "m2", "m3"] and e["t"] > 0 for e in whole)


async def test_each_publish_is_on_disk_before_the_next_step_starts(tmp_path: Path) -> None:
    on_disk: list[list[str]] = []

    def look(news: Sequence[Message], turn: Turn) -> None:
        on_disk.append(
            [
                e["message"]["id"]
                for e in read_jsonl(tmp_path / "events.jsonl", dict)
                if e["kind"] == "message_published"
            ]
        )

    team = [Echo("A", ["Go"], replies=["Ping"], on_step=look), Echo("B", ["Ping"], on_step=look)]
    await run(tmp_path, team, [GO], mode="events", max_rounds=5)
    assert on_disk == [["m1"], ["m1", "m2"]]  # a killed run would have kept them


def test_roles_with_news_are_found_in_declared_order_without_looking_at_the_others() -> None:
    env = Environment()
    env.add_all(reversed([Echo(f"r{i}", ["Go"] if i % 3 == 0 else ["Other"]) for i in range(30)]))
    env.remove("r9")
    assert env.with_news() == []
    env.publish(GO)
    assert env.with_news() == [f"r{i}" for i in range(27, -1, -3) if i != 9]  # joining order
    env.take("r3")
    assert "r3" not in env.with_news() and env.with_news()[0] == "r27"


async def test_a_round_publishes_in_declared_order_whatever_the_team_size(tmp_path: Path) -> None:
    team = [Echo(f"r{i}", ["Go"], replies=[f"Done{i}"]) for i in range(40)]
    events = await run(tmp_path, list(reversed(team)), [GO], max_rounds=1)
    replies = [
        e["message"]["sent_from"]
        for e in events
        if e["kind"].startswith("message_") and e["message"]["round"] == 1
    ]
    assert replies == [f"r{i}" for i in range(39, -1, -1)]
    [ended] = [e for e in events if e["kind"] == "round_ended"]
    assert ended["turns"] == replies
