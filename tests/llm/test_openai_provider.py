"""The openai provider through the Gateway, against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from pydantic import BaseModel

from sopbus.bus import (
    Budget,
    ChatMessage,
    ConfigError,
    Gateway,
    LedgerLine,
    LLMRequest,
    OpenAIProvider,
    PriceBook,
    ProviderError,
    openai_settings_from_env,
)
from sopbus.bus.llm._request import strict_schema
from support.openai_server import Answer, Fail, OpenAIServer, Slow

PRICES = PriceBook.load()


class Design(BaseModel):
    title: str
    modules: list[str]


def ask(schema: dict[str, Any] | None = None, output_mode: str = "json_schema") -> LLMRequest:
    return LLMRequest(
        messages=(
            ChatMessage("system", "You are an architect."),
            ChatMessage("user", "Design a todo app."),
        ),
        model="gpt-4o-mini",
        max_tokens=300,
        schema=schema,
        schema_name="Design",
        output_mode=output_mode,  # type: ignore[arg-type]
        role="Bob",
        action="WriteDesign",
    )


async def run(
    openai_server: OpenAIServer,
    request: LLMRequest,
    *,
    stream: bool = False,
    timeout_s: float = 10.0,
) -> tuple[str, list[LedgerLine], list[float]]:
    lines: list[LedgerLine] = []
    delays: list[float] = []

    async def sleep(seconds: float) -> None:
        delays.append(seconds)

    async with OpenAIProvider(
        base_url=openai_server.base_url,
        api_key="sk-test-secret",
        timeout_s=timeout_s,
        stream=stream,
    ) as provider:
        gw = Gateway(provider, PRICES, Budget(Decimal("1")), sink=lines.append, sleep=sleep)
        completion = await gw.complete(request, round=1)
    return completion.text, lines, delays


async def test_plain_answer_ledgers_the_servers_usage_exactly(openai_server: OpenAIServer) -> None:
    openai_server.script(
        Answer("Use three modules.", prompt_tokens=1234, completion_tokens=56, cached_tokens=1000)
    )
    text, lines, _ = await run(openai_server, ask())
    assert text == "Use three modules."
    (line,) = lines
    assert (line.prompt_tokens, line.completion_tokens, line.cached_tokens) == (1234, 56, 1000)
    assert (
        line.cost_usd
        == (234 * Decimal("0.15") + 1000 * Decimal("0.075") + 56 * Decimal("0.60")) / 10**6
    )
    (got,) = openai_server.requests
    assert got.path == "/v1/chat/completions"
    assert got.headers["authorization"] == "Bearer sk-test-secret"
    assert got.body["model"] == "gpt-4o-mini" and got.body["max_completion_tokens"] == 300
    assert got.body["messages"][1] == {"role": "user", "content": "Design a todo app."}
    assert "response_format" not in got.body and "stream" not in got.body


async def test_streaming_takes_usage_from_the_last_chunk(openai_server: OpenAIServer) -> None:
    openai_server.script(
        Answer("A streamed design in pieces.", prompt_tokens=321, completion_tokens=9, chunks=4)
    )
    text, lines, _ = await run(openai_server, ask(), stream=True)
    assert text == "A streamed design in pieces."
    assert (lines[0].prompt_tokens, lines[0].completion_tokens) == (321, 9)
    body = openai_server.requests[0].body
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}


async def test_json_schema_is_sent_strict_when_the_schema_allows(
    openai_server: OpenAIServer,
) -> None:
    openai_server.script(
        Answer(
            '{"title": "Todo", "modules": ["api", "ui"]}', prompt_tokens=77, completion_tokens=15
        )
    )
    text, lines, _ = await run(openai_server, ask(Design.model_json_schema()))
    assert Design.model_validate_json(text) == Design(title="Todo", modules=["api", "ui"])
    response_format = openai_server.requests[0].body["response_format"]
    assert response_format["type"] == "json_schema"
    assert response_format["json_schema"]["name"] == "Design"
    assert response_format["json_schema"]["strict"] is True
    assert response_format["json_schema"]["schema"]["additionalProperties"] is False
    assert lines[0].prompt_tokens == 77


async def test_prompt_mode_writes_the_schema_into_the_system_prompt(
    openai_server: OpenAIServer,
) -> None:
    openai_server.script(Answer('{"title": "T", "modules": []}'))
    await run(openai_server, ask(Design.model_json_schema(), output_mode="prompt"))
    body = openai_server.requests[0].body
    assert "response_format" not in body
    system = body["messages"][0]["content"]
    assert (
        system.startswith("You are an architect.")
        and '"modules"' in system
        and "JSON schema" in system
    )


async def test_429_with_retry_after_then_success(openai_server: OpenAIServer) -> None:
    openai_server.script(
        Fail(429, {"retry-after": "7"}), Answer("ok", prompt_tokens=40, completion_tokens=2)
    )
    text, lines, delays = await run(openai_server, ask())
    assert text == "ok" and delays == [7.0]
    assert [(ln.outcome, ln.attempt, ln.prompt_tokens, ln.cost_usd) for ln in lines] == [
        ("error", 1, 0, Decimal(0)),
        ("ok", 2, 40, (40 * Decimal("0.15") + 2 * Decimal("0.60")) / 10**6),
    ]
    assert len(openai_server.requests) == 2  # the SDK did not retry on its own


async def test_500_then_success(openai_server: OpenAIServer) -> None:
    openai_server.script(Fail(500), Answer("fine", prompt_tokens=12, completion_tokens=1))
    text, lines, delays = await run(openai_server, ask())
    assert text == "fine" and delays == [0.5]
    assert [ln.outcome for ln in lines] == ["error", "ok"] and len(openai_server.requests) == 2


async def test_a_timeout_is_retried_and_gives_up_after_max_attempts(
    openai_server: OpenAIServer,
) -> None:
    openai_server.script(Slow(30, Answer("late")))
    with pytest.raises(ProviderError, match="timed out") as info:
        await run(openai_server, ask(), timeout_s=0.3)
    assert info.value.retryable and len(openai_server.requests) == 3


async def test_a_400_is_not_retried(openai_server: OpenAIServer) -> None:
    openai_server.script(Fail(400, message="bad schema"))
    with pytest.raises(ProviderError, match="HTTP 400") as info:
        await run(openai_server, ask())
    assert not info.value.retryable and len(openai_server.requests) == 1


async def test_an_unknown_model_reaches_no_server(openai_server: OpenAIServer) -> None:
    request = LLMRequest(messages=(ChatMessage("user", "hi"),), model="gpt-4o-mimi")
    with pytest.raises(ConfigError, match="gpt-4o-mini"):
        await run(openai_server, request)
    assert openai_server.requests == []


async def test_no_key_is_a_config_error_and_the_key_never_shows() -> None:
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        async with OpenAIProvider(base_url="http://127.0.0.1:9/v1"):
            pass
    settings = openai_settings_from_env(
        {"OPENAI_API_KEY": "sk-live-123", "OPENAI_BASE_URL": "http://x/v1"}
    )
    assert settings.base_url == "http://x/v1" and "sk-live-123" not in repr(settings)
    assert "sk-live-123" not in repr(OpenAIProvider(api_key="sk-live-123"))


def test_strict_needs_every_property_required_and_closed_objects() -> None:
    class Optional_(BaseModel):
        title: str
        note: str | None = None

    class Bounded(BaseModel):
        tags: dict[str, int]

    assert strict_schema(Design.model_json_schema()) is not None
    assert strict_schema(Optional_.model_json_schema()) is None
    assert strict_schema(Bounded.model_json_schema()) is None
    assert strict_schema({"type": "string", "minLength": 3}) is None
