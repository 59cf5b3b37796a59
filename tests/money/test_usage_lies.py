"""A server whose usage is too small to be true cannot run past the cap (issue 28, items 1-2).

Each test runs a ping-pong team (two roles answering each other for up to 200 rounds) with
``sopbus run --provider openai`` against the real test server, which answers every call
with the same text and a usage that lies low: zeros, no completion tokens, cached tokens
far above the prompt. Checked as a user would: the run stops at the cap (exit 3), the ledger
totals at least what the calls really cost at sopbus's own token count, and every lying
call is flagged in the ledger and in the event log.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from sopbus.bus import ChatMessage, LedgerLine, LLMRequest, PriceBook, Usage, read_jsonl
from sopbus.bus.llm._tokens import count_prompt, count_text
from support.cli import sopbus
from support.openai_server import Answer, OpenAIServer

CAP = Decimal("0.0005")
MODEL = "gpt-4o-mini"
PRICE = PriceBook.load({}).price(MODEL)
TEXT = "Pong! " * 40 + "Your move: tell me about the tea you would serve at a rose night."

PING_PONG = f"""
[scenario]
name = "ping-pong"
idea = "Play ping-pong with words."

[run]
max_rounds = 200
budget_usd = {CAP}

[llm]
provider = "openai"
model = "{MODEL}"
max_tokens = 200

[actions.Ping]
instruction = "Answer the last message."

[actions.Pong]
instruction = "Answer the last message."

[[roles]]
name = "Pinger"
watch = ["UserRequirement", "Pong"]
actions = ["Ping"]

[[roles]]
name = "Ponger"
watch = ["Ping"]
actions = ["Pong"]
"""


@dataclass
class Run:
    code: int
    stderr: str
    summary: dict[str, Any]
    lines: list[LedgerLine]
    events: list[dict[str, Any]]
    true_cost: Decimal
    log: str


def ping_pong(tmp: Path, server: OpenAIServer, answer: Callable[[dict[str, Any]], Answer]) -> Run:
    server.script(answer)
    path = tmp / "ping_pong.toml"
    path.write_text(PING_PONG, encoding="utf-8")
    result = sopbus(
        "run",
        path,
        "--base-url",
        server.base_url,
        "--runs-dir",
        tmp / "runs",
        "--quiet",
        cwd=tmp,
        env={"OPENAI_API_KEY": "sk-test-usage"},
    )
    (run_dir,) = (tmp / "runs").iterdir()
    return Run(
        result.returncode,
        result.stderr,
        json.loads((run_dir / "summary.json").read_text()),
        list(read_jsonl(run_dir / "costs.jsonl", LedgerLine)),
        list(read_jsonl(run_dir / "events.jsonl")),
        sum((true_cost(r.body) for r in server.requests), Decimal(0)),
        (run_dir / "run.log").read_text(),
    )


def counted(body: dict[str, Any]) -> Usage:
    """sopbus's own count of the call of ``body`` answered with TEXT."""
    request = LLMRequest(
        messages=tuple(ChatMessage(m["role"], m["content"]) for m in body["messages"]),
        model=body["model"],
        max_tokens=200,
    )
    return Usage(count_prompt(request), count_text(TEXT, MODEL))


def true_cost(body: dict[str, Any]) -> Decimal:
    """What the call of ``body`` costs at sopbus's own count, nothing served from a cache."""
    return PRICE.cost(counted(body))


LIES: dict[str, Callable[[dict[str, Any]], Answer]] = {
    "zero usage": lambda body: Answer(TEXT, prompt_tokens=0, completion_tokens=0),
    "no completion tokens": lambda body: Answer(
        TEXT, prompt_tokens=counted(body).prompt_tokens, completion_tokens=None
    ),
    "no counts at all": lambda body: Answer(TEXT, prompt_tokens=None, completion_tokens=None),
    "cached above the prompt": lambda body: Answer(
        TEXT,
        prompt_tokens=counted(body).prompt_tokens,
        completion_tokens=counted(body).completion_tokens,
        cached_tokens=10**9,
    ),
}


@pytest.mark.parametrize("lie", LIES, ids=list(LIES))
def test_usage_too_small_to_be_true_is_booked_at_sopbus_count_and_the_cap_holds(
    tmp_path: Path, openai_server: OpenAIServer, lie: str
) -> None:
    run = ping_pong(tmp_path, openai_server, LIES[lie])

    assert run.code == 3, run.stderr
    assert run.summary["end_reason"] == "budget_exhausted"
    total = Decimal(run.summary["total_usd"])
    assert total <= CAP
    assert total >= run.true_cost > 0
    answered = [line for line in run.lines if line.outcome == "ok"]
    assert len(answered) == len(openai_server.requests) < 200
    for line in answered:
        assert line.estimated and line.corrected
        assert line.cached_tokens <= line.prompt_tokens
    called = [e["call"] for e in run.events if e["kind"] == "llm_called"]
    assert [c.get("corrected") for c in called if c["outcome"] == "ok"] == [
        line.corrected for line in answered
    ]
    assert "Usage not believed" in run.log


def test_honest_usage_is_believed_and_not_flagged(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    def honest(body: dict[str, Any]) -> Answer:
        usage = counted(body)
        return Answer(TEXT, usage.prompt_tokens, usage.completion_tokens, cached_tokens=8)

    run = ping_pong(tmp_path, openai_server, honest)

    assert run.code == 3, run.stderr
    answered = [line for line in run.lines if line.outcome == "ok"]
    assert answered and not any(line.estimated or line.corrected for line in answered)
    assert all(line.cached_tokens == 8 for line in answered)
    assert "Usage not believed" not in run.log
