"""The run loop: determinism, events mode, end reasons, and the run store."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
import trio

from sopbus.bus import (
    BudgetExhausted,
    Environment,
    Injection,
    Message,
    RunStore,
    StopRun,
    Turn,
    logical_view,
    read_jsonl,
    run_team,
)
from support.fakes import Echo

IDEA = Message(cause_by="UserRequirement", sent_from="Boss", content="make a game")


def pipeline(delays: Sequence[float]) -> list[Echo]:
    """PM -> Architect -> two engineers in parallel -> QA; every arrow is a watch."""
    return [
        Echo("PM", ["UserRequirement"], replies=["WritePRD"], delay=delays[0]),
        Echo("Architect", ["WritePRD"], replies=["WriteDesign"], delay=delays[1]),
        Echo("Eng1", ["WriteDesign"], replies=["WriteCode"], delay=delays[2]),
        Echo("Eng2", ["WriteDesign"], replies=["WriteCode"], delay=delays[3]),
        Echo("QA", ["WriteCode"], replies=["WriteTest"], delay=delays[4]),
    ]


async def run_pipeline(
    tmp: Path, delays: Sequence[float], mode: str = "rounds"
) -> tuple[object, Path]:
    store = RunStore(tmp, "run")
    env = Environment("run", log=store.log)
    env.add_all(pipeline(delays))
    result = await run_team(env, mode=mode, max_rounds=10, seed=[IDEA], store=store)
    store.close()
    return result, tmp / "events.jsonl"


async def test_rounds_mode_logs_the_same_whatever_order_calls_finish(
    tmp_path: Path, autojump_clock: object
) -> None:
    r1, log1 = await run_pipeline(tmp_path / "a", [1, 2, 3, 0.5, 1])
    _r2, log2 = await run_pipeline(tmp_path / "b", [0.1, 0.2, 0.5, 3, 0.1])
    events1 = list(logical_view(read_jsonl(log1)))
    events2 = list(logical_view(read_jsonl(log2)))
    assert events1 == events2
    assert r1.end_reason == "idle"  # type: ignore[attr-defined]
    published = [e["message"] for e in events1 if e["kind"].startswith("message_")]
    # QA reads both files in one turn; nobody watches its tests, so they are kept as undelivered
    assert [m["cause_by"] for m in published] == [
        "UserRequirement",
        "WritePRD",
        "WriteDesign",
        "WriteCode",
        "WriteCode",
        "WriteTest",
    ]
    assert events1[-3]["kind"] == "message_undelivered"
    assert events1[-3]["reason"] == "no role watches WriteTest"
    # Eng1 and Eng2 publish in declared order, whatever finished first.
    assert [m["sent_from"] for m in published[3:5]] == ["Eng1", "Eng2"]
    # each reply names the message that caused it
    assert published[1]["parents"] == [published[0]["id"]]


async def test_events_mode_delivers_everything(tmp_path: Path, autojump_clock: object) -> None:
    result, log = await run_pipeline(tmp_path, [1, 2, 3, 0.5, 1], mode="events")
    events = list(read_jsonl(log))
    published = [e for e in events if e["kind"].startswith("message_")]
    # Eng1 and Eng2 finish at different times, so QA reacts to each file on its own
    assert sorted(e["message"]["cause_by"] for e in published) == sorted(
        [
            "UserRequirement",
            "WritePRD",
            "WriteDesign",
            "WriteCode",
            "WriteCode",
            "WriteTest",
            "WriteTest",
        ]
    )
    assert result.end_reason == "idle"  # type: ignore[attr-defined]
    # round is the causal depth: QA's tests are four steps from the idea
    assert max(e["message"]["round"] for e in published) == 4


async def test_events_mode_reacts_before_slow_peers_finish(autojump_clock: object) -> None:
    env = Environment()
    fast = Echo("fast", ["Go"], replies=["Done"], delay=1)
    slow = Echo("slow", ["Go"], replies=[], delay=100)
    late = Echo("late", ["Done"])
    env.add_all([fast, slow, late])
    seen_at: list[float] = []
    late.on_step = lambda news, turn: seen_at.append(trio.current_time())
    start = trio.current_time()
    await run_team(env, mode="events", seed=[Message(cause_by="Go", sent_from="Boss")])
    assert seen_at and seen_at[0] - start < 2  # rounds mode would wait for `slow` (100 s)


async def test_a_failing_role_stops_the_run_with_its_traceback(
    tmp_path: Path, autojump_clock: object
) -> None:
    def boom(news: Sequence[Message], turn: Turn) -> None:
        raise ValueError("the model said something we did not expect")

    slow = Echo("Slow", ["Go"], replies=["Never"], delay=50)
    store = RunStore(tmp_path, "run")
    env = Environment("run", log=store.log)
    env.add_all([Echo("Bad", ["Go"], on_step=boom, delay=0), slow])
    result = await run_team(env, seed=[Message(cause_by="Go", sent_from="Boss")], store=store)
    assert result.end_reason == "error"
    assert "Bad" in (result.error or "") and "expect" in (result.error or "")
    assert slow.cancelled
    events = list(read_jsonl(tmp_path / "events.jsonl"))
    ended = events[-1]
    assert ended["kind"] == "run_ended" and ended["reason"] == "error"
    assert "ValueError" in ended["traceback"]
    assert not any(
        e["kind"] == "message_published" and e["message"]["cause_by"] == "Never" for e in events
    )
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["status"] == "failed" and summary["end_reason"] == "error"


async def test_budget_exhaustion_lets_turns_in_flight_finish(autojump_clock: object) -> None:
    def refuse(news: Sequence[Message], turn: Turn) -> None:
        raise BudgetExhausted("next call needs up to $0.0100; $0.0010 left of $1.00")

    env = Environment()
    busy = Echo("Busy", ["Go"], replies=["Finished"], delay=5)
    env.add_all([Echo("Broke", ["Go"], on_step=refuse), busy, Echo("Next", ["Finished"])])
    result = await run_team(env, seed=[Message(cause_by="Go", sent_from="Boss")])
    assert result.end_reason == "budget_exhausted"
    assert "$0.0010 left" in result.detail
    assert not busy.cancelled
    assert result.messages == 2  # the seed and Busy's finished work; no new round started


@pytest.mark.parametrize("mode", ["rounds", "events"])
async def test_stop_run_and_stop_conditions_end_with_stop_condition(mode: str) -> None:
    def stop(news: Sequence[Message], turn: Turn) -> None:
        raise StopRun("<TASK_DONE> seen")

    env = Environment()
    env.add_all([Echo("A", ["Go"], replies=["Go2"]), Echo("B", ["Go2"], on_step=stop)])
    result = await run_team(env, mode=mode, seed=[Message(cause_by="Go", sent_from="Boss")])
    assert (result.end_reason, result.detail) == ("stop_condition", "<TASK_DONE> seen")

    env = Environment()
    env.add_all([Echo("A", ["Ping"], replies=["Pong"]), Echo("B", ["Pong"], replies=["Ping"])])
    result = await run_team(
        env,
        mode=mode,
        max_rounds=50,
        seed=[Message(cause_by="Ping", sent_from="Boss")],
        stop=lambda published, rnd: "three rounds" if rnd >= 3 else None,
    )
    assert result.end_reason == "stop_condition" and result.rounds == 3


@pytest.mark.parametrize("mode", ["rounds", "events"])
async def test_round_limit_ends_a_conversation_that_would_not_stop(mode: str) -> None:
    env = Environment()
    env.add_all([Echo("A", ["Ping"], replies=["Pong"]), Echo("B", ["Pong"], replies=["Ping"])])
    result = await run_team(
        env, mode=mode, max_rounds=7, seed=[Message(cause_by="Ping", sent_from="Boss")]
    )
    assert result.end_reason == "max_rounds"
    assert result.messages == 8  # the seed and one message per round


async def test_injections_arrive_at_their_round_and_idle_waits_for_them() -> None:
    env = Environment()
    a = Echo("A", ["Edit"])
    env.add(a)
    result = await run_team(
        env,
        max_rounds=10,
        injections=[
            Injection(
                round=4, message=Message(cause_by="Edit", sent_from="User", content="shorter")
            )
        ],
    )
    assert [m.round for m in a.seen] == [4]
    assert result.end_reason == "idle"


async def test_a_role_hired_mid_run_gets_messages_from_the_next_delivery() -> None:
    env = Environment()
    hire = Echo("Newbie", ["Pong"])

    def hire_once(news: Sequence[Message], turn: Turn) -> None:
        if "Newbie" not in env:
            env.add(hire)

    env.add_all(
        [
            Echo("A", ["Ping"], replies=["Pong"], on_step=hire_once),
            Echo("B", ["Pong"], replies=["Ping"]),
        ]
    )
    await run_team(env, max_rounds=4, seed=[Message(cause_by="Ping", sent_from="Boss")])
    assert [m.cause_by for m in hire.seen] == ["Pong", "Pong"]
    env.remove("Newbie")
    assert "Newbie" not in env and env.watchers("Pong") == ["B"]


@pytest.mark.parametrize("mode", ["rounds", "events"])
async def test_a_cancelled_run_records_cancelled_and_keeps_its_log(
    tmp_path: Path, mode: str, autojump_clock: object
) -> None:
    store = RunStore(tmp_path, "run")
    env = Environment("run", log=store.log)
    slow = Echo("Slow", ["Go"], replies=["Done"], delay=100)
    env.add_all([Echo("Fast", ["Go"], replies=["Next"]), slow])
    with trio.move_on_after(10):  # as Ctrl-C or a parent's deadline would
        await run_team(env, mode=mode, seed=[Message(cause_by="Go", sent_from="Boss")], store=store)
    store.close()
    assert slow.cancelled
    events = list(read_jsonl(tmp_path / "events.jsonl"))
    assert (events[-1]["kind"], events[-1]["reason"], events[-1]["detail"]) == (
        "run_ended",
        "cancelled",
        "Cancelled",
    )
    assert events[2]["kind"] == "message_published" and events[2]["message"]["cause_by"] == "Go"
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert (summary["status"], summary["end_reason"]) == ("cancelled", "cancelled")
