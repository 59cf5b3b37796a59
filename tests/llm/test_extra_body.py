"""``extra_body``: a scenario's server sampling settings reach the server (issue 26).

Both small real models looped inside JSON under their server's default sampling; the fix is
``[llm] extra_body = { repeat_penalty = 1.3, top_k = 40 }``. Checked on the wire: the real
test server records each request body it received.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from sopbus.bus import ChatMessage, LLMRequest, read_jsonl, request_key
from support.cli import sopbus
from support.openai_server import Answer, OpenAIServer

TEAM = """
[scenario]
name = "sampled"
idea = "a haiku about tea"

[run]
max_rounds = 2

[llm]
provider = "openai"
model = "gpt-4o-mini"
max_tokens = 100
{llm}

[actions.Draft]
instruction = "Draft it."

[actions.Polish]
instruction = "Polish it."
llm = {{ extra_body = {{ top_k = 20 }} }}

[[roles]]
name = "Dora"
watch = ["UserRequirement"]
actions = ["Draft"]

[[roles]]
name = "Pete"
watch = ["Draft"]
actions = ["Polish"]
{pete}
"""

SAMPLED = "extra_body = { repeat_penalty = 1.3, top_k = 40 }"
PETE = "llm = { extra_body = { repeat_penalty = 1.1 } }"
ENV = {"OPENAI_API_KEY": "sk-test-extra-body"}


def write(tmp: Path, llm: str = SAMPLED, pete: str = PETE) -> Path:
    path = tmp / "team.toml"
    path.write_text(TEAM.format(llm=llm, pete=pete), encoding="utf-8")
    return path


def run(tmp: Path, server: OpenAIServer, path: Path) -> Any:
    return sopbus(
        "run", path, "--base-url", server.base_url, "--runs-dir", tmp / "runs", "--quiet",
        cwd=tmp, env=ENV,
    )  # fmt: skip


def test_the_server_receives_the_sampling_settings_and_a_role_override_wins(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    openai_server.script(Answer("Steam rises from the cup."))
    result = run(tmp_path, openai_server, write(tmp_path))

    assert result.returncode == 0, result.stderr
    bodies = {
        r.body["messages"][0]["content"].split("\n")[0]: r.body for r in openai_server.requests
    }
    dora = [b for b in (r.body for r in openai_server.requests) if "Draft it." in json.dumps(b)]
    pete = [b for b in (r.body for r in openai_server.requests) if "Polish it." in json.dumps(b)]
    assert dora and pete, bodies
    for body in dora:
        assert body["repeat_penalty"] == 1.3 and body["top_k"] == 40
    for body in pete:
        # The role's repeat_penalty over the run's, the action's top_k over the run's.
        assert body["repeat_penalty"] == 1.1 and body["top_k"] == 20
    for body in dora + pete:
        assert body["temperature"] == 0.2 and body["model"] == "gpt-4o-mini"


def test_a_run_with_sampling_settings_replays_at_no_cost(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    openai_server.script(Answer("Steam rises from the cup."))
    assert run(tmp_path, openai_server, write(tmp_path)).returncode == 0
    (recorded,) = (tmp_path / "runs").iterdir()
    asked = len(openai_server.requests)

    replay = sopbus("replay", recorded, "--into", tmp_path / "replays", "--quiet", cwd=tmp_path)

    assert replay.returncode == 0, replay.stderr
    assert len(openai_server.requests) == asked
    (replayed,) = (tmp_path / "replays").iterdir()
    summary = json.loads((replayed / "summary.json").read_text())
    assert (
        summary["end_reason"] == json.loads((recorded / "summary.json").read_text())["end_reason"]
    )
    assert float(summary["total_usd"]) == 0
    lines = list(read_jsonl(replayed / "costs.jsonl"))
    assert len(lines) == asked and all(line["outcome"] == "replayed" for line in lines)


def test_validate_shows_the_sampling_settings(tmp_path: Path) -> None:
    result = sopbus("validate", write(tmp_path), cwd=tmp_path, env=ENV)

    assert result.returncode == 0, result.stderr
    assert 'extra_body {"repeat_penalty": 1.3, "top_k": 40}' in result.stdout


@pytest.mark.parametrize(
    ("llm", "pete", "where", "fix"),
    [
        ("extra_body = { temperature = 0.9 }", "", "$.llm.extra_body.temperature", "[llm].temperature"),
        ('extra_body = { max_tokens = 9000 }', "", "$.llm.extra_body.max_tokens", "[llm].max_tokens"),
        ("", "llm = { extra_body = { seed = 3 } }", "$.roles[1].llm.extra_body.seed", "[run].seed"),
        ("", "llm = { extra_body = { stream = true } }", "$.roles[1].llm.extra_body.stream", "[llm].stream"),
    ],
)  # fmt: skip
def test_a_key_sopbus_sets_itself_is_refused_naming_the_proper_key(
    tmp_path: Path, openai_server: OpenAIServer, llm: str, pete: str, where: str, fix: str
) -> None:
    path = write(tmp_path, llm=llm, pete=pete)
    for command in (("validate", path), ("run", path, "--base-url", openai_server.base_url)):
        result = sopbus(*command, cwd=tmp_path, env=ENV)
        assert result.returncode == 2, result.stderr
        assert where in result.stderr and fix in result.stderr and "team.toml" in result.stderr
    assert openai_server.requests == []


@pytest.mark.parametrize(
    ("llm", "pete", "where"),
    [
        ('extra_body = "repeat_penalty=1.3"', "", "$.llm.extra_body"),
        ("extra_body = [1.3, 40]", "", "$.llm.extra_body"),
        ("", 'llm = { extra_body = 1.1 }', "$.roles[1].llm.extra_body"),
    ],
)  # fmt: skip
def test_a_bad_type_is_a_usage_error_naming_the_field(
    tmp_path: Path, llm: str, pete: str, where: str
) -> None:
    result = sopbus("validate", write(tmp_path, llm=llm, pete=pete), cwd=tmp_path)

    assert result.returncode == 2, result.stderr
    assert where in result.stderr and "team.toml" in result.stderr
    assert "expected `table`" in result.stderr and "extra_body = { repeat_penalty" in result.stderr


@pytest.mark.parametrize(
    ("llm", "where"),
    [
        ("extra_body = { top_k = 40, mirostat_tau = nan }", "$.llm.extra_body.mirostat_tau"),
        ("extra_body = { stop = [1.0, inf] }", "$.llm.extra_body.stop[1]"),
        ("extra_body = { until = 2026-01-31 }", "$.llm.extra_body.until"),
    ],
)
def test_a_value_json_cannot_carry_is_a_usage_error(
    tmp_path: Path, openai_server: OpenAIServer, llm: str, where: str
) -> None:
    path = write(tmp_path, llm=llm)
    result = sopbus("run", path, "--base-url", openai_server.base_url, cwd=tmp_path, env=ENV)

    assert result.returncode == 2, result.stderr
    assert where in result.stderr and "team.toml" in result.stderr
    assert openai_server.requests == []


def ask(**extra: Any) -> LLMRequest:
    return LLMRequest(
        messages=(ChatMessage("system", "You write."), ChatMessage("user", "A haiku.")),
        model="gpt-4o-mini",
        max_tokens=100,
        **extra,
    )


def test_a_request_without_extra_body_keys_as_before_and_one_with_it_differs() -> None:
    plain = ask()
    # The key as recordings made before extra_body existed computed it.
    before = msgspec.json.encode(
        [list(plain.messages), plain.model, plain.temperature, plain.max_tokens, None, None,
         plain.output_mode],
        order="sorted",
    )  # fmt: skip
    assert request_key(plain) == hashlib.sha256(before).hexdigest()
    assert request_key(ask(extra_body={})) == request_key(plain)
    sampled = request_key(ask(extra_body={"repeat_penalty": 1.3}))
    assert sampled != request_key(plain)
    assert sampled != request_key(ask(extra_body={"repeat_penalty": 1.1}))
