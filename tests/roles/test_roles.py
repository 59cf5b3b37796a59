"""Roles: the Member protocol, memory, the three reaction modes, the registry."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from sopbus import bus
from sopbus.bus import ConfigError, LLMRequest, Message, ModelOutputError
from sopbus.roles import (
    DONE,
    PLAN,
    THINK,
    Action,
    LLMSettings,
    Memory,
    Registry,
    Role,
    UserRequirement,
    registry,
    role_with_overrides,
)
from support.scripted_gateway import ScriptedGateway, turn

REG = Registry()
MODEL = LLMSettings(model="test-model")


class WritePRD(Action, registry=REG):
    instruction = "Write a PRD."


class WriteDesign(Action, registry=REG):
    instruction = "Write a design from the PRD."


class WriteTasks(Action, registry=REG):
    instruction = "Split the design into tasks."


class Architect(Role, registry=REG):
    profile = "Architect"
    watch = (WritePRD,)
    actions = (WriteDesign, WriteTasks)


IDEA = Message(cause_by="UserRequirement", sent_from="Boss", content="a snake game", id="m1")
PRD = Message(cause_by="WritePRD", sent_from="Alice", content="PRD: snake", id="m2")


def echo(request: LLMRequest, attempt: int) -> str:
    """A model that says which action asked and what the prompt's last line was."""
    return f"{request.action} done"


# -- Member -----------------------------------------------------------------------------


# Named apart from scenarios/my_reviewer.py's Reviewer, which other tests import in-process.
class DesignReviewer(Role):  # the default registry, exactly as a user writes it
    profile = "Code Reviewer"
    watch = (WriteDesign,)
    actions = (WriteTasks,)


def test_a_python_role_is_a_bus_member_with_resolved_names() -> None:
    r = DesignReviewer()
    assert isinstance(r, bus.Member)
    assert (r.name, r.profile, r.aliases) == ("DesignReviewer", "Code Reviewer", ())
    assert r.watch == frozenset({"WriteDesign"})
    assert [a.name for a in r.actions] == ["WriteTasks"]
    assert registry.role("DesignReviewer") is DesignReviewer
    assert registry.action("UserRequirement") is UserRequirement
    # The class keeps the declaration; an instance may override any field.
    assert DesignReviewer.watch == (WriteDesign,)
    rita = DesignReviewer(name="Rita", aliases=["QA"], llm=LLMSettings(model="gpt-4o"))
    assert (rita.name, rita.aliases, rita.llm.model) == ("Rita", ("QA",), "gpt-4o")
    assert DesignReviewer().name == "DesignReviewer"


async def test_empty_news_publishes_nothing_and_asks_nothing() -> None:
    gw = ScriptedGateway([])
    assert await Architect(registry=REG, llm_defaults=MODEL).step([], turn(gw)) == ()
    assert gw.calls == []


# -- memory -----------------------------------------------------------------------------


def test_memory_keeps_order_indexes_by_action_and_drops_repeated_ids() -> None:
    m = Memory()
    assert m.add(IDEA) and m.add(PRD)
    assert not m.add(PRD)
    own = Message(cause_by="WriteDesign", sent_from="Bob", content="d")
    m.extend([own, own])  # own messages have no id yet: both kept, as published
    assert [x.content for x in m] == ["a snake game", "PRD: snake", "d", "d"]
    assert m.by_cause("WritePRD") == (PRD,)
    assert m.latest("WriteDesign") is own and m.latest("Nope") is None
    assert "m2" in m and "m3" not in m
    assert m.recent(2) == (own, own) and len(m) == 4


async def test_role_remembers_what_it_received_and_published() -> None:
    role = Architect(registry=REG, llm_defaults=MODEL)
    out = await role.step([PRD], turn(ScriptedGateway(echo)))
    assert list(role.memory) == [PRD, *out]
    assert role.memory.by_cause("WriteTasks") == (out[1],)


# -- by_order ---------------------------------------------------------------------------


async def test_by_order_runs_each_action_in_turn_and_each_sees_the_earlier_results() -> None:
    gw = ScriptedGateway(echo)
    out = await Architect(name="Bob", registry=REG, llm_defaults=MODEL).step([PRD], turn(gw))
    assert [(m.cause_by, m.content, m.sent_from, m.parents) for m in out] == [
        ("WriteDesign", "WriteDesign done", "Bob", ("m2",)),
        ("WriteTasks", "WriteTasks done", "Bob", ("m2",)),
    ]
    assert gw.actions() == ["WriteDesign", "WriteTasks"]
    second_prompt = gw.calls[1].request.messages[-1].content
    assert "### WritePRD from Alice\nPRD: snake" in second_prompt
    assert "### WriteDesign from Bob\nWriteDesign done" in second_prompt
    assert "WriteDesign from Bob" not in gw.calls[0].request.messages[-1].content


async def test_later_steps_see_remembered_history_of_watched_and_own_actions() -> None:
    role = Architect(registry=REG, llm_defaults=MODEL)
    gw = ScriptedGateway(echo)
    await role.step([PRD], turn(gw))
    prd2 = Message(cause_by="WritePRD", sent_from="Alice", content="PRD v2", id="m7")
    out = await role.step([prd2, IDEA], turn(gw, round=2))
    prompt = gw.calls[2].request.messages[-1].content
    # history (PRD v1, own design and tasks), then news; UserRequirement is not watched
    # history, but as news it is shown.
    order = ["PRD: snake", "WriteDesign done", "WriteTasks done", "PRD v2", "a snake game"]
    positions = [prompt.index(text) for text in order]
    assert positions == sorted(positions)
    assert out[0].parents == ("m7", "m1")


async def test_send_to_of_the_role_addresses_every_published_message() -> None:
    role = Architect(registry=REG, llm_defaults=MODEL, send_to=["Eve"])
    out = await role.step([PRD], turn(ScriptedGateway(echo)))
    assert [m.send_to for m in out] == [("Eve",), ("Eve",)]


# -- react ------------------------------------------------------------------------------


def picker(picks: list[str]) -> ScriptedGateway:
    """Answers react picks from ``picks`` in order, and every action with its name."""
    queue = list(picks)

    def answer(request: LLMRequest, attempt: int) -> str:
        if request.action == THINK:
            return json.dumps({"next": queue.pop(0)})
        return f"{request.action} done"

    return ScriptedGateway(answer)


async def test_react_runs_the_actions_the_model_picks_until_done() -> None:
    gw = picker(["WriteTasks", "WriteDesign", DONE])
    role = Architect(react_mode="react", registry=REG, llm_defaults=MODEL)
    out = await role.step([PRD], turn(gw))
    assert [m.cause_by for m in out] == ["WriteTasks", "WriteDesign"]
    assert gw.actions() == [THINK, "WriteTasks", THINK, "WriteDesign", THINK]
    think = gw.calls[0].request
    assert think.schema is not None
    assert think.schema["properties"]["next"]["enum"] == ["WriteDesign", "WriteTasks", DONE]
    assert (
        "Actions already taken in this turn: WriteTasks."
        in gw.calls[2].request.messages[-1].content
    )


async def test_react_stops_at_max_react_steps() -> None:
    gw = picker(["WriteDesign"] * 10)
    role = Architect(react_mode="react", max_react_steps=3, registry=REG, llm_defaults=MODEL)
    out = await role.step([PRD], turn(gw))
    assert [m.cause_by for m in out] == ["WriteDesign"] * 3
    assert gw.actions().count(THINK) == 3 and len(gw.calls) == 6


async def test_react_repairs_a_pick_of_an_unknown_action() -> None:
    gw = picker(["WriteCode", "WriteTasks", DONE])
    out = await Architect(react_mode="react", registry=REG, llm_defaults=MODEL).step(
        [PRD], turn(gw)
    )
    assert [m.cause_by for m in out] == ["WriteTasks"]
    repair = gw.calls[1]
    assert repair.attempt == 2 and repair.request.action == THINK
    assert "at `next`" in repair.request.messages[-1].content
    assert "'WriteCode'" in repair.request.messages[-1].content


# -- plan_and_act -----------------------------------------------------------------------


def planner(plans: list[list[str]]) -> ScriptedGateway:
    queue = list(plans)

    def answer(request: LLMRequest, attempt: int) -> str:
        if request.action == PLAN:
            return json.dumps({"steps": queue.pop(0)})
        return f"{request.action} done"

    return ScriptedGateway(answer)


async def test_plan_and_act_runs_the_plan_in_its_order() -> None:
    gw = planner([["WriteTasks", "WriteDesign", "WriteTasks"]])
    role = Architect(react_mode="plan_and_act", registry=REG, llm_defaults=MODEL)
    out = await role.step([PRD], turn(gw))
    assert [m.cause_by for m in out] == ["WriteTasks", "WriteDesign", "WriteTasks"]
    assert gw.actions() == [PLAN, "WriteTasks", "WriteDesign", "WriteTasks"]
    schema = gw.calls[0].request.schema
    assert schema is not None
    assert schema["properties"]["steps"]["items"]["enum"] == ["WriteDesign", "WriteTasks"]
    assert schema["properties"]["steps"]["maxItems"] == 5


async def test_plan_with_an_unknown_action_is_repaired() -> None:
    gw = planner([["WriteDesign", "WriteCode"], ["WriteDesign"]])
    role = Architect(react_mode="plan_and_act", registry=REG, llm_defaults=MODEL)
    out = await role.step([PRD], turn(gw))
    assert [m.cause_by for m in out] == ["WriteDesign"]
    assert [(c.request.action, c.attempt) for c in gw.calls] == [
        (PLAN, 1),
        (PLAN, 2),
        ("WriteDesign", 1),
    ]
    assert "at `steps.1`" in gw.calls[1].request.messages[-1].content


async def test_a_plan_that_stays_wrong_fails_naming_the_role_and_the_bad_step() -> None:
    gw = planner([["WriteCode"]] * 3)
    role = Architect(name="Bob", react_mode="plan_and_act", registry=REG, llm_defaults=MODEL)
    with pytest.raises(ModelOutputError) as info:
        await role.step([PRD], turn(gw))
    assert f"'{PLAN}' of role 'Bob'" in str(info.value)
    assert "'WriteCode'" in str(info.value) and "'WriteDesign' or 'WriteTasks'" in str(info.value)
    assert len(gw.calls) == 3


async def test_a_plan_longer_than_max_react_steps_is_repaired() -> None:
    gw = planner([["WriteDesign"] * 3, ["WriteDesign", "WriteTasks"]])
    role = Architect(react_mode="plan_and_act", max_react_steps=2, registry=REG, llm_defaults=MODEL)
    out = await role.step([PRD], turn(gw))
    assert [m.cause_by for m in out] == ["WriteDesign", "WriteTasks"]
    assert "at most 2 items" in gw.calls[1].request.messages[-1].content


# -- checking declarations --------------------------------------------------------------


def test_unknown_watch_name_names_the_place_and_the_closest_action() -> None:
    with pytest.raises(ConfigError) as info:
        Architect(watch=["WritePRD", "WriteDesing"], registry=REG, where="$.roles[0]")
    text = str(info.value)
    assert "unknown action 'WriteDesing' at $.roles[0].watch[1]" in text
    assert "did you mean 'WriteDesign'?" in text


def test_unknown_action_in_a_python_class_names_the_class_attribute() -> None:
    class Sloppy(Role, register=False):
        actions = (WriteDesign, "writetasks")

    with pytest.raises(
        ConfigError, match=r"at Sloppy.actions\[1\] \(did you mean 'WriteTasks'\?\)"
    ):
        Sloppy(registry=REG)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"watch": "WritePRD"}, r"expected a list of action names at Architect.watch"),
        ({"react_mode": "reactive"}, r"unknown react_mode 'reactive' at Architect.react_mode"),
        ({"max_react_steps": 0}, r"expected a whole number >= 1 at Architect.max_react_steps"),
        (
            {"actions": [WriteDesign, WriteDesign]},
            r"'WriteDesign' is listed twice at Architect.actions\[1\]",
        ),
        ({"name": ""}, r"expected a non-empty string at Architect.name"),
        ({"llm": {"temprature": 0}}, r"Architect.llm.temprature: Extra inputs are not permitted"),
    ],
)
def test_bad_fields_are_config_errors_at_their_place(
    fields: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        Architect(registry=REG, **fields)  # type: ignore[arg-type]


def test_registry_lookups_and_copies() -> None:
    reg = REG.copy()

    class Extra(Action, registry=reg):
        pass

    assert reg.action("Extra") is Extra
    with pytest.raises(
        ConfigError,
        match=r"unknown action 'Extra' at \$.x\. Known actions: WriteDesign, WritePRD, WriteTasks\.",
    ):
        REG.action("Extra", where="$.x")
    with pytest.raises(
        ConfigError, match=r"unknown role 'Architekt' \(did you mean 'Architect'\?\)"
    ):
        reg.role("Architekt")


def test_two_different_classes_cannot_share_a_name_in_one_registry() -> None:
    reg = Registry()

    class First(Action, registry=reg):
        name = "Shared"

    with pytest.raises(ConfigError, match="action 'Shared' is defined twice"):

        class Second(Action, registry=reg):
            name = "Shared"

    def define() -> type[Action]:
        class Again(Action, registry=reg):
            pass

        return Again

    # Running the same class statement again (a reload) replaces the old class.
    first, second = define(), define()
    assert first is not second and reg.action("Again") is second
    assert reg.action("Shared") is First


# -- overrides --------------------------------------------------------------------------


async def test_role_with_overrides_changes_only_the_given_fields() -> None:
    base = Architect(llm=LLMSettings(model="gpt-4o", temperature=0.1), registry=REG)
    base.memory.add(PRD)
    rita = role_with_overrides(base, name="Rita", llm={"temperature": 0.0}, watch=None)
    assert (rita.name, rita.profile, rita.watch) == ("Rita", "Architect", frozenset({"WritePRD"}))
    assert type(rita) is type(base)  # (after the line above: mypy narrows on this)
    assert rita.llm == LLMSettings(model="gpt-4o", temperature=0.0)
    assert len(rita.memory) == 0 and len(base.memory) == 1
    with pytest.raises(
        ConfigError, match=r"unknown role field 'wacth' at \$.roles\[2\] \(did you mean 'watch'\?\)"
    ):
        role_with_overrides(base, where="$.roles[2]", wacth=["WritePRD"])


class Notes:
    """Turn services that keep the custom events a role emits."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, object], str, int]] = []

    @property
    def artifacts_dir(self) -> Path:
        return Path("/nonexistent")

    def write_artifact(self, relpath: str, data: str | bytes, *, role: str, round: int) -> Path:
        raise AssertionError("no artifacts expected")

    def emit(self, kind: str, data: Mapping[str, Any], *, role: str, round: int) -> None:
        self.events.append((kind, dict(data), role, round))


async def test_picks_and_plans_are_written_to_the_run_log() -> None:
    notes = Notes()
    gw = picker(["WriteTasks", DONE])
    role = Architect(name="Bob", react_mode="react", registry=REG, llm_defaults=MODEL)
    await role.step([PRD], bus.Turn(run_id="r", round=3, role="Bob", gateway=gw, services=notes))
    gw = planner([["WriteDesign"]])
    role = Architect(name="Bob", react_mode="plan_and_act", registry=REG, llm_defaults=MODEL)
    await role.step([PRD], bus.Turn(run_id="r", round=4, role="Bob", gateway=gw, services=notes))
    assert notes.events == [
        ("react_choice", {"action": "WriteTasks", "taken": []}, "Bob", 3),
        ("react_choice", {"action": DONE, "taken": ["WriteTasks"]}, "Bob", 3),
        ("plan_made", {"steps": ["WriteDesign"]}, "Bob", 4),
    ]
