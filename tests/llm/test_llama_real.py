"""Runs against llama.cpp's own server with a small real model (SmolLM2-135M), end to end
through the command line: the accounting checked against the server's own counters.

One server serves the whole session (the ``llama`` fixture; the build comes from
``.ci/llama-server``). The model's text is never asserted on, only what sopbus did with it:
ledger tokens equal the server's ``/metrics`` counters, costs are exact at a non-zero price,
every reservation is at least the prompt the server billed (and far below the byte bound),
cut answers are recorded as such, a prompt past the context fails at $0 naming ``n_ctx``,
and a replay of a real run is the same run, at $0, without the server. Temperature 0 and a
seed; ``max_tokens`` stays small, so the whole file takes about a minute on 2 cores.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import msgspec
import pytest

from sopbus.bus import ChatMessage, LLMRequest, read_jsonl
from sopbus.bus._protocol import ToolSpec
from sopbus.bus.llm import OpenAIProvider
from sopbus.bus.llm._tokens import prompt_upper_bound
from support.cli import sopbus
from support.llama_server import MODEL, SLOT_CTX, LlamaServer, running_llama
from support.teams import pipeline

IN, OUT, CACHED = Decimal(1), Decimal(2), Decimal("0.5")  # --price, USD per 1M tokens
PRICE = "1,2,0.5"
ENV = {"OPENAI_API_KEY": "x"}
LLM = {"temperature": 0.0, "max_attempts": 1, "extra_body": {"repeat_penalty": 1.3}}
pytestmark = pytest.mark.slow


def run(tmp: Path, llama: LlamaServer, text: str, *extra: str) -> tuple[Any, Path]:
    """``sopbus run`` of the scenario ``text`` against the server; the process and its run."""
    path = tmp / "team.toml"
    path.write_text(text)
    done = sopbus(
        "run", path, "--provider", "openai", "--base-url", llama.base_url, "--model", MODEL,
        "--price", PRICE, "--runs-dir", tmp / "runs", "--quiet", *extra,
        cwd=tmp, env=ENV, timeout=180,
    )  # fmt: skip
    (run_dir,) = (tmp / "runs").iterdir()
    return done, run_dir


def ledger(run_dir: Path) -> list[dict[str, Any]]:
    return list(read_jsonl(run_dir / "costs.jsonl"))


def events(run_dir: Path, kind: str) -> list[dict[str, Any]]:
    return [e for e in read_jsonl(run_dir / "events.jsonl") if e["kind"] == kind]


def cost(line: dict[str, Any]) -> Decimal:
    prompt, cached = line["prompt_tokens"], line["cached_tokens"]
    billed = (prompt - cached) * IN + cached * CACHED + line["completion_tokens"] * OUT
    return billed / 1_000_000


@pytest.fixture(scope="module")
def team_run(
    llama: LlamaServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Any, Path, tuple[int, int, int]]]:
    """A writer whose free text is cut at 16 tokens, then a checker whose structured answer
    (json_schema, a grammar on the server) fits in 32; what the server billed meanwhile."""
    tmp = tmp_path_factory.mktemp("team")
    text = pipeline(
        ("Dora", "Draft"),
        ("Chet", "Check"),
        idea="Write a long story about a tea house, at least 500 words.",
        llm={"max_tokens": 32, **LLM},
        role_llm={"Dora": {"max_tokens": 16}},
        outputs={"Check": {"ready": "bool"}},
        run={"budget_usd": 1.0},
    )
    before = llama.billed()
    done, run_dir = run(tmp, llama, text)
    after = llama.billed()
    yield done, run_dir, tuple(a - b for a, b in zip(after, before, strict=True))  # type: ignore[misc]


def test_the_ledger_is_what_the_server_billed_and_costs_are_exact(team_run: Any) -> None:
    done, run_dir, (prompt, completion, cached) = team_run
    assert done.returncode == 0, done.stderr
    lines = ledger(run_dir)
    assert [(x["role"], x["outcome"]) for x in lines] == [("Dora", "ok"), ("Chet", "ok")]
    assert sum(x["prompt_tokens"] for x in lines) == prompt
    assert sum(x["completion_tokens"] for x in lines) == completion
    assert sum(x["cached_tokens"] for x in lines) == cached
    assert all(Decimal(x["cost_usd"]) == cost(x) for x in lines)
    assert not any(x.get("estimated") or x.get("corrected") for x in lines)
    assert Decimal(lines[-1]["total_usd"]) == sum(cost(x) for x in lines) > 0
    assert {x["price_source"] for x in lines} == {"command-line"}


def test_a_cut_answer_is_recorded_with_its_real_output(team_run: Any) -> None:
    _, run_dir, _ = team_run
    draft, check = ledger(run_dir)
    assert (draft["finish_reason"], draft["completion_tokens"]) == ("length", 16)
    assert check["finish_reason"] == "stop"  # the structured answer is whole
    (cut,) = events(run_dir, "answer_cut")
    assert cut["role"] == "Dora"
    sent = events(run_dir, "message_published") + events(run_dir, "message_undelivered")
    published = {e["message"]["cause_by"]: e["message"] for e in sent}
    assert published["Draft"]["content"].strip() and published["Draft"].get("cut") is True
    assert "cut" not in published["Check"]
    assert isinstance(published["Check"]["payload"]["ready"], bool)


def test_every_reservation_holds_the_billed_prompt(team_run: Any) -> None:
    _, run_dir, _ = team_run
    held = {
        e["data"]["call"]: Decimal(e["data"]["amount"]) for e in events(run_dir, "llm_reserved")
    }
    calls = list(read_jsonl(run_dir / "calls.jsonl"))
    assert len(held) == len(calls) == 2
    for call, max_tokens in zip(calls, (16, 32), strict=True):
        prompt_bound = held[call["call"]] * 1_000_000 / IN - max_tokens * OUT / IN
        billed = call["completion"]["usage"]["prompt_tokens"]
        assert billed <= prompt_bound <= billed + 16  # the server's count, and its margin


def test_verify_is_intact_and_a_replay_is_the_same_run_at_no_cost_without_the_server(
    team_run: Any, llama: LlamaServer, tmp_path: Path
) -> None:
    _, run_dir, _ = team_run
    verified = sopbus("verify", run_dir, cwd=tmp_path, env=ENV)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "NOT intact" not in verified.stdout
    before = llama.billed()
    gone = {**ENV, "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}  # nothing listens on port 9
    replayed = sopbus("replay", run_dir, "--into", tmp_path, "--quiet", cwd=tmp_path, env=gone)
    assert replayed.returncode == 0, replayed.stderr
    assert llama.billed() == before  # the server was not asked
    (again,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert {x["outcome"] for x in ledger(again)} == {"replayed"}
    assert sum(Decimal(x["cost_usd"]) for x in ledger(again)) == 0
    diff = sopbus("diff", run_dir, again, cwd=tmp_path, env=ENV)
    assert diff.returncode == 0, diff.stdout + diff.stderr


def test_a_structured_answer_cut_at_max_tokens_fails_at_once(
    llama: LlamaServer, tmp_path: Path
) -> None:
    text = pipeline(
        ("Sam", "Summarize"),
        llm={"max_tokens": 5, **LLM},
        outputs={"Summarize": {"title": "str", "summary": "str"}},
    )
    before = llama.billed()
    done, run_dir = run(tmp_path, llama, text)
    assert done.returncode == 1
    (line,) = ledger(run_dir)  # no repair: it would be cut again
    assert (line["finish_reason"], line["completion_tokens"]) == ("length", 5)
    assert llama.billed()[1] - before[1] == 5
    (ended,) = events(run_dir, "run_ended")
    assert "cut at max_tokens = 5" in ended["detail"]


def test_a_prompt_past_the_context_fails_at_no_cost_naming_n_ctx(
    llama: LlamaServer, tmp_path: Path
) -> None:
    idea = "tea and cake " * SLOT_CTX  # some 3 tokens a repeat: past a slot's context
    text = pipeline(("Dora", "Draft"), idea=idea, llm={"max_tokens": 8, **LLM})
    done, run_dir = run(tmp_path, llama, text)
    assert done.returncode == 1
    said = done.stdout + done.stderr
    assert "n_ctx" in said and str(SLOT_CTX) in said
    assert [(x["outcome"], Decimal(x["cost_usd"])) for x in ledger(run_dir)] == [("error", 0)]


@pytest.mark.parametrize("schema", [None, {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}])  # fmt: skip
async def test_the_server_count_is_an_exact_upper_bound_far_below_the_byte_bound(
    llama: LlamaServer, schema: dict[str, Any] | None
) -> None:
    history = tuple(
        ChatMessage(role, f"Turn {n}: the tea house opens at {n} o'clock, said {role}.")
        for n, role in enumerate(["user", "assistant"] * 4 + ["user"])
    )  # ending with the user's turn: a last assistant turn is one the server continues
    asked = LLMRequest(
        messages=(ChatMessage("system", "You are a terse clerk."), *history),
        model=MODEL,
        temperature=0.0,
        max_tokens=1,
        schema=schema,
    )
    async with OpenAIProvider(base_url=llama.base_url, api_key="x") as provider:
        counted = await provider.prompt_tokens(asked)
        answer = await provider.complete(asked)
    billed = answer.usage.prompt_tokens
    assert counted == billed  # the server's count of the rendered prompt is what it bills
    assert prompt_upper_bound(asked) > 2 * counted  # what the reservation took before
    print(json.dumps({"billed": billed, "counted": counted, "bytes": prompt_upper_bound(asked)}))


def test_without_the_build_a_test_skips_with_the_command_and_fails_in_ci(tmp_path: Path) -> None:
    from support.llama_server import BUILD, running_llama

    empty = {"SOPBUS_LLAMA_HOME": str(tmp_path / "none")}
    with pytest.raises(pytest.skip.Exception) as skipped:
        next(running_llama(tmp_path, empty))
    assert BUILD in str(skipped.value)
    with pytest.raises(pytest.fail.Exception, match="in CI") as failed:
        next(running_llama(tmp_path, {**empty, "CI": "true"}))
    assert BUILD in str(failed.value)


@pytest.fixture
def fresh_llama(tmp_path: Path) -> Iterator[LlamaServer]:
    """A server of its own, started for one test: its slots hold no cached prompt."""
    yield from running_llama(tmp_path)


async def test_a_required_tool_call_comes_back_under_its_full_name_as_billed(
    fresh_llama: LlamaServer,
) -> None:
    # A prompt this model answers with a whole call at temperature 0; under "auto" it never
    # calls one, and under "required" this llama.cpp still lets it write text first. The
    # answer is the same every time only from an empty cache: on the shared server a slot
    # that still holds an earlier prompt's prefix (4 tokens of the chat template) evaluates
    # the rest in another batch shape, the logits move, and the greedy path can turn to text.
    llama = fresh_llama
    clock = ToolSpec(
        name="time.get_current_time",
        description="Get the current time in a timezone",
        parameters={
            "type": "object",
            "properties": {
                "timezone": {"type": "string", "description": "IANA timezone name, e.g. Asia/Tokyo"}
            },
            "required": ["timezone"],
        },
    )
    asked = LLMRequest(
        messages=(
            ChatMessage("system", "You answer only with a tool call."),
            ChatMessage("user", "What time is it in Asia/Tokyo? Answer with a <tool_call>."),
        ),
        model=MODEL,
        temperature=0.0,
        max_tokens=128,
        tools=(clock,),
        tool_choice="required",
    )
    before = llama.billed()
    async with OpenAIProvider(base_url=llama.base_url, api_key="x") as provider:
        answer = await provider.complete(asked)
    after = llama.billed()
    assert answer.tool_calls, answer.text
    for call in answer.tool_calls:
        assert call.name == "time.get_current_time" and call.id  # the wire name mapped back
        assert isinstance(json.loads(call.arguments), dict)
    assert answer.finish_reason == "tool_calls"
    usage = answer.usage
    assert (usage.prompt_tokens, usage.completion_tokens) == (
        after[0] - before[0],
        after[1] - before[1],
    )
    plain = msgspec.structs.replace(asked, tools=(), tool_choice=None)
    assert prompt_upper_bound(asked) > prompt_upper_bound(plain)  # the tools are bounded too
