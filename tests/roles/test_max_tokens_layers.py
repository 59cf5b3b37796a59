"""``[llm].max_tokens`` is every action's (issue 26): given, it replaces a built-in action's
own default (WriteCode's and WriteTest's 4096), up or down; an action's or a role's
``llm = { max_tokens = ... }`` wins over it; not given, each action keeps its default, else
1024. Checked on the layers, and on the requests a real server on 127.0.0.1 receives."""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

import pytest
import trio

from sopbus._assemble import execute
from sopbus.bus import ChatMessage, LLMRequest, load_scenario, scenario_with_overrides
from sopbus.bus.llm._sim import _generate
from sopbus.roles import LLMSettings
from sopbus.roles.company import Engineer, WriteCode, WriteTest
from support.openai_server import Answer, OpenAIServer
from support.paths import ROOT


def code_bound(run: LLMSettings, *, role: LLMSettings | None = None, action: Any = None) -> int:
    engineer = Engineer(llm_defaults=run, llm=role, actions=[action or WriteCode()])
    bound = engineer.llm_for(engineer.action_named("WriteCode")).max_tokens
    assert bound is not None
    return bound


def test_without_a_run_max_tokens_the_actions_default_holds() -> None:
    assert code_bound(LLMSettings(model="m")) == 4096
    assert WriteTest.default_max_tokens == 4096


@pytest.mark.parametrize("given", [300, 8000])
def test_the_runs_max_tokens_replaces_the_builtin_default_up_or_down(given: int) -> None:
    assert code_bound(LLMSettings(model="m", max_tokens=given)) == given


def test_a_roles_or_an_actions_own_setting_wins_over_the_run() -> None:
    run = LLMSettings(model="m", max_tokens=300)
    assert code_bound(run, role=LLMSettings(max_tokens=2048)) == 2048
    assert code_bound(run, action=WriteCode(llm=LLMSettings(max_tokens=1500))) == 1500


def test_validate_shows_each_actions_max_tokens(cli: Any, tmp_path: Path) -> None:
    path = tmp_path / "company.toml"
    text = (ROOT / "scenarios" / "software_company.toml").read_text(encoding="utf-8")
    path.write_text(shipped_company(text, max_tokens=700), encoding="utf-8")
    done = cli("validate", path)
    assert done.returncode == 0, done.stderr
    assert re.search(r"^\s+Bob\s+WriteDesign 700$", done.stdout, re.M), done.stdout
    assert re.search(r"^\s+Alex\s+WriteCode 2000, SummarizeCode 2000$", done.stdout, re.M)


def shipped_company(text: str, *, max_tokens: int) -> str:
    """The shipped software company with ``[llm].max_tokens`` changed and Alex's at 2000
    (Edward keeps the file's 4096)."""
    text = re.sub(r"^max_tokens = 1500 .*$", f"max_tokens = {max_tokens}", text, flags=re.M)
    text = text.replace(
        'name = "Alex"\nllm = { max_tokens = 4096 }', 'name = "Alex"\nllm = { max_tokens = 2000 }'
    )
    text = text.replace('fixtures = ["fixtures/software_company.toml"]\n', "")
    return text.replace("review = true ", "review = false")


def schema_answer(body: dict[str, Any]) -> Answer:
    """Schema-valid JSON drawn from the prompt's words, as the simulator draws it."""
    request = LLMRequest(
        messages=tuple(ChatMessage(m["role"], m["content"]) for m in body["messages"]),
        model=body["model"],
        schema=body["response_format"]["json_schema"]["schema"],
        max_tokens=body["max_completion_tokens"],
    )
    return Answer(_generate(request, random.Random(7)), prompt_tokens=50, completion_tokens=40)


def test_the_runs_max_tokens_reaches_write_codes_requests(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    path = tmp_path / "company.toml"
    text = (ROOT / "scenarios" / "software_company.toml").read_text(encoding="utf-8")
    path.write_text(shipped_company(text, max_tokens=700), encoding="utf-8")
    openai_server.script(schema_answer)
    scenario = scenario_with_overrides(
        load_scenario(path),
        provider="openai",
        base_url=openai_server.base_url,
        max_rounds=4,  # PRD, design, tasks, code: the run stops before QA runs anything
        runs_dir=tmp_path / "runs",
    )
    trio.run(lambda: execute(scenario, environ={"OPENAI_API_KEY": "sk-test"}))

    asked = [
        (r.body["response_format"]["json_schema"]["name"], r.body["max_completion_tokens"])
        for r in openai_server.requests
    ]
    by_action = {name: {bound for n, bound in asked if n == name} for name, _ in asked}
    assert by_action["WritePRD"] == by_action["WriteDesign"] == {700}
    assert by_action["WriteCode"] == {2000}  # Alex's own llm wins over [llm]
