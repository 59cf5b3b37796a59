"""The assembly: a scenario file becomes a team, a provider, a gateway and a run directory."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest

from sopbus._assemble import execute
from sopbus.bus import ConfigError, load_scenario, read_jsonl, scenario_with_overrides

TEAM = """
[scenario]
name = "review"
idea = "a todo app"
[run]
runs_dir = "{runs}"
[actions.Draft]
instruction = "Write a draft."
output = {{ title = "str", body = "str" }}
[actions.Review]
instruction = "Review the draft."
output = {{ approved = "bool", problems = "list[str]" }}
[[roles]]
name = "Writer"
watch = ["UserRequirement"]
actions = ["Draft"]
[[roles]]
name = "Rita"
watch = ["Draft"]
actions = ["Review"]
llm = {{ model = "{model}" }}
"""


def scenario(tmp_path: Path, model: str = "gpt-4o") -> Path:
    path = tmp_path / "team.toml"
    path.write_text(TEAM.format(runs=tmp_path / "runs", model=model))
    return path


async def test_a_toml_team_runs_on_the_simulator_and_keeps_everything(tmp_path: Path) -> None:
    outcome = await execute(load_scenario(scenario(tmp_path)))
    assert outcome.summary.end_reason == "idle"
    run_dir = outcome.run_dir
    events = list(read_jsonl(run_dir / "events.jsonl"))
    kinds = [e["kind"] for e in events]
    assert kinds[0] == "run_started" and kinds[-1] == "run_ended"
    published = [e["message"] for e in events if e["kind"] == "message_published"]
    assert [(m["cause_by"], m["sent_from"]) for m in published] == [
        ("UserRequirement", "Boss"),
        ("Draft", "Writer"),
    ]
    assert set(published[1]["payload"]) == {"title", "body"}
    ledger = list(read_jsonl(run_dir / "costs.jsonl"))
    assert [(c["role"], c["action"], c["model"]) for c in ledger] == [
        ("Writer", "Draft", "gpt-4o-mini"),
        ("Rita", "Review", "gpt-4o"),
    ]
    summary = json.loads((run_dir / "summary.json").read_text())
    total = sum((Decimal(c["cost_usd"]) for c in ledger), Decimal(0))
    assert Decimal(summary["total_usd"]) == total > 0
    assert summary["llm_calls"] == 2 and summary["status"] == "completed"
    again = load_scenario(run_dir / "scenario.toml")  # the scenario as run loads again
    assert again.name == "review" and again.roles[1].llm.model == "gpt-4o"  # type: ignore[union-attr]


async def test_an_unpriced_model_fails_before_any_call_or_run_directory(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        await execute(load_scenario(scenario(tmp_path, model="gpt-9-imaginary")))
    assert "gpt-9-imaginary" in str(err.value) and "[prices." in str(err.value)
    assert not (tmp_path / "runs").exists()


async def test_same_seed_same_log(tmp_path: Path) -> None:
    from sopbus.bus import logical_view

    first = await execute(load_scenario(scenario(tmp_path)))
    second = await execute(load_scenario(scenario(tmp_path)))
    logs = [list(logical_view(read_jsonl(o.run_dir / "events.jsonl"))) for o in (first, second)]
    assert logs[0] == logs[1]
    other = await execute(scenario_with_overrides(load_scenario(scenario(tmp_path)), seed=7))
    assert list(logical_view(read_jsonl(other.run_dir / "events.jsonl"))) != logs[0]


async def test_openai_provider_needs_a_key(tmp_path: Path) -> None:
    sc = scenario_with_overrides(load_scenario(scenario(tmp_path)), provider="openai")
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        await execute(sc, environ={})
