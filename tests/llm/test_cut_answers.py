"""Answers cut at max_tokens (finish_reason "length"), against a real OpenAI-compatible server.

Issue 26: 35 of 146 real requests were cut and sopbus never noticed; a cut structured answer
was sent back as a repair with the same max_tokens, cut again, and cost three times.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from sopbus._assemble import execute
from sopbus.bus import (
    ChatMessage,
    LLMRequest,
    Message,
    RunRecord,
    load_scenario,
    read_events,
    read_jsonl,
)
from sopbus.bus.llm import SimProvider
from sopbus.cli import main
from sopbus.roles.chat._camel import INSTRUCT, SOLVE, TASK_DONE
from sopbus.sops.builtin.camel_roleplay import task_done
from support.openai_server import Answer, OpenAIServer, Raw
from support.sop_runs import events, messages
from support.teams import pipeline

KEY = {"OPENAI_API_KEY": "sk-test"}


def run_team(tmp_path: Path, server: OpenAIServer, *, stream: bool, outputs: Any = None) -> Any:
    path = tmp_path / "team.toml"
    llm = {
        "provider": "openai",
        "base_url": server.base_url,
        "max_tokens": 400,
        "max_attempts": 1,
        "stream": stream,
    }
    path.write_text(
        pipeline(
            ("Dora", "Draft"), run={"runs_dir": str(tmp_path / "runs")}, llm=llm, outputs=outputs
        )
    )
    return trio.run(lambda: execute(load_scenario(path), environ=KEY))


@pytest.mark.parametrize("stream", [False, True])
def test_a_cut_structured_answer_fails_at_once_naming_max_tokens(
    openai_server: OpenAIServer, tmp_path: Path, stream: bool
) -> None:
    openai_server.script(Answer('{"title": "Steam ris', finish_reason="length"))
    outcome = run_team(tmp_path, openai_server, stream=stream, outputs={"Draft": {"title": "str"}})
    assert outcome.summary.end_reason == "error"
    assert len(openai_server.requests) == 1  # no repair: it would be cut again
    lines = list(read_jsonl(outcome.run_dir / "costs.jsonl"))
    assert [(line["outcome"], line.get("finish_reason")) for line in lines] == [("ok", "length")]
    (called,) = events(outcome, "llm_called")
    assert called["call"]["finish_reason"] == "length"
    said = json.dumps(events(outcome))
    assert "cut at max_tokens = 400 (finish_reason length)" in said
    assert "raise max_tokens for Dora's Draft" in said
    assert "llm = { max_tokens = ... }" in said


def test_a_whole_answer_records_stop_and_replays_it(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    openai_server.script(Answer('{"title": "Steam rises"}'))
    outcome = run_team(tmp_path, openai_server, stream=False, outputs={"Draft": {"title": "str"}})
    assert outcome.summary.end_reason == "idle"
    (line,) = read_jsonl(outcome.run_dir / "costs.jsonl")
    assert line["finish_reason"] == "stop"
    (call,) = read_jsonl(outcome.run_dir / "calls.jsonl")
    assert call["completion"]["finish_reason"] == "stop"


def test_the_simulator_says_length_when_it_cut_an_answer() -> None:
    sim = SimProvider()
    prompt = (ChatMessage("user", "Write a long essay about tea. " * 40),)

    async def ask(max_tokens: int) -> str | None:
        request = LLMRequest(messages=prompt, model="gpt-4o-mini", max_tokens=max_tokens)
        return (await sim.complete(request)).finish_reason

    assert trio.run(ask, 3) == "length"
    assert trio.run(ask, 4000) == "stop"


@pytest.mark.parametrize("stream", [False, True])
def test_a_cut_free_text_answer_is_flagged_on_its_message(
    openai_server: OpenAIServer, tmp_path: Path, stream: bool
) -> None:
    openai_server.script(Answer("Steam rises from the", finish_reason="length"))
    outcome = run_team(tmp_path, openai_server, stream=stream)
    assert outcome.summary.end_reason == "idle"
    (draft,) = [m for m in messages(outcome) if m["cause_by"] == "Draft"]
    assert draft["cut"] is True and draft["content"] == "Steam rises from the"
    (cut,) = events(outcome, "answer_cut")
    assert (cut["role"], cut["data"]) == ("Dora", {"action": "Draft", "max_tokens": 400})


def test_a_whole_free_text_answer_is_not_flagged(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    openai_server.script(Answer("Steam rises from the cup."))
    outcome = run_team(tmp_path, openai_server, stream=False)
    (draft,) = [m for m in messages(outcome) if m["cause_by"] == "Draft"]
    assert "cut" not in draft
    assert events(outcome, "answer_cut") == []


def camel_record(*, cut: bool) -> RunRecord:
    said = [
        Message(cause_by=INSTRUCT, sent_from="User", content="Instruction: write a haiku"),
        Message(cause_by=SOLVE, sent_from="Assistant", content="Solution: Steam ris", cut=cut),
        Message(cause_by=INSTRUCT, sent_from="User", content=TASK_DONE),
    ]
    return RunRecord(end_reason="stop_condition", messages=tuple(said))


def test_camel_does_not_pass_a_task_whose_last_solution_was_cut() -> None:
    assert task_done(camel_record(cut=False)).passed
    verdict = task_done(camel_record(cut=True))
    assert not verdict.passed
    assert "cut at max_tokens" in verdict.reason and "Assistant" in verdict.reason


CONTEXT_FULL = json.dumps(
    {
        "error": {
            "code": 400,
            "message": "request (2400 tokens) exceeds the available context size (2048 tokens)",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": 2400,
            "n_ctx": 2048,
        }
    }
).encode()


def test_a_repair_past_the_servers_context_ends_the_action_naming_n_ctx(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    openai_server.script(
        Answer("not json at all"), Raw(CONTEXT_FULL, "application/json", 400), Answer("{}")
    )
    outcome = run_team(tmp_path, openai_server, stream=False, outputs={"Draft": {"title": "str"}})
    assert outcome.summary.end_reason == "error"
    assert len(openai_server.requests) == 2  # no further repair, no retry of the 400
    lines = list(read_jsonl(outcome.run_dir / "costs.jsonl"))
    assert [(line["outcome"], line.get("status")) for line in lines] == [
        ("ok", None),
        ("error", 400),
    ]
    said = json.dumps(events(outcome))
    assert "n_ctx = 2048" in said and "a prompt of 2400 tokens" in said
    assert "lower max_tokens ([llm].max_tokens" in said and "--ctx-size" in said


def test_a_replay_reproduces_the_cut_at_no_request(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    openai_server.script(Answer("Steam rises from the", finish_reason="length"))
    original = run_team(tmp_path, openai_server, stream=False).run_dir
    into = tmp_path / "replay"
    assert main(["replay", str(original), "--into", str(into), "--quiet"]) == 0
    assert len(openai_server.requests) == 1  # the replay asked nobody
    (replay,) = into.iterdir()
    (line,) = read_jsonl(replay / "costs.jsonl")
    assert (line["outcome"], line["finish_reason"]) == ("replayed", "length")
    found = list(read_events(replay / "events.jsonl"))
    said = [e["message"] for e in found if e["kind"].startswith("message_")]
    (draft,) = [m for m in said if m["cause_by"] == "Draft"]
    assert draft["cut"] is True
    assert [e["data"]["action"] for e in found if e["kind"] == "answer_cut"] == ["Draft"]
