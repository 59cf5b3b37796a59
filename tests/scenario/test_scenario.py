"""Scenario files: decoding, defaults, the checks after decoding, and the error messages.

Every file in tests/data/bad_scenarios/ is broken in one way and says, in ``# expect:``
lines, the fragments its error message must contain.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import msgspec
import pytest

from sopbus.bus import (
    ConfigError,
    LLMConfig,
    LLMOverrides,
    Scenario,
    ScenarioDoc,
    TypeSpecError,
    closest,
    did_you_mean,
    load_scenario,
    parse_type_spec,
    scenario_to_builtins,
    scenario_warnings,
    scenario_with_overrides,
)
from support.paths import DATA

BAD = DATA / "bad_scenarios"
BAD_FILES = sorted(BAD.glob("*.toml"))

FULL = """
[scenario]
name = "review loop"
description = "an engineer and a reviewer"
idea = "a todo CLI"

[run]
max_rounds = 4
budget_usd = 0.1
seed = 7
mode = "events"
runs_dir = "out/runs"

[llm]
provider = "sim"
model = "gpt-4o"
temperature = 0.5
max_tokens = 512
output_mode = "prompt"
latency_ms = 5
fixtures = ["fixtures/f.toml"]
cassette = "tapes/run.jsonl"

[prices."my-model"]
input = 0.5
output = "1.5"

[sop]
review = true
depth = { max = 2 }

[[roles]]
name = "Rita"
profile = "Code Reviewer"
aliases = ["reviewer"]
watch = ["WriteCode"]
actions = ["ReviewCode"]
send_to = ["Engineer"]
react_mode = "react"
max_react_steps = 3
llm = { model = "gpt-4o-mini", temperature = 0.0 }

[[roles]]
name = "Engineer"

[actions.ReviewCode]
instruction = "Review the code."
output = { approved = "bool", problems = "list[str]", notes = "optional[dict[str, int]]" }
max_repairs = 1
llm = { max_tokens = 200 }

[[inject]]
round = 2
content = "also dark mode"
payload = { priority = 1 }
"""


def write(directory: Path, text: str, name: str = "s.toml") -> Path:
    path = directory / name
    path.write_text(text, encoding="utf-8")
    return path


def expected_fragments(path: Path) -> list[str]:
    prefix = "# expect: "
    return [
        line[len(prefix) :]
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.startswith(prefix)
    ]


def test_there_are_bad_files_for_each_kind_of_mistake() -> None:
    names = {p.stem for p in BAD_FILES}
    assert {
        "run_unknown_key",
        "wrong_type",
        "bad_mode",
        "bad_type_spec",
        "toml_syntax",
        "negative_budget",
        "missing_name",
        "role_unknown_key",
        "missing_fixture",
    } <= names
    assert all(expected_fragments(p) for p in BAD_FILES)


@pytest.mark.parametrize("path", BAD_FILES, ids=lambda p: p.stem)
def test_bad_file_fails_with_its_expected_message(path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_scenario(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: ")
    for fragment in expected_fragments(path):
        assert fragment in message


def test_minimal_file_gets_the_defaults(tmp_path: Path) -> None:
    path = write(tmp_path, '[scenario]\nname = "tiny"\nsop = "software_company"\n')
    s = load_scenario(path)
    assert (s.name, s.sop, s.idea, s.info.description) == ("tiny", "software_company", None, "")
    assert s.run.max_rounds == 10 and s.run.budget_usd == Decimal("3")
    assert (s.run.seed, s.run.mode, s.run.runs_dir) == (0, "rounds", "runs")
    assert s.llm == LLMConfig()
    # max_tokens not given: each action's own default, else 1024 (see tests/roles)
    assert (s.llm.provider, s.llm.model, s.llm.max_tokens) == ("sim", "gpt-4o-mini", None)
    assert (s.llm.stream, s.llm.timeout_s, s.llm.idle_timeout_s) == (None, 600.0, 60.0)
    assert (s.prices, s.sop_options, s.roles, s.actions, s.inject) == ({}, {}, (), {}, ())
    assert s.path == path.resolve() and s.base_dir == tmp_path.resolve()
    assert scenario_warnings(s) == []


def test_full_file_decodes_every_section(tmp_path: Path) -> None:
    (tmp_path / "fixtures").mkdir()
    write(tmp_path / "fixtures", "", "f.toml")
    s = load_scenario(write(tmp_path, FULL))
    assert s.run.budget_usd == Decimal("0.1")  # exactly, not the float's binary expansion
    assert (s.run.max_rounds, s.run.seed, s.run.mode, s.run.runs_dir) == (
        4,
        7,
        "events",
        "out/runs",
    )
    assert s.fixture_paths() == (tmp_path.resolve() / "fixtures" / "f.toml",)
    assert s.cassette_path() == tmp_path.resolve() / "tapes" / "run.jsonl"
    assert s.price_table() == {"my-model": {"input": Decimal("0.5"), "output": Decimal("1.5")}}
    assert s.sop_options == {"review": True, "depth": {"max": 2}}
    rita, engineer = s.roles
    assert (rita.watch, rita.actions, rita.send_to, rita.aliases) == (
        ("WriteCode",),
        ("ReviewCode",),
        ("Engineer",),
        ("reviewer",),
    )
    assert (rita.react_mode, rita.max_react_steps) == ("react", 3)
    assert rita.llm == LLMOverrides(model="gpt-4o-mini", temperature=0.0)
    assert engineer.watch is None and engineer.profile is None  # "not given", not "empty"
    review = s.actions["ReviewCode"]
    assert review.max_repairs == 1
    assert review.output_types() == {
        "approved": bool,
        "problems": list[str],
        "notes": dict[str, int] | None,
    }
    assert (s.inject[0].round, s.inject[0].cause_by, s.inject[0].sent_from) == (
        2,
        "UserEdit",
        "User",
    )
    assert s.inject[0].payload == {"priority": 1}


def test_llm_overrides_are_laid_on_in_order(tmp_path: Path) -> None:
    (tmp_path / "fixtures").mkdir()
    write(tmp_path / "fixtures", "", "f.toml")
    s = load_scenario(write(tmp_path, FULL))
    merged = s.llm.merged(s.roles[0].llm, s.actions["ReviewCode"].llm, None)
    assert (merged.model, merged.temperature, merged.max_tokens) == ("gpt-4o-mini", 0.0, 200)
    assert (merged.provider, merged.output_mode) == ("sim", "prompt")  # kept from [llm]


def test_scenario_is_frozen(tmp_path: Path) -> None:
    s = load_scenario(write(tmp_path, '[scenario]\nname = "x"\nsop = "s"\n'))
    with pytest.raises(AttributeError):
        s.run = s.run  # type: ignore[misc]


def test_several_problems_are_reported_together(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        '[scenario]\nname = "x"\nsop = "s"\n[run]\nbudget_usd = 0\n[[inject]]\nround = 1\n',
    )
    with pytest.raises(ConfigError) as caught:
        load_scenario(path)
    lines = str(caught.value).splitlines()
    assert len(lines) == 2
    assert "$.run.budget_usd" in lines[0] and "$.inject[0]" in lines[1]
    assert all(line.startswith(f"{path}: ") for line in lines)


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such scenario file"):
        load_scenario(tmp_path / "nope.toml")


def test_warnings_name_inject_after_last_round_and_unused_base_url(tmp_path: Path) -> None:
    s = load_scenario(
        write(
            tmp_path,
            '[scenario]\nname = "x"\nsop = "s"\n[run]\nmax_rounds = 2\n'
            '[llm]\nbase_url = "http://x"\n[[inject]]\nround = 5\n'
            'content = "late"\n',
        )
    )
    warnings = scenario_warnings(s)
    assert len(warnings) == 2
    assert warnings[0].startswith("$.inject[0].round: round 5 is after the last round (2)")
    assert warnings[1].startswith('$.llm.base_url: ignored by provider "sim"')


def test_overrides_replace_only_what_is_given(tmp_path: Path) -> None:
    s = load_scenario(write(tmp_path, '[scenario]\nname = "x"\nsop = "s"\nidea = "a"\n'))
    o = scenario_with_overrides(
        s,
        idea="b",
        provider="openai",
        model="m",
        base_url="http://h",
        budget_usd="0.25",
        max_rounds=2,
        seed=9,
        mode="events",
        runs_dir=tmp_path / "r",
    )
    assert (o.idea, o.llm.provider, o.llm.model, o.llm.base_url) == ("b", "openai", "m", "http://h")
    assert (o.run.budget_usd, o.run.max_rounds, o.run.seed, o.run.mode) == (
        Decimal("0.25"),
        2,
        9,
        "events",
    )
    assert o.run.runs_dir == str(tmp_path / "r")
    assert o.llm.temperature == s.llm.temperature and o.path == s.path
    assert s.idea == "a" and s.llm.provider == "sim"  # the original is untouched
    assert scenario_with_overrides(s) == s


def test_overrides_are_checked_again(tmp_path: Path) -> None:
    s = load_scenario(write(tmp_path, '[scenario]\nname = "x"\nsop = "s"\n'))
    with pytest.raises(ConfigError, match=r"no cassette - at `\$\.llm\.cassette`"):
        scenario_with_overrides(s, provider="replay")
    with pytest.raises(ConfigError, match="budget_usd"):
        scenario_with_overrides(s, budget_usd=Decimal("-1"))
    with pytest.raises(ConfigError, match="--max-rounds 0: expected a number from 1 to 100000"):
        scenario_with_overrides(s, max_rounds=0)
    with pytest.raises(ConfigError, match="--mode 'later': expected one of rounds, events"):
        scenario_with_overrides(s, mode="later")  # type: ignore[arg-type]


def test_to_builtins_round_trips_through_the_decoder(tmp_path: Path) -> None:
    (tmp_path / "fixtures").mkdir()
    write(tmp_path / "fixtures", "", "f.toml")
    s = load_scenario(write(tmp_path, FULL))
    data = scenario_to_builtins(s)
    assert data["path"] == str(s.path) and data["run"]["budget_usd"] == "0.1"
    assert data["scenario"]["name"] == "review loop" and data["sop"]["review"] is True
    del data["path"]
    again = msgspec.convert(data, type=ScenarioDoc)
    assert again.run == s.run and again.actions == s.actions and again.roles == s.roles


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("str", str),
        ("int", int),
        ("float", float),
        ("bool", bool),
        ("list[str]", list[str]),
        ("dict[str, float]", dict[str, float]),
        ("optional[int]", int | None),
        ("int | None", int | None),
        ("list[dict[str, optional[bool]]]", list[dict[str, bool | None]]),
        (" list[ str ] ", list[str]),
        ("str | int", str | int),
    ],
)
def test_type_specs_parse_into_python_types(spec: str, expected: object) -> None:
    assert parse_type_spec(spec) == expected


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("lst[str]", "unknown type `lst` in `lst[str]`"),
        ("List[str]", "did you mean `list`?"),
        ("string", "did you mean `str`?"),
        ("integer", "did you mean `int`?"),
        ("array", "did you mean `list[T]`?"),
        ("list[str", "expected `]` but found the end"),
        ("list[]", "missing type before `]`"),
        ("dict[int, str]", "dict keys must be `str`"),
        ("int str", "unexpected `str`"),
        ("", "missing type"),
    ],
)
def test_bad_type_specs_say_what_is_wrong(spec: str, fragment: str) -> None:
    with pytest.raises(TypeSpecError) as caught:
        parse_type_spec(spec)
    assert fragment in str(caught.value)


def test_closest_finds_near_names_ignoring_case() -> None:
    assert closest("max_round", ["max_rounds", "seed", "mode"]) == ["max_rounds"]
    assert closest("reviewcode", ["WriteCode", "ReviewCode"])[0] == "ReviewCode"
    assert closest("zzz", ["WriteCode", "ReviewCode"]) == []
    assert closest("WriteCode", ["WriteCode"]) == []  # the name itself is no suggestion
    assert did_you_mean("Enginer", ["Engineer", "Architect"]) == "; did you mean `Engineer`?"
    assert did_you_mean("qqq", ["Engineer"]) == ""


def test_scenario_requires_path_and_base_dir() -> None:
    assert {"path", "base_dir"} <= set(Scenario.__struct_fields__)
