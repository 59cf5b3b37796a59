"""Group chat: the order each strategy gives, the model selector's retries and fallback,
its calls in the ledger, and the termination conditions."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import msgspec
import pytest

from sopbus.bus import ConfigError, GatewayStats, LLMRequest, Message
from sopbus.roles.chat._group_chat import ChatManager, NextSpeaker, Participant
from sopbus.sops import AllOf, AnyOf, MaxMessages, SpendLimit, TextMention, Timeout, TokenLimit
from support.scripted_gateway import ScriptedGateway, turn
from support.sop_runs import cli_run, events, ledger, messages, run, scenario

SPEECHES = """
[[fixture]]
action = "Speak"
role = "Planner"
responses = ["plan"]
[[fixture]]
action = "Speak"
role = "Writer"
responses = ["draft"]
[[fixture]]
action = "Speak"
role = "Critic"
responses = ["critique"]
"""


def speakers(out: Any) -> list[str]:
    return [m["sent_from"] for m in messages(out, "Speak")]


async def test_round_robin_follows_the_declared_order_without_a_model(tmp_path: Path) -> None:
    sc = scenario(
        "group_chat",
        tmp_path,
        fixtures=SPEECHES,
        sop={"strategy": "round_robin", "termination": {"max_messages": 5}},
    )
    out = await run(sc)
    assert speakers(out) == ["Planner", "Writer", "Critic", "Planner", "Writer"]
    assert out.summary.detail == "5 messages reached the limit of 5"
    assert {c["action"] for c in ledger(out)} == {"Speak"}


async def test_handoff_gives_the_floor_to_the_named_speaker_and_keeps_it_without_one(
    tmp_path: Path,
) -> None:
    fixtures = """
[[fixture]]
action = "Speak"
role = "Planner"
responses = ['{"message": "plan", "handoff": "critic"}']
[[fixture]]
action = "Speak"
role = "Critic"
responses = ['{"message": "c1", "handoff": null}', '{"message": "c2", "handoff": "Writer"}']
[[fixture]]
action = "Speak"
role = "Writer"
responses = ['{"message": "w", "handoff": "Nobody"}']
"""
    sc = scenario(
        "group_chat",
        tmp_path,
        fixtures=fixtures,
        sop={"strategy": "handoff", "allow_repeat": True, "termination": {"max_messages": 5}},
    )
    out = await run(sc)
    # Writer hands off to nobody in the group: the fallback (round robin) speaks next, and
    # the event says why; before, Writer kept the floor silently.
    chosen = speakers(out)
    assert chosen[:4] == ["Planner", "Critic", "Critic", "Writer"] and chosen[4] != "Writer"
    assert [m["content"] for m in messages(out, "Speak")][:4] == ["plan", "c1", "c2", "w"]
    assert messages(out, "Speak")[0]["payload"] == {"message": "plan", "handoff": "critic"}
    (fallback,) = events(out, "speaker_fallback")
    assert "'Nobody', who is not in the group" in fallback["data"]["problem"]


async def test_handoff_keeping_the_floor_where_repeats_are_not_allowed_falls_back(
    tmp_path: Path,
) -> None:
    fixtures = """
[[fixture]]
action = "Speak"
role = "Planner"
responses = ['{"message": "plan", "handoff": null}']
"""
    sc = scenario(
        "group_chat",
        tmp_path,
        fixtures=fixtures,
        sop={
            "strategy": "handoff",
            "allow_repeat": False,
            "termination": {"max_messages": 2},
        },
    )
    out = await run(sc)
    assert speakers(out)[0] == "Planner" and speakers(out)[1] != "Planner"
    (fallback,) = events(out, "speaker_fallback")
    assert "kept the floor, and allow_repeat = false" in fallback["data"]["problem"]


async def test_model_selector_retries_no_name_two_names_and_a_repeat_then_falls_back(
    tmp_path: Path,
) -> None:
    fixtures = (
        SPEECHES
        + """
[[fixture]]
action = "SelectSpeaker"
responses = ["I am not sure yet.", "Writer, or maybe Critic.", "Planner again.", "Critic"]
"""
    )
    sc = scenario(
        "group_chat",
        tmp_path,
        fixtures=fixtures,
        sop={
            "strategy": "model",
            "allow_repeat": False,
            "max_attempts": 3,
            "fallback": "round_robin",
            "termination": {"max_messages": 3},
        },
    )
    out = await run(sc)
    assert speakers(out) == ["Planner", "Writer", "Critic"]
    rejected = [e["data"]["problem"] for e in events(out, "speaker_rejected")]
    assert rejected == [
        "named none of the participants",
        "named several participants (Writer, Critic)",
        "chose Planner, who has just spoken; nobody speaks twice in a row",
    ]
    fallback = events(out, "speaker_fallback")
    assert [f["data"]["speaker"] for f in fallback] == ["Writer"]
    picks = [m["payload"] for m in messages(out, "NextSpeaker")]
    assert [(p["speaker"], p["attempts"], p["fallback"]) for p in picks] == [
        ("Planner", 0, False),
        ("Writer", 3, True),
        ("Critic", 1, False),
    ]
    selector = [c for c in ledger(out) if c["action"] == "SelectSpeaker"]
    assert [(c["role"], c["attempt"]) for c in selector] == [
        ("ChatManager", a) for a in (1, 2, 3, 1)
    ]
    assert all(Decimal(str(c["cost_usd"])) > 0 for c in selector)  # priced like any call


def manager(strategy: str = "model", **kw: Any) -> ChatManager:
    group = [Participant("Ann", "plans"), Participant("Bob", "writes"), Participant("Cy", "checks")]
    return ChatManager(
        group=group,
        strategy=strategy,  # type: ignore[arg-type]
        actions=[NextSpeaker(max_attempts=kw.pop("max_attempts", 3))],
        llm_defaults={"model": "m"},
        **kw,
    )


SPOKE = Message(cause_by="Speak", sent_from="Ann", content="my plan", id="m2")


async def test_selector_feedback_names_the_problem_and_the_candidates() -> None:
    gw = ScriptedGateway(["Ann", "Bob"])
    chat = manager(allow_repeat=False)
    chat.last_speaker = "Ann"
    out = await chat.step([SPOKE], turn(gw, role="ChatManager"))
    assert out[0].send_to == ("Bob",) and out[0].payload["attempts"] == 2
    retry: LLMRequest = gw.calls[1].request
    assert (
        "Ann has just spoken and may not speak twice in a row"
        in gw.calls[0].request.messages[-1].content
    )
    assert retry.messages[-2].content == "Ann"
    assert retry.messages[-1].content == (
        "Your answer chose Ann, who has just spoken; nobody speaks "
        "twice in a row. Answer with exactly one name from: Bob, Cy."
    )
    assert [c.attempt for c in gw.calls] == [1, 2]
    assert "- Cy: checks" in gw.calls[0].request.messages[0].content


async def test_fallback_to_a_declared_participant_after_max_attempts() -> None:
    gw = ScriptedGateway(["nobody", "nobody"])
    out = await manager(fallback="Cy", max_attempts=2).step([SPOKE], turn(gw, role="ChatManager"))
    assert out[0].send_to == ("Cy",)
    assert (
        out[0].payload["fallback"] is True
        and out[0].payload["why"] == "named none of the participants"
    )
    assert len(gw.calls) == 2


async def test_model_strategy_without_a_first_speaker_asks_the_model_first() -> None:
    gw = ScriptedGateway(["cy"])
    task = Message(cause_by="UserRequirement", sent_from="Boss", content="a task", id="m1")
    out = await manager().step([task], turn(gw, role="ChatManager"))
    assert out[0].send_to == ("Cy",)  # names match in any case, the declared spelling is used


def test_termination_conditions_count_match_and_combine() -> None:
    speak = Message(cause_by="Speak", sent_from="Ann", content="done: TERMINATE")
    other = Message(cause_by="NextSpeaker", sent_from="ChatManager", content="TERMINATE")
    count = MaxMessages(2, actions=("Speak",))
    assert count([other, other], 1) is None and count([speak], 2) is None
    assert count([speak], 3) == "2 messages reached the limit of 2"
    mention = TextMention("TERMINATE", actions=("Speak",))
    assert mention([other], 1) is None and mention([speak], 1) == "Ann said 'TERMINATE'"
    now = [0.0]
    timeout = Timeout(10, clock=lambda: now[0])
    both = AllOf([MaxMessages(1), timeout])
    assert both([speak], 1) is None  # the count fired; it stays fired
    now[0] = 11.0
    assert both([], 2) == "1 messages reached the limit of 1; 11.0 s passed, timeout 10 s"
    either = AnyOf([TextMention("bye"), Timeout(5, clock=lambda: now[0])])
    assert either([speak], 1) is None


def test_token_and_spend_limits_read_the_bound_stats() -> None:
    totals = [GatewayStats(prompt_tokens=50, completion_tokens=40, total_usd=Decimal("0.01"))]
    tokens, spend = TokenLimit(100), SpendLimit(Decimal("0.02"))
    stop = AnyOf([tokens, spend])
    assert stop([], 1) is None  # unbound: cannot fire (and says so in the log)
    stop.bind_stats(lambda: totals[0])
    assert stop([], 2) is None
    totals[0] = msgspec.structs.replace(totals[0], completion_tokens=60)
    assert stop([], 3) == "110 tokens used, limit 100"
    totals[0] = msgspec.structs.replace(totals[0], prompt_tokens=0, total_usd=Decimal("0.02"))
    assert stop([], 4) == "$0.02 spent, limit $0.02"


@pytest.mark.parametrize(
    ("limit", "fired"),
    [
        ({"max_tokens": 1}, "tokens used, limit 1"),
        ({"max_usd": 0.000001}, "spent, limit $0.000001"),
    ],
)
async def test_a_run_binds_its_totals_so_token_and_spend_limits_stop_it(
    tmp_path: Path, limit: dict[str, Any], fired: str
) -> None:
    sc = scenario(
        "group_chat",
        tmp_path,
        fixtures=SPEECHES,
        sop={"strategy": "round_robin", "termination": {"max_messages": 50, **limit}},
    )
    out = await run(sc)
    assert out.summary.end_reason == "stop_condition"
    assert fired in out.summary.detail
    assert speakers(out) == ["Planner"]  # the first priced call already crossed the limit


@pytest.mark.parametrize(
    ("sop", "message"),
    [
        ({"participants": [{"name": "Solo"}]}, "at least two"),
        ({"fallback": "Zed"}, "fallback 'Zed' is neither"),
        ({"first_speaker": "Zed"}, "first_speaker 'Zed' is not a participant"),
        ({"participants": [{"name": "Ann"}, {"name": "ann"}]}, "repeated"),
        ({"termination": {"mode": "any"}}, "names no condition"),
        ({"termination": {"max_messages": 0}}, "MaxMessages limit must be 1 or more"),
        (
            {"strategy": "random"},
            "$.sop.strategy`; choose one of 'round_robin', 'model', 'handoff'",
        ),
        ({"termination": {"mode": "some"}}, "$.sop.termination.mode`; choose one of 'any', 'all'"),
    ],
)
def test_option_mistakes_are_config_errors(
    tmp_path: Path, sop: dict[str, Any], message: str
) -> None:
    from sopbus.sops import build_team

    with pytest.raises(ConfigError, match=None) as info:
        build_team(scenario("group_chat", tmp_path, sop=sop))
    assert message in str(info.value)


@pytest.mark.slow
def test_sopbus_run_on_the_shipped_scenario(tmp_path: Path) -> None:
    done, summary = cli_run("group_chat", tmp_path / "runs")
    assert done.returncode == 0, done.stderr
    assert (
        summary["end_reason"] == "stop_condition" and summary["detail"] == "Writer said 'TERMINATE'"
    )
