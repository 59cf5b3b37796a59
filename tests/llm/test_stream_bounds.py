"""Streamed calls against a real OpenAI-compatible server on 127.0.0.1 (issue 26): streaming
is the default, with the server's exact usage; the idle bound (``idle_timeout_s``) and the
whole-call bound (``timeout_s``) fire as their errors say, each failed attempt is ledgered at
its reservation and the cap holds; a server that cannot stream is asked without, once."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from loguru import logger

from sopbus.bus import (
    Budget,
    ChatMessage,
    Gateway,
    LedgerLine,
    LLMRequest,
    OpenAIProvider,
    PriceBook,
    ProviderError,
    Usage,
)
from sopbus.bus.llm._tokens import count_text, prompt_upper_bound
from support.openai_server import Answer, Drip, NoStream, OpenAIServer, Plain, Reply, Slow

PRICES = PriceBook.load()
REQUEST = LLMRequest(
    messages=(ChatMessage("system", "You are a poet."), ChatMessage("user", "A haiku.")),
    model="gpt-4o-mini",
    max_tokens=200,
    role="Pete",
    action="Polish",
)
RESERVED = PRICES.price(REQUEST.model).worst_case(prompt_upper_bound(REQUEST), REQUEST.max_tokens)
POEM = "an old silent pond / a frog jumps into the pond / splash! silence again"


async def calls(
    server: OpenAIServer,
    *replies: Reply,
    asks: int = 1,
    cap: str = "1",
    **settings: Any,
) -> tuple[list[str | ProviderError], list[LedgerLine]]:
    """``asks`` calls of REQUEST through a gateway (2 attempts each) to ``server``, with the
    provider's defaults unless ``settings`` says otherwise."""
    server.script(*replies)
    lines: list[LedgerLine] = []

    async def no_wait(seconds: float) -> None:
        pass

    out: list[str | ProviderError] = []
    async with OpenAIProvider(base_url=server.base_url, api_key="sk-test", **settings) as openai:
        gateway = Gateway(
            openai, PRICES, Budget(Decimal(cap)), sink=lines.append, max_attempts=2, sleep=no_wait
        )
        for _ in range(asks):
            try:
                out.append((await gateway.complete(REQUEST, round=1)).text)
            except ProviderError as error:
                out.append(error)
    return out, lines


def usage_of(line: LedgerLine) -> tuple[str, int, int]:
    return line.outcome, line.prompt_tokens, line.completion_tokens


# -- streaming by default ------------------------------------------------------------------


async def test_calls_stream_by_default_and_ledger_the_servers_usage_exactly(
    openai_server: OpenAIServer,
) -> None:
    said, lines = await calls(openai_server, Answer(POEM, prompt_tokens=41, completion_tokens=19))

    assert said == [POEM]
    body = openai_server.requests[0].body
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert [usage_of(line) for line in lines] == [("ok", 41, 19)]
    assert lines[0].cost_usd == PRICES.price("gpt-4o-mini").cost(Usage(41, 19))
    assert not lines[0].estimated


async def test_a_stream_without_usage_is_counted_locally_at_the_prompts_bound(
    openai_server: OpenAIServer,
) -> None:
    said, lines = await calls(openai_server, Answer(POEM, stream_usage=False))

    assert said == [POEM]
    prompt, written = prompt_upper_bound(REQUEST), count_text(POEM, REQUEST.model)
    assert [usage_of(line) for line in lines] == [("ok", prompt, written)]
    assert lines[0].cost_usd == PRICES.price("gpt-4o-mini").cost(Usage(prompt, written)) > 0


# -- the idle bound and the whole-call bound -------------------------------------------------


async def test_the_idle_bound_fires_when_the_tokens_stop_and_names_its_key(
    openai_server: OpenAIServer,
) -> None:
    stalls = Drip(Answer(POEM, chunks=6), every_s=0.02, stall_after=2, stall_s=30)
    said, lines = await calls(openai_server, stalls, idle_timeout_s=0.3, cap="0.01")

    [error] = said
    assert isinstance(error, ProviderError) and error.retryable
    message = str(error)
    assert "went silent" in message and "idle_timeout_s = 0.3 s" in message
    assert "raise [llm].idle_timeout_s" in message and "s into the call" in message
    # retried from scratch; each attempt ledgered at its whole reservation, under the cap
    assert len(openai_server.requests) == 2
    assert [(ln.outcome, ln.cost_usd, ln.estimated) for ln in lines] == [
        ("error", RESERVED, True)
    ] * 2
    assert sum(ln.cost_usd for ln in lines) <= Decimal("0.01")


async def test_a_slow_but_steady_stream_longer_than_the_idle_bound_is_answered(
    openai_server: OpenAIServer,
) -> None:
    steady = Drip(Answer(POEM, prompt_tokens=30, completion_tokens=20, chunks=10), every_s=0.1)
    said, lines = await calls(openai_server, steady, idle_timeout_s=0.6, timeout_s=20)

    assert said == [POEM]  # about 1.2 s of answer, never 0.6 s without a piece
    assert [usage_of(line) for line in lines] == [("ok", 30, 20)]
    assert lines[0].latency_ms > 600


async def test_the_wait_for_the_first_piece_is_bounded_by_timeout_s_only(
    openai_server: OpenAIServer,
) -> None:
    # A server's queue or its reading of a long prompt sends nothing: not a stall.
    said, lines = await calls(openai_server, Slow(0.8, Answer(POEM)), idle_timeout_s=0.2)
    assert said == [POEM] and [line.outcome for line in lines] == ["ok"]


async def test_the_whole_call_bound_fires_on_a_stream_that_never_ends_in_time(
    openai_server: OpenAIServer,
) -> None:
    endless = Drip(Answer(POEM, chunks=40), every_s=0.05)
    said, lines = await calls(openai_server, endless, idle_timeout_s=5, timeout_s=0.5)

    [error] = said
    assert isinstance(error, ProviderError)
    message = str(error)
    assert "timed out" in message and "timeout_s = 0.5 s" in message and "streamed" in message
    assert "raise [llm].timeout_s" in message and "idle_timeout_s" not in message
    assert [(ln.outcome, ln.cost_usd) for ln in lines] == [("error", RESERVED)] * 2
    assert all(ln.latency_ms < 5000 for ln in lines)


# -- a server that cannot stream ---------------------------------------------------------


@pytest.fixture
def warnings() -> Any:
    said: list[str] = []
    sink = logger.add(lambda m: said.append(m.record["message"]), level="WARNING")
    yield said
    logger.remove(sink)


async def test_a_server_that_refuses_streams_is_asked_without_once_for_the_run(
    openai_server: OpenAIServer, warnings: list[str]
) -> None:
    refuses = NoStream(Answer(POEM, prompt_tokens=25, completion_tokens=19))
    said, lines = await calls(openai_server, refuses, asks=3)

    assert said == [POEM] * 3
    # the first call streamed, was refused and asked again; the others did not stream
    assert [r.body.get("stream", False) for r in openai_server.requests] == [
        True,
        False,
        False,
        False,
    ]
    assert [usage_of(line) for line in lines] == [("ok", 25, 19)] * 3  # one line per call
    refusals = [w for w in warnings if "without streaming" in w]
    assert len(refusals) == 1 and "HTTP 400" in refusals[0] and "stream" in refusals[0]


async def test_a_plain_answer_to_a_streamed_request_is_read_and_streams_stop(
    openai_server: OpenAIServer, warnings: list[str]
) -> None:
    said, lines = await calls(
        openai_server, Plain(Answer(POEM, prompt_tokens=25, completion_tokens=19)), asks=2
    )

    assert said == [POEM] * 2
    assert [r.body.get("stream", False) for r in openai_server.requests] == [True, False]
    assert [usage_of(line) for line in lines] == [("ok", 25, 19)] * 2
    assert len([w for w in warnings if "plain JSON body" in w]) == 1


async def test_another_400_to_a_stream_is_not_taken_for_a_refusal(
    openai_server: OpenAIServer,
) -> None:
    other = NoStream(Answer(POEM), message="the model 'x' does not exist")
    said, lines = await calls(openai_server, other)

    [error] = said
    assert isinstance(error, ProviderError) and "HTTP 400" in str(error)
    assert len(openai_server.requests) == 1 and [ln.outcome for ln in lines] == ["error"]
