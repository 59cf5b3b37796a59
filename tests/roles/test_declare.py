"""Declared actions and roles (a scenario file's tables) behave like Python ones."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

from sopbus.bus import ConfigError, LLMRequest, Message, load_scenario
from sopbus.roles import (
    Action,
    LLMSettings,
    Registry,
    Role,
    declare_action,
    declare_role,
    registry,
    role_with_overrides,
)
from sopbus.sops import build_team
from sopbus.sops._team import llm_defaults
from support.scripted_gateway import ScriptedGateway, turn

# -- the same team, once in Python ------------------------------------------------------

PY = Registry()


class WriteCode(Action, registry=PY):
    instruction = "Write the code for the task."


class ReviewCode(Action, registry=PY):
    instruction = "Review the code in the messages. List concrete problems."
    max_repairs = 1

    class Output(BaseModel):
        model_config = ConfigDict(extra="forbid")
        approved: bool
        problems: list[str]


class Reviewer(Role, registry=PY):
    profile = "Code Reviewer"
    goal = "Catch bugs"
    constraints = "Be brief"
    watch = (WriteCode,)
    actions = (ReviewCode,)
    send_to = ("Alex",)
    llm = LLMSettings(temperature=0.0, model="gpt-4o")


# -- ... and once as a scenario file declares it ----------------------------------------

SCENARIO = """
[[roles]]
name = "Reviewer"
profile = "Code Reviewer"
goal = "Catch bugs"
constraints = "Be brief"
watch = ["WriteCode"]
actions = ["ReviewCode"]
send_to = ["Alex"]
llm = { model = "gpt-4o", temperature = 0.0 }

[actions.WriteCode]
instruction = "Write the code for the task."

[actions.ReviewCode]
instruction = "Review the code in the messages. List concrete problems."
output = { approved = "bool", problems = "list[str]" }
max_repairs = 1
"""
TYPES: dict[str, Any] = {"bool": bool, "list[str]": list[str]}  # the loader's job, in small


def declared_team() -> tuple[Registry, Role]:
    doc = tomllib.loads(SCENARIO)
    reg = Registry()
    for name, spec in doc["actions"].items():
        output = {k: TYPES[v] for k, v in spec["output"].items()} if "output" in spec else None
        declare_action(
            name,
            instruction=spec["instruction"],
            output=output,
            max_repairs=spec.get("max_repairs", 2),
            registry=reg,
        )
    (role,) = [
        declare_role(where=f"$.roles[{i}]", registry=reg, **r) for i, r in enumerate(doc["roles"])
    ]
    return reg, role


def reviewing_model(request: LLMRequest, attempt: int) -> str:
    """Answers wrongly first, then right; the verdict depends on the code it was shown."""
    if attempt == 1:
        return '{"approved": "perhaps"}'
    newest_code = request.messages[-3].content.rsplit("### WriteCode from Alex\n", 1)[1]
    buggy = "return a - b" in newest_code
    return json.dumps({"approved": not buggy, "problems": ["subtracts"] if buggy else []})


async def run(role: Role) -> tuple[list[Message], list[LLMRequest]]:
    gw = ScriptedGateway(reviewing_model)
    out: list[Message] = []
    for rnd, code in enumerate(["def add(a, b): return a - b", "def add(a, b): return a + b"], 1):
        news = Message(
            cause_by="WriteCode", sent_from="Alex", content=code, id=f"m{rnd}", round=rnd
        )
        out += await role.step([news], turn(gw, role=role.name, round=rnd))
    return out, [c.request for c in gw.calls]


async def test_a_declared_role_and_its_python_twin_publish_the_same_messages() -> None:
    _, declared = declared_team()
    python = Reviewer(registry=PY)
    assert declared.fields() | {"actions": None} == python.fields() | {"actions": None}
    assert [a.name for a in declared.actions] == [a.name for a in python.actions] == ["ReviewCode"]

    got_declared, asked_declared = await run(declared)
    got_python, asked_python = await run(python)
    assert got_declared == got_python
    assert asked_declared == asked_python  # same prompts, schema, settings, repairs
    assert [(m.cause_by, m.send_to, m.parents, m.payload) for m in got_python] == [
        ("ReviewCode", ("Alex",), ("m1",), {"approved": False, "problems": ["subtracts"]}),
        ("ReviewCode", ("Alex",), ("m2",), {"approved": True, "problems": []}),
    ]
    assert [(r.model, r.temperature, r.schema_name) for r in asked_python[:1]] == [
        ("gpt-4o", 0.0, "ReviewCode")
    ]
    assert len(asked_python) == 4  # one repair per review


def test_declared_things_are_registered_as_classes_like_python_ones() -> None:
    reg, role = declared_team()
    assert issubclass(reg.action("ReviewCode"), Action)
    assert reg.role("Reviewer") is type(role)
    assert type(role).watch == ("WriteCode",)  # the class shows the checked declaration
    again = reg.role("Reviewer")(registry=reg)
    assert again.fields() | {"actions": None} == role.fields() | {"actions": None}
    # the default registry is untouched (other test modules may have a Python "Reviewer" there)
    assert registry.roles.get("Reviewer") is not type(role)
    assert registry.actions.get("ReviewCode") is not reg.action("ReviewCode")


# -- declared actions -------------------------------------------------------------------


def test_declared_output_model_requires_every_field_and_forbids_extras() -> None:
    cls = declare_action(
        "Judge", instruction="Judge.", output={"score": int, "why": str}, registry=Registry()
    )
    assert cls.Output is not None
    schema = cls.Output.model_json_schema()
    assert schema["required"] == ["score", "why"]
    assert schema["additionalProperties"] is False
    assert cls.Output.model_validate_json('{"score": 3, "why": "ok"}').model_dump() == {
        "score": 3,
        "why": "ok",
    }
    with pytest.raises(ValueError, match="Extra inputs are not permitted"):
        cls.Output.model_validate_json('{"score": 3, "why": "ok", "also": 1}')


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"output": {"2fast": int}}, r"bad output field name '2fast' at \$.actions.X.output"),
        ({"output": {"_secret": int}}, r"bad output field name '_secret'"),
        ({"output": {}}, r"expected a table of field names and types at \$.actions.X.output"),
        (
            {"output": {"n": object()}},
            r"cannot build the output of action 'X' at \$.actions.X.output",
        ),
        ({"max_repairs": -1}, r"expected a whole number >= 0 at \$.actions.X.max_repairs"),
        ({"instruction": 5}, r"expected a string at \$.actions.X.instruction"),
        (
            {"llm": {"max_tokens": 0}},
            r"\$.actions.X.llm.max_tokens: Input should be greater than 0",
        ),
    ],
)
def test_bad_action_declarations_are_config_errors(kwargs: dict[str, Any], message: str) -> None:
    reg = Registry()
    args: dict[str, Any] = {"instruction": "Do X.", "output": None} | kwargs
    with pytest.raises(ConfigError, match=message):
        declare_action("X", registry=reg, **args)
    assert "X" not in reg.actions


# -- declared roles ---------------------------------------------------------------------


def test_unknown_names_in_a_declared_role_name_the_path_and_the_closest_names() -> None:
    reg, _ = declared_team()
    with pytest.raises(ConfigError) as info:
        declare_role(
            "Rita",
            watch=["WriteCode", "WriteCod"],
            actions=["ReviewCode"],
            registry=reg,
            where="$.roles[0]",
        )
    assert str(info.value).startswith(
        "unknown action 'WriteCod' at $.roles[0].watch[1] (did you mean 'WriteCode'?)."
    )
    with pytest.raises(
        ConfigError, match=r"at \$.roles\[1\].actions\[0\] \(did you mean 'ReviewCode'\?\)"
    ):
        declare_role(
            "Rita", watch=["WriteCode"], actions=["Reviewcode"], registry=reg, where="$.roles[1]"
        )
    assert "Rita" not in reg.roles  # a failed declaration registers nothing


def test_a_declaration_does_not_replace_a_role_of_the_same_name() -> None:
    reg, _ = declared_team()
    with pytest.raises(
        ConfigError,
        match=r"role 'Reviewer' is defined twice: by the declaration "
        r"at \$.roles\[0\] and by the declaration at \$.roles\[3\]",
    ):
        declare_role("Reviewer", registry=reg, where="$.roles[3]")


async def test_a_scenario_overrides_a_python_role_by_name() -> None:
    scenario = PY.copy()
    declare_action("AuditCode", instruction="Audit.", output={"ok": bool}, registry=scenario)
    base = Reviewer(registry=PY)
    rita = role_with_overrides(
        base,
        registry=scenario,
        where="$.roles[0]",
        name="Rita",
        actions=["AuditCode"],
        llm={"model": "gpt-4o-mini"},
    )
    assert (rita.name, rita.profile, rita.watch) == (
        "Rita",
        "Code Reviewer",
        frozenset({"WriteCode"}),
    )
    assert rita.llm == LLMSettings(model="gpt-4o-mini", temperature=0.0)
    gw = ScriptedGateway(['{"ok": true}'])
    news = Message(cause_by="WriteCode", sent_from="Alex", content="x = 1", id="m1")
    (out,) = await rita.step([news], turn(gw))
    assert (out.cause_by, out.sent_from, out.payload) == ("AuditCode", "Rita", {"ok": True})
    with pytest.raises(
        ConfigError, match=r"unknown action 'AuditCode' at \$.roles\[0\].actions\[0\]"
    ):
        role_with_overrides(base, where="$.roles[0]", actions=["AuditCode"])  # not in PY
    assert "AuditCode" not in PY.actions


def test_declared_role_settings_are_checked_at_their_path() -> None:
    reg, _ = declared_team()
    with pytest.raises(
        ConfigError,
        match=r"\$.roles\[4\].llm.temperature: Input should be less "
        r"than or equal to 2",
    ):
        declare_role("Hot", llm={"temperature": 9}, registry=reg, where="$.roles[4]")
    with pytest.raises(
        ConfigError,
        match=r"unknown react_mode 'plan' at \$.roles\[4\].react_mode; "
        r"expected one of by_order, react, plan_and_act",
    ):
        declare_role("Hot", react_mode="plan", registry=reg, where="$.roles[4]")
    slow = declare_role(
        "Slow", react_mode="react", max_react_steps=2, actions=["ReviewCode"], registry=reg
    )
    assert (slow.react_mode, slow.max_react_steps) == ("react", 2)


# -- the same twins through the real scenario loader and team builder ------------------------


def scenario_file(tmp_path: Path, tables: str) -> Path:
    path = tmp_path / "twins.toml"
    path.write_text('[scenario]\nname = "twins"\nidea = "review"\n' + tables, encoding="utf-8")
    return path


async def test_a_role_from_a_scenario_file_behaves_like_its_python_twin(tmp_path: Path) -> None:
    # WriteCode is a built-in action, so the file watches it without declaring it.
    # Another name than Reviewer: Python test modules register roles of that name globally.
    tables = SCENARIO.replace(
        '[actions.WriteCode]\ninstruction = "Write the code for the task."\n', ""
    )
    tables = tables.replace('name = "Reviewer"', 'name = "TwinReviewer"')
    # The team must hold the role it sends to (send_to names are checked when it is built).
    tables += '[[roles]]\nname = "Alex"\nwatch = ["ReviewCode"]\n'
    scenario = load_scenario(scenario_file(tmp_path, tables))
    declared, _alex = build_team(scenario).roles
    python = Reviewer(registry=PY, name="TwinReviewer", llm_defaults=llm_defaults(scenario))
    assert declared.fields() | {"actions": None} == python.fields() | {"actions": None}
    got_declared, asked_declared = await run(declared)
    got_python, asked_python = await run(python)
    assert got_declared == got_python and asked_declared == asked_python
    assert [m.payload for m in got_declared] == [
        {"approved": False, "problems": ["subtracts"]},
        {"approved": True, "problems": []},
    ]


def test_a_file_action_named_like_a_built_in_one_names_the_file_and_the_fix(tmp_path: Path) -> None:
    path = scenario_file(tmp_path, SCENARIO)  # declares [actions.WriteCode], a built-in name
    with pytest.raises(ConfigError) as caught:
        build_team(load_scenario(path))
    assert str(caught.value) == (
        f"{path}: [actions.WriteCode] - at `$.actions.WriteCode`: an action named WriteCode already "
        f"exists (built in: sopbus.roles.company._code.WriteCode); rename the table, e.g. "
        f"[actions.MyWriteCode], and the names that refer to it"
    )
