"""Reservations bounded by the server's own token count, where it counts (issue 26: 1,009
tokens reserved for a prompt billed at 141), and the fallback to sopbus's bound where it
cannot: against the tests' OpenAI-compatible server, which has no ``/tokenize`` (404, as
OpenAI's API), and with a vLLM-style ``/tokenize`` route. The real llama.cpp server's counts
are checked in test_llama_real.py.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import trio

from sopbus._assemble import execute
from sopbus.bus import Budget, ChatMessage, LLMRequest, load_scenario
from sopbus.bus.llm import Gateway, OpenAIProvider
from sopbus.bus.llm._server_tokens import with_margin
from sopbus.bus.llm._tokens import count_prompt, prompt_upper_bound
from sopbus.bus.money._prices import PriceBook
from support.openai_server import Answer, OpenAIServer
from support.teams import pipeline

MODEL = "local-model"  # a model whose tokenizer sopbus does not know: the byte bound
PRICES = PriceBook.load({MODEL: {"input": "1", "output": "0"}})


def request(text: str, **kw: Any) -> LLMRequest:
    messages = (ChatMessage("system", "You are terse."), ChatMessage("user", text))
    return LLMRequest(messages=messages, model=MODEL, max_tokens=10, **kw)


async def reserved(server: OpenAIServer, requests: list[LLMRequest], *, tokenize: bool) -> list:
    """The prompt part of each request's reservation (price 1 per 1M input, 0 output)."""
    amounts: list[Decimal] = []

    class Journal:
        batches = False

        def reserved(
            self,
            request: LLMRequest,
            *,
            round: int,
            attempt: int,
            amount: Decimal,
            provider: str = "",
            calls: int = 0,
        ) -> int:
            amounts.append(amount * 1_000_000)
            return len(amounts)

        def closed(self, *args: Any, **batch: Any) -> None:
            pass

    provider = OpenAIProvider(base_url=server.base_url, api_key="k", tokenize=tokenize)
    async with provider:
        counter = provider.prompt_tokens if provider.tokenize else None
        gateway = Gateway(provider, PRICES, Budget(Decimal(1)), journal=Journal(), counter=counter)
        for each in requests:
            await gateway.complete(each, round=1)
    return amounts


async def test_a_server_without_tokenize_is_asked_once_and_the_bound_holds() -> None:
    asked = [request("a haiku about tea"), request("and one about coffee"), request("more")]
    with OpenAIServer() as server:
        amounts = await reserved(server, asked, tokenize=True)
        probes = [r.path for r in server.elsewhere]
    assert amounts == [prompt_upper_bound(r) for r in asked]
    # One probe of each endpoint on the first call; the later calls ask nothing more.
    assert probes == ["/apply-template", "/tokenize"]


async def test_tokenize_off_asks_nothing() -> None:
    with OpenAIServer() as server:
        amounts = await reserved(server, [request("a haiku")], tokenize=False)
        assert server.elsewhere == []
    assert amounts == [prompt_upper_bound(request("a haiku"))]


async def test_a_vllm_style_count_bounds_the_reservation_and_is_cached() -> None:
    asked = request("a haiku about tea")
    with OpenAIServer() as server:
        server.routes["/tokenize"] = lambda body: (200, {"count": 7 * len(body["messages"])})
        server.script(Answer("tea", prompt_tokens=14, completion_tokens=2))
        amounts = await reserved(server, [asked, asked], tokenize=True)
        tokenize = [r.body for r in server.elsewhere if r.path == "/tokenize"]
    assert amounts == [with_margin(14), with_margin(14)]
    assert with_margin(14) < prompt_upper_bound(asked)
    # vLLM counts the messages with the generation prompt; the retry of the same body is cached.
    assert len(tokenize) == 1
    assert tokenize[0]["add_generation_prompt"] is True
    assert [m["content"] for m in tokenize[0]["messages"]] == [
        "You are terse.",
        "a haiku about tea",
    ]


async def test_a_count_above_the_bound_keeps_the_bound() -> None:
    asked = request("tea")
    with OpenAIServer() as server:
        server.routes["/tokenize"] = lambda body: (200, {"count": 10_000})
        amounts = await reserved(server, [asked], tokenize=True)
    assert amounts == [prompt_upper_bound(asked)]


def test_tokenize_false_in_the_scenario_file_reaches_the_run(tmp_path: Path) -> None:
    path = tmp_path / "team.toml"
    with OpenAIServer() as server:
        llm = {"provider": "openai", "base_url": server.base_url, "tokenize": False}
        path.write_text(pipeline(("Dora", "Draft"), run={"runs_dir": str(tmp_path)}, llm=llm))
        outcome = trio.run(lambda: execute(load_scenario(path), environ={"OPENAI_API_KEY": "k"}))
        assert server.elsewhere == []
        assert len(server.requests) == 1
    assert outcome.summary.end_reason == "idle"
    assert "tokenize = false" in (outcome.run_dir / "scenario.toml").read_text()


SCHEMA = {
    "type": "object",
    "properties": {f"field_{n}": {"type": "string", "description": "x" * 40} for n in range(8)},
}


async def test_usage_is_believed_against_the_servers_count_not_sopbus_own() -> None:
    """A server that enforces a schema by grammar bills no prompt tokens for it; sopbus's own
    count adds the schema (as OpenAI bills it), and would call the usage too small to be true."""
    asked = request("tea", schema=SCHEMA)
    with OpenAIServer() as server:
        server.routes["/tokenize"] = lambda body: (200, {"count": 20})
        server.script(
            Answer("{}", prompt_tokens=20, completion_tokens=2),
            Answer("{}", prompt_tokens=3, completion_tokens=2),  # below half the server's count
        )
        provider = OpenAIProvider(base_url=server.base_url, api_key="k")
        async with provider:
            gateway = Gateway(provider, PRICES, Budget(Decimal(1)), counter=provider.prompt_tokens)
            believed = await gateway.complete(asked, round=1)
            corrected = await gateway.complete(asked, round=1)
    assert count_prompt(asked) > 2 * 20  # sopbus's count takes the schema as prompt
    assert believed.usage.prompt_tokens == 20
    assert corrected.usage.prompt_tokens == with_margin(20)  # booked at its reservation


async def test_without_a_count_a_schema_by_grammar_is_not_taken_for_a_lie() -> None:
    """Ollama (no /tokenize) enforces a schema by grammar too: a prompt billed without it is
    believed; one below half of its messages is not."""
    asked = request("tea", schema=SCHEMA)
    with OpenAIServer() as server:
        server.script(
            Answer("{}", prompt_tokens=15, completion_tokens=2),
            Answer("{}", prompt_tokens=3, completion_tokens=2),
        )
        async with OpenAIProvider(base_url=server.base_url, api_key="k") as provider:
            gateway = Gateway(provider, PRICES, Budget(Decimal(1)), counter=provider.prompt_tokens)
            believed = await gateway.complete(asked, round=1)
            corrected = await gateway.complete(asked, round=1)
    assert count_prompt(asked) > 2 * 15  # with the schema, 15 would look too small
    assert believed.usage.prompt_tokens == 15
    assert corrected.usage.prompt_tokens == prompt_upper_bound(asked)
