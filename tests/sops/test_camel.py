"""CAMEL role-play: the specified task, the three stops, and the role guard."""

from __future__ import annotations

from pathlib import Path

import pytest

from sopbus.bus import Message, Turn
from sopbus.roles.chat._camel import TASK_DONE, check_assistant_turn, check_user_turn
from sopbus.sops import build_team
from support.sop_runs import cli_run, events, ledger, messages, run, scenario

INSTRUCTION = '"""Instruction: Draft the next part of the plan.\nInput: None"""'
SOLUTION = '"""Solution: Here is the next part of the plan.\nNext request."""'


def fixtures(
    user: list[str], assistant: list[str], spec: str = '"Host a rose night on 21 June."'
) -> str:
    return (
        f'[[fixture]]\naction = "SpecifyTask"\nresponses = [{spec}]\n'
        f'[[fixture]]\naction = "GiveInstruction"\nresponses = [{", ".join(user)}]\n'
        f'[[fixture]]\naction = "GiveSolution"\nresponses = [{", ".join(assistant)}]\n'
    )


async def test_shipped_example_stops_at_the_token_with_every_turn_in_the_log(
    tmp_path: Path,
) -> None:
    out = await run(scenario("camel_roleplay", tmp_path))
    assert out.summary.end_reason == "stop_condition"
    assert TASK_DONE in out.summary.detail and "3 exchange(s)" in out.summary.detail
    spec = messages(out, "SpecifyTask")
    assert len(spec) == 1 and spec[0]["content"].startswith("Host a Rose Night on Friday 21 June")
    assert spec[0]["payload"]["task"].startswith("Plan a summer rose night")
    assert spec[0]["payload"]["user_role"] == "Flower Shop Owner"
    said = [
        (m["sent_from"], m["content"].split(":")[0])
        for m in messages(out)
        if m["cause_by"] in ("GiveInstruction", "GiveSolution")
    ]
    assert said == [("AIUser", "Instruction"), ("AIAssistant", "Solution")] * 3 + [
        ("AIUser", TASK_DONE)
    ]
    # the assistant's slip (it instructed) was caught once and repaired
    guard = events(out, "role_guard")
    assert [(g["role"], g["data"]["attempt"]) for g in guard] == [("AIAssistant", 1)]
    assert "instructed instead of solving" in guard[0]["data"]["problem"]
    attempts = [(c["action"], c["attempt"]) for c in ledger(out) if c["action"] == "GiveSolution"]
    assert attempts == [
        ("GiveSolution", 1),
        ("GiveSolution", 1),
        ("GiveSolution", 2),
        ("GiveSolution", 1),
    ]


async def test_turn_limit_is_enforced_whatever_the_models_say(tmp_path: Path) -> None:
    sc = scenario(
        "camel_roleplay",
        tmp_path,
        sop={"turn_limit": 3},
        fixtures=fixtures([INSTRUCTION], [SOLUTION]),
    )  # never says it is done
    out = await run(sc)
    assert out.summary.end_reason == "stop_condition"
    assert out.summary.detail == "turn limit reached: 3 exchanges ([sop].turn_limit = 3)"
    assert len(messages(out, "GiveSolution")) == 3
    assert len(messages(out, "GiveInstruction")) == 3


async def test_an_assistant_that_keeps_instructing_fails_the_run_with_the_reason(
    tmp_path: Path,
) -> None:
    flipped = '"""Instruction: You tell me the budget first.\nInput: None"""'
    sc = scenario(
        "camel_roleplay",
        tmp_path,
        sop={"max_role_repairs": 2},
        fixtures=fixtures([INSTRUCTION], [flipped]),
    )
    out = await run(sc)
    assert out.summary.end_reason == "error" and out.summary.status == "failed"
    assert "role guard: AIAssistant (Marketing Specialist) instructed instead of solving" in str(
        out.summary.error
    )
    assert "max_role_repairs=2" in str(out.summary.error)
    assert [c["attempt"] for c in ledger(out) if c["action"] == "GiveSolution"] == [1, 2, 3]
    assert len(events(out, "role_guard")) == 3
    assert messages(out, "GiveSolution") == []  # nothing out of its part was published


async def test_a_user_that_answers_is_sent_back_then_fails_the_run(tmp_path: Path) -> None:
    answering = '"""Solution: I will just do it myself: posters and a discount."""'
    sc = scenario(
        "camel_roleplay",
        tmp_path,
        sop={"max_role_repairs": 1},
        fixtures=fixtures([answering], [SOLUTION]),
    )
    out = await run(sc)
    assert out.summary.end_reason == "error"
    assert "AIUser (Flower Shop Owner) answered instead of instructing" in str(out.summary.error)
    assert [c["attempt"] for c in ledger(out) if c["action"] == "GiveInstruction"] == [1, 2]
    feedback = events(out, "role_guard")
    assert [g["data"]["action"] for g in feedback] == ["GiveInstruction", "GiveInstruction"]


async def test_a_long_specification_is_sent_back_once_then_cut_at_the_word_limit(
    tmp_path: Path,
) -> None:
    long = '"' + " ".join(f"word{i}" for i in range(30)) + '"'
    sc = scenario(
        "camel_roleplay",
        tmp_path,
        sop={"word_limit": 10, "turn_limit": 1},
        fixtures=fixtures([INSTRUCTION], [SOLUTION], spec=long),
    )
    out = await run(sc)
    spec = messages(out, "SpecifyTask")[0]
    assert spec["content"] == " ".join(f"word{i}" for i in range(10))
    assert [c["attempt"] for c in ledger(out) if c["action"] == "SpecifyTask"] == [1, 2]
    assert events(out, "task_trimmed")[0]["data"] == {"words": 30, "word_limit": 10}
    assert out.summary.end_reason == "stop_condition"


def test_model_settings_specifier_hot_agents_cool(tmp_path: Path) -> None:
    team = build_team(scenario("camel_roleplay", tmp_path))
    turn = Turn(run_id="t", round=1, role="x")
    temps = {r.name: r.context(r.actions[0], (), turn).llm.temperature for r in team.roles}
    assert temps == {"TaskSpecifier": 1.0, "AIUser": 0.2, "AIAssistant": 0.2}


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("Instruction: Plan the posts.\nInput: None", None),
        (f"  {TASK_DONE}", None),
        ("**Instruction:** Plan the posts.", None),
        ("Solution: posts on Monday.", "answered instead of instructing"),
        ("Instruction: plan.\nSolution: done already.", "answered instead of instructing"),
        ("Let us plan the posts.", "does not start with 'Instruction:'"),
    ],
)
def test_user_turn_guard(text: str, problem: str | None) -> None:
    found = check_user_turn(text)
    assert (found is None) if problem is None else (found is not None and problem in found)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("Solution: four posts.\nNext request.", None),
        ("**Solution:** four posts.\n**Next request.**", None),
        ("Instruction: tell me the budget.\nInput: None", "instructed instead of solving"),
        (
            "Solution: first,\nInstruction: you send the photos.\nNext request.",
            "instructed instead of solving",
        ),
        ("Four posts.\nNext request.", "does not start with 'Solution:'"),
        ("Solution: four posts.", "did not end its solution with 'Next request.'"),
    ],
)
def test_assistant_turn_guard(text: str, problem: str | None) -> None:
    found = check_assistant_turn(text)
    assert (found is None) if problem is None else (found is not None and problem in found)


@pytest.mark.slow
def test_sopbus_run_on_the_shipped_scenario(tmp_path: Path) -> None:
    done, summary = cli_run("camel_roleplay", tmp_path / "runs")
    assert done.returncode == 0, done.stderr
    assert summary["end_reason"] == "stop_condition" and TASK_DONE in summary["detail"]


def _said(role: str, cause_by: str, content: str) -> Message:
    return Message(content=content, sent_from=role, cause_by=cause_by, round=1)


def test_the_task_is_done_only_after_a_solution_and_by_the_token_alone() -> None:
    from sopbus.bus import RunRecord
    from sopbus.sops.builtin.camel_roleplay import task_done

    instruct = "Instruction: plan the posts.\nInput: None"
    solve = "Solution: posts on Monday.\nNext request."
    done = RunRecord(
        end_reason="stop_condition",
        messages=(
            _said("AIUser", "GiveInstruction", instruct),
            _said("AIAssistant", "GiveSolution", solve),
            _said("AIUser", "GiveInstruction", TASK_DONE),
        ),
    )
    assert task_done(done).passed and "after 1 solution(s)" in task_done(done).reason
    # Said at once, before any solution (3 of 4 real runs with a tiny model did this).
    early = RunRecord(
        end_reason="stop_condition", messages=(_said("AIUser", "GiveInstruction", TASK_DONE),)
    )
    verdict = task_done(early)
    assert not verdict.passed and "at least 1" in verdict.reason
    # The reply form copied back after an instruction is not the token alone.
    copied = f"{instruct}\n(or only {TASK_DONE})"
    assert check_user_turn(copied) is None  # still an instruction
    echo = RunRecord(
        end_reason="max_rounds",
        messages=(
            _said("AIUser", "GiveInstruction", instruct),
            _said("AIAssistant", "GiveSolution", solve),
            _said("AIUser", "GiveInstruction", copied),
        ),
    )
    assert not task_done(echo).passed
