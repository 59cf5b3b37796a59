"""The anthropic provider through the Gateway and the real ``anthropic`` SDK, against an
Anthropic-compatible HTTP server on 127.0.0.1 (support.anthropic_server); nothing patched."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest

from sopbus.bus import (
    Budget,
    BudgetExhausted,
    ChatMessage,
    ConfigError,
    Gateway,
    LedgerLine,
    LLMRequest,
    PriceBook,
    ProviderError,
    Usage,
)
from sopbus.bus._protocol import ToolCall, ToolSpec
from sopbus.bus.llm._anthropic import (
    TOOL_PROMPT_TOKENS,
    AnthropicProvider,
    anthropic_settings_from_env,
)
from sopbus.bus.llm._tokens import prompt_upper_bound
from support.anthropic_server import AnthropicServer, Drip, Fail, Reply, Slow, StreamError

MODEL = "claude-haiku-4-5"
PRICE = PriceBook.load().price(MODEL)  # genai-prices: 1 in, 0.1 read, 1.25 write, 5 out
KEY = "sk-ant-test-secret-key"
SYSTEM = "You are an architect. " * 40


@pytest.fixture
def server() -> Iterator[AnthropicServer]:
    with AnthropicServer() as running:
        yield running


def ask(**fields: Any) -> LLMRequest:
    base: dict[str, Any] = {
        "messages": (ChatMessage("system", SYSTEM), ChatMessage("user", "Design a todo app.")),
        "model": MODEL,
        "max_tokens": 300,
        "role": "Bob",
        "action": "WriteDesign",
    }
    return LLMRequest(**{**base, **fields})


async def call(
    server: AnthropicServer,
    *requests: LLMRequest,
    stream: bool = False,
    budget: str = "1",
    **settings: Any,
) -> tuple[list[Any], list[LedgerLine], list[float]]:
    lines: list[LedgerLine] = []
    delays: list[float] = []

    async def sleep(seconds: float) -> None:
        delays.append(seconds)

    answers: list[Any] = []
    async with AnthropicProvider(
        base_url=server.base_url, api_key=KEY, stream=stream, **settings
    ) as provider:
        gateway = Gateway(
            provider, PriceBook.load(), Budget(Decimal(budget)), sink=lines.append, sleep=sleep
        )
        for request in requests:
            try:
                answers.append(await gateway.complete(request, round=1))
            except (ProviderError, BudgetExhausted) as error:
                answers.append(error)
    return answers, lines, delays


@pytest.mark.parametrize("stream", [False, True])
async def test_usage_with_cache_reads_and_writes_is_ledgered_and_priced_exactly(
    server: AnthropicServer, stream: bool
) -> None:
    server.script(
        Reply(
            "Three modules.",
            input_tokens=40,
            output_tokens=12,
            cache_creation_input_tokens=900,
            cache_read_input_tokens=3000,
        )
    )
    (done,), (line,), _ = await call(server, ask(), stream=stream)
    assert done.text == "Three modules." and done.finish_reason == "stop"
    assert done.usage == Usage(3940, 12, cached_tokens=3000, cache_write_tokens=900)
    assert (line.prompt_tokens, line.cached_tokens, line.cache_write_tokens) == (3940, 3000, 900)
    expected = (40 * 1 + 3000 * Decimal("0.1") + 900 * Decimal("1.25") + 12 * 5) / 10**6
    assert line.cost_usd == expected == Decimal("0.001525")
    assert (line.provider, line.outcome, line.price_source) == ("anthropic", "ok", "genai-prices")
    (sent,) = server.requests
    # The key as the SDK sends it (x-api-key, or a bearer token in the SDK 2.x).
    sent_key = sent.headers.get("x-api-key") or sent.headers["authorization"].removeprefix(
        "Bearer "
    )
    assert sent_key == KEY and sent.body.get("stream", False) is stream
    # The stable prefix, the system turn, is a cache breakpoint; the one-off user turn not.
    assert sent.body["system"] == [
        {"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}
    ]
    assert sent.body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Design a todo app."}]}
    ]
    assert (sent.body["max_tokens"], sent.body["model"]) == (300, MODEL)


async def test_a_second_call_with_the_same_system_turn_reads_it_from_the_cache(
    server: AnthropicServer,
) -> None:
    server.script(Reply("ok", output_tokens=3, cache=True))
    other = ask(messages=(ChatMessage("system", SYSTEM), ChatMessage("user", "Now a chat app.")))
    (first, second), lines, _ = await call(server, ask(), other)
    assert first.usage.cache_write_tokens > 200 and first.usage.cached_tokens == 0
    assert second.usage.cached_tokens == first.usage.cache_write_tokens
    assert second.usage.cache_write_tokens == 0
    for answer, line in zip((first, second), lines, strict=True):
        assert line.cost_usd == PRICE.cost(answer.usage) > 0
    assert lines[1].cost_usd < lines[0].cost_usd / 5  # a read costs a tenth, a write 1.25x


@pytest.mark.parametrize("stream", [False, True])
async def test_an_answer_cut_at_max_tokens_is_recorded_as_cut(
    server: AnthropicServer, stream: bool
) -> None:
    server.script(Reply("Three mod", output_tokens=300, stop_reason="max_tokens"))
    (done,), (line,), _ = await call(server, ask(), stream=stream)
    assert (done.text, done.finish_reason, line.finish_reason) == ("Three mod", "length", "length")


TOOLS = (
    ToolSpec(
        name="git.git_log",
        description="The commits of a repository.",
        parameters={"type": "object", "properties": {"count": {"type": "integer"}}},
    ),
)


@pytest.mark.parametrize("stream", [False, True])
async def test_tool_use_maps_to_tool_calls_and_results_go_back_as_tool_result_blocks(
    server: AnthropicServer, stream: bool
) -> None:
    server.script(
        Reply("", tool_uses=(("toolu_1", "git__git_log", {"count": 3}),), output_tokens=20),
        Reply("Three commits."),
    )
    first = ask(tools=TOOLS, step=1, tool_choice="auto")
    asked = ToolCall(id="toolu_1", name="git.git_log", arguments='{"count": 3}')
    second = ask(
        tools=TOOLS,
        step=2,
        messages=(
            *first.messages,
            ChatMessage("assistant", "", tool_calls=(asked,)),
            ChatMessage("tool", "a\nb\nc", tool_call_id="toolu_1"),
        ),
    )
    (calling, answered), lines, _ = await call(server, first, second, stream=stream)
    assert calling.tool_calls == (asked,) and calling.finish_reason == "tool_calls"
    assert json.loads(calling.tool_calls[0].arguments) == {"count": 3}
    assert (answered.text, answered.finish_reason) == ("Three commits.", "stop")
    body_1, body_2 = (r.body for r in server.requests)
    assert body_1["tools"] == [
        {
            "name": "git__git_log",
            "description": "The commits of a repository.",
            "input_schema": TOOLS[0].parameters,
            "cache_control": {"type": "ephemeral"},
        }
    ]
    assert body_1["tool_choice"] == {"type": "auto"}
    assert body_2["messages"][1:] == [
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "git__git_log", "input": {"count": 3}}
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": "a\nb\nc",
                    "cache_control": {"type": "ephemeral"},  # the next step goes on from here
                }
            ],
        },
    ]
    assert [line.step for line in lines] == [1, 2]


DESIGN = {
    "title": "Design",
    "type": "object",
    "properties": {"title": {"type": "string"}, "modules": {"type": "array"}},
    "required": ["title", "modules"],
}


@pytest.mark.parametrize("stream", [False, True])
async def test_a_schema_is_asked_for_by_a_forced_answer_tool(
    server: AnthropicServer, stream: bool
) -> None:
    design = {"title": "Todo", "modules": ["api", "ui"]}
    server.script(Reply("", tool_uses=(("toolu_9", "answer", design),)))
    (done,), _, _ = await call(server, ask(schema=DESIGN, schema_name="Design"), stream=stream)
    assert json.loads(done.text) == design
    assert (done.tool_calls, done.finish_reason) == ((), "stop")
    body = server.requests[0].body
    assert [t["name"] for t in body["tools"]] == ["answer"]
    assert body["tools"][0]["input_schema"] == DESIGN
    assert body["tool_choice"] == {"type": "tool", "name": "answer"}


async def test_prompt_mode_writes_the_schema_into_the_system_turn(server: AnthropicServer) -> None:
    server.script(Reply('{"title": "Todo", "modules": []}'))
    (done,), _, _ = await call(server, ask(schema=DESIGN, output_mode="prompt"))
    assert json.loads(done.text)["title"] == "Todo"
    body = server.requests[0].body
    assert "tools" not in body and '"required":["title","modules"]' in body["system"][0]["text"]


@pytest.mark.parametrize("stream", [False, True])
async def test_429_529_and_500_are_retried_with_the_servers_pause_and_400_is_not(
    server: AnthropicServer, stream: bool
) -> None:
    server.script(Fail(429, headers={"retry-after": "2"}), Fail(529), Fail(500), Reply("at last"))
    request = ask(max_attempts=4)
    (done,), lines, delays = await call(server, request, stream=stream)
    assert done.text == "at last" and len(server.requests) == 4
    assert delays == [2.0, 1.0, 2.0]  # the server's retry-after, then the doubling backoff
    assert [(ln.outcome, ln.status) for ln in lines] == [
        ("error", 429),
        ("error", 529),
        ("error", 500),
        ("ok", None),
    ]
    assert all(ln.cost_usd == 0 for ln in lines[:3])
    assert "rate_limit_error" in (lines[0].error or "")

    server.script(Fail(400, message="messages: bad"))
    (error,), (line,), _ = await call(server, request, stream=stream)
    assert isinstance(error, ProviderError) and not error.retryable
    assert "HTTP 400 (invalid_request_error): messages: bad" in str(error)
    assert line.outcome == "error" and len(server.requests) == 5


async def test_an_error_event_in_a_stream_is_retried_and_counted_at_its_reservation(
    server: AnthropicServer,
) -> None:
    server.script(StreamError(Reply("never whole")), Reply("whole"))
    (done,), lines, _ = await call(server, ask(), stream=True)
    assert done.text == "whole"
    failed = lines[0]
    assert (failed.outcome, failed.estimated) == ("error", True)
    assert "overloaded_error" in (failed.error or "") and failed.cost_usd > 0


async def test_a_stream_that_goes_silent_fails_on_the_idle_bound(server: AnthropicServer) -> None:
    server.script(Drip(Reply("slow answer", chunks=3), stall_after=3, stall_s=5))
    (error,), lines, _ = await call(
        server, ask(max_attempts=1), stream=True, idle_timeout_s=0.3, timeout_s=20
    )
    assert isinstance(error, ProviderError) and error.retryable and error.maybe_billed
    assert "went silent" in str(error) and "idle_timeout_s = 0.3" in str(error)
    assert lines[0].estimated


async def test_a_slow_server_fails_on_the_whole_call_bound(server: AnthropicServer) -> None:
    server.script(Slow(5, Reply("late")))
    (error,), _, _ = await call(server, ask(max_attempts=1), timeout_s=0.3)
    assert isinstance(error, ProviderError) and "timeout_s = 0.3" in str(error)


async def test_the_reservation_counts_the_system_prompt_anthropic_adds_for_tools(
    server: AnthropicServer,
) -> None:
    provider = AnthropicProvider(api_key=KEY)
    assert provider.prompt_overhead(ask()) == 0
    assert provider.prompt_overhead(ask(tools=TOOLS)) == TOOL_PROMPT_TOKENS
    assert provider.prompt_overhead(ask(schema=DESIGN)) == TOOL_PROMPT_TOKENS  # the answer tool
    assert provider.prompt_overhead(ask(schema=DESIGN, output_mode="prompt")) == 0
    request = ask(tools=TOOLS)
    worst = PRICE.worst_case(prompt_upper_bound(request) + TOOL_PROMPT_TOKENS, 300)
    # The worst case bills the whole prompt at the dearest rate, the cache write's.
    assert (
        worst
        == ((prompt_upper_bound(request) + TOOL_PROMPT_TOKENS) * Decimal("1.25") + 300 * 5) / 10**6
    )
    (refused,), (line,), _ = await call(server, request, budget=str(worst - Decimal("0.000001")))
    assert isinstance(refused, BudgetExhausted) and not server.requests
    assert (line.outcome, line.reserved_usd) == ("refused", worst)


async def test_the_key_comes_from_the_environment_and_is_never_shown() -> None:
    settings = anthropic_settings_from_env(
        {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}
    )
    assert (settings.api_key, settings.base_url) == (KEY, "http://127.0.0.1:9")
    provider = AnthropicProvider(base_url=settings.base_url, api_key=settings.api_key)
    assert KEY not in repr(settings) and KEY not in repr(provider)
    with pytest.raises(ConfigError, match="set ANTHROPIC_API_KEY"):
        async with AnthropicProvider(base_url="http://127.0.0.1:9", api_key=None):
            pass


async def test_without_the_sdk_the_error_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "anthropic", None)  # as if it were not installed
    with pytest.raises(ConfigError, match=r"pip install 'sopbus\[anthropic\]'"):
        async with AnthropicProvider(api_key=KEY):
            pass
