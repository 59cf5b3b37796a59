"""A hostile OpenAI-compatible server against the openai provider and the Gateway (issue 13):
usage that cannot be true, answers that are no chat completions, bodies past the size bound,
streams cut or broken, and a server that trickles a byte a second. Real HTTP on 127.0.0.1."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from sopbus.bus import (
    Budget,
    BudgetExhausted,
    ChatMessage,
    Gateway,
    LedgerLine,
    LLMRequest,
    OpenAIProvider,
    PriceBook,
    ProviderError,
    ProviderOverrun,
    Usage,
)
from sopbus.bus.llm._tokens import prompt_upper_bound
from sopbus.bus.llm._wire import body_limit
from support.openai_server import (
    Answer,
    BadChunk,
    Cut,
    Fail,
    Huge,
    OpenAIServer,
    Raw,
    Reply,
    StreamError,
    Trickle,
)

PRICES = PriceBook.load()
PRICE = PRICES.price("gpt-4o-mini")
REQUEST = LLMRequest(
    messages=(
        ChatMessage("system", "You are an architect."),
        ChatMessage("user", "Design a todo app."),
    ),
    model="gpt-4o-mini",
    max_tokens=300,
    role="Bob",
    action="WriteDesign",
)
RESERVED = PRICE.worst_case(prompt_upper_bound(REQUEST), REQUEST.max_tokens)
HTML = b"<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>"


class Outcome:
    """What one gateway call against the server did: the answer or the error, the ledger."""

    def __init__(self, result: str | BaseException, lines: list[LedgerLine], gateway: Gateway):
        self.result, self.lines, self.gateway = result, lines, gateway

    @property
    def error(self) -> BaseException:
        assert isinstance(self.result, BaseException), f"the call succeeded: {self.result!r}"
        return self.result

    def spent(self) -> Decimal:
        return sum((line.cost_usd for line in self.lines), Decimal(0))


async def call(
    openai_server: OpenAIServer,
    *replies: Reply,
    stream: bool = False,
    cap: str = "1",
    timeout_s: float = 10.0,
    max_attempts: int = 3,
    **provider: Any,
) -> Outcome:
    openai_server.script(*replies)
    lines: list[LedgerLine] = []

    async def no_wait(seconds: float) -> None:
        pass

    async with OpenAIProvider(
        base_url=openai_server.base_url,
        api_key="sk-test",
        timeout_s=timeout_s,
        stream=stream,
        **provider,
    ) as openai:
        gateway = Gateway(
            openai,
            PRICES,
            Budget(Decimal(cap)),
            sink=lines.append,
            max_attempts=max_attempts,
            sleep=no_wait,
        )
        try:
            result: str | BaseException = (await gateway.complete(REQUEST, round=1)).text
        except (ProviderError, BudgetExhausted) as error:
            result = error
    return Outcome(result, lines, gateway)


def estimated_errors(lines: list[LedgerLine]) -> list[tuple[str, Decimal, bool]]:
    return [(line.outcome, line.cost_usd, line.estimated) for line in lines]


# -- usage that cannot be true --------------------------------------------------------------


async def test_completion_tokens_above_max_tokens_are_an_overrun_that_ends_the_budget(
    openai_server: OpenAIServer,
) -> None:
    inflated = Answer("fine", prompt_tokens=30, completion_tokens=10 * REQUEST.max_tokens)
    out = await call(openai_server, inflated, Answer("never asked"))

    assert isinstance(out.error, ProviderOverrun) and isinstance(out.error, BudgetExhausted)
    assert "3000 completion tokens, above the request's max_tokens=300" in str(out.error)
    (line,) = out.lines
    assert (line.outcome, line.prompt_tokens, line.completion_tokens) == ("overrun", 30, 3000)
    assert line.cost_usd == PRICE.cost(Usage(30, 3000)) > RESERVED  # what the provider billed
    assert not line.estimated and len(openai_server.requests) == 1  # not retried
    overrun = out.gateway.stats().overrun
    assert overrun is not None
    assert overrun["reported"] == {
        "prompt_tokens": 30,
        "completion_tokens": 3000,
        "cached_tokens": 0,
    }
    assert overrun["allowed"]["completion_tokens"] == 300 and overrun["cost_usd"] == line.cost_usd
    with pytest.raises(BudgetExhausted, match="cannot be true"):  # the budget is closed
        await out.gateway.complete(REQUEST, round=2)
    assert len(openai_server.requests) == 1


async def test_negative_usage_never_gives_money_back(openai_server: OpenAIServer) -> None:
    out = await call(openai_server, Answer("fine", prompt_tokens=-1_000_000, completion_tokens=5))

    assert isinstance(out.error, ProviderOverrun)
    (line,) = out.lines
    assert (line.outcome, line.prompt_tokens, line.completion_tokens) == ("overrun", -1_000_000, 5)
    assert line.cost_usd == RESERVED and line.estimated  # counted at its reservation
    assert out.gateway.budget.spent == RESERVED > 0


async def test_huge_usage_is_ledgered_as_billed_past_the_cap_and_named_in_the_overrun(
    openai_server: OpenAIServer,
) -> None:
    out = await call(
        openai_server, Answer("fine", prompt_tokens=10**12, completion_tokens=10), cap="0.01"
    )

    assert isinstance(out.error, ProviderOverrun)
    (line,) = out.lines
    billed = PRICE.cost(Usage(10**12, 10))
    assert line.cost_usd == line.total_usd == billed == out.gateway.budget.spent  # $150,000.000006
    overrun = out.gateway.stats().overrun
    assert overrun is not None
    assert (
        overrun["over_cap_usd"] == billed - Decimal("0.01") and "above the $" in overrun["reason"]
    )


async def test_more_prompt_tokens_than_the_bound_within_the_reservation_is_no_overrun(
    openai_server: OpenAIServer,
) -> None:
    out = await call(
        openai_server,
        Answer("fine", prompt_tokens=prompt_upper_bound(REQUEST) + 50, completion_tokens=10),
    )
    assert out.result == "fine" and out.lines[0].outcome == "ok"
    assert out.gateway.budget.closed is None


# -- answers that are no chat completions ---------------------------------------------------


@pytest.mark.parametrize(
    "reply, says",
    [
        (Raw(HTML), "<html><head><title>502 Bad Gateway"),
        (
            Raw(b'{"choices": [{"message": {"content": "cut', content_type="application/json"),
            '{"choices"',
        ),
        (Raw(b'{"unexpected": true}', content_type="application/json"), "unexpected"),
    ],
)
async def test_a_200_that_is_no_chat_completion_is_a_provider_error_naming_the_server(
    openai_server: OpenAIServer, reply: Raw, says: str
) -> None:
    out = await call(
        openai_server, reply, Answer("second time lucky", prompt_tokens=20, completion_tokens=4)
    )

    assert out.result == "second time lucky"  # retried: the next answer was fine
    (first, second) = out.lines
    assert (first.outcome, first.cost_usd, first.estimated, first.status) == (
        "error",
        RESERVED,
        True,
        None,
    )
    assert openai_server.base_url in (first.error or "") and says in (first.error or "")
    assert second.outcome == "ok" and second.cost_usd == PRICE.cost(Usage(20, 4))


async def test_a_body_past_the_size_bound_is_refused_without_being_read_whole(
    openai_server: OpenAIServer,
) -> None:
    limit = body_limit(REQUEST.max_tokens)
    for stream in (False, True):
        out = await call(openai_server, Huge(64 * 1024 * 1024), stream=stream)
        assert f"more than {limit} bytes" in str(out.error) and openai_server.base_url in str(
            out.error
        )
        assert not isinstance(out.error, ProviderOverrun)
        assert estimated_errors(out.lines) == [("error", RESERVED, True)]  # not retried
    assert len(openai_server.requests) == 2


# -- streams ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "reply, says",
    [
        (Cut(Answer("a design in pieces", chunks=4), events=2), "before the answer was whole"),
        (BadChunk(Answer("a design in pieces", chunks=4), after=2), "malformed stream chunk"),
    ],
)
async def test_a_broken_stream_is_retried_and_its_attempt_counted_at_its_reservation(
    openai_server: OpenAIServer, reply: Reply, says: str
) -> None:
    out = await call(
        openai_server, reply, Answer("whole", prompt_tokens=25, completion_tokens=2), stream=True
    )

    assert out.result == "whole"
    first = out.lines[0]
    assert (first.outcome, first.cost_usd, first.estimated) == ("error", RESERVED, True)
    assert says in (first.error or "") and openai_server.base_url in (first.error or "")
    assert out.spent() == RESERVED + PRICE.cost(Usage(25, 2))


async def test_a_plain_answer_cut_half_way_is_retried(openai_server: OpenAIServer) -> None:
    out = await call(openai_server, Cut(Answer("a long design " * 20)), Answer("whole"))
    assert out.result == "whole" and estimated_errors(out.lines)[0] == ("error", RESERVED, True)
    assert "broke off" in (out.lines[0].error or "")


async def test_an_error_event_in_a_stream_is_its_http_status_and_retried(
    openai_server: OpenAIServer,
) -> None:
    out = await call(
        openai_server,
        StreamError(Answer("partial answer", chunks=3), after=1, code="500"),
        StreamError(Answer("x"), after=0, code="503"),
        Answer("whole", prompt_tokens=25, completion_tokens=2),
        stream=True,
    )

    assert out.result == "whole"
    mid, first, ok = out.lines
    assert (mid.outcome, mid.status, mid.estimated, mid.cost_usd) == ("error", 500, True, RESERVED)
    assert (
        mid.error is not None
        and openai_server.base_url in mid.error
        and "the backend failed" in mid.error
    )
    # an error before any content: nothing was generated, so, like an HTTP 503, it cost nothing
    assert (first.status, first.estimated, first.cost_usd) == (503, False, 0)
    assert ok.outcome == "ok"


async def test_an_error_event_with_a_client_code_is_not_retried(
    openai_server: OpenAIServer,
) -> None:
    out = await call(openai_server, StreamError(Answer("x"), after=0, code="400"), stream=True)
    assert isinstance(out.error, ProviderError) and not out.error.retryable
    assert out.error.status == 400 and len(openai_server.requests) == 1


# -- a deadline per call ------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
async def test_a_server_that_trickles_a_byte_a_second_is_cut_off_at_timeout_s(
    openai_server: OpenAIServer, stream: bool
) -> None:
    out = await call(
        openai_server, Trickle(Answer("slowly " * 10)), stream=stream, timeout_s=0.5, max_attempts=2
    )

    assert isinstance(out.error, ProviderError) and "timeout_s = 0.5 s" in str(out.error)
    assert "raise [llm].timeout_s" in str(out.error)
    assert estimated_errors(out.lines) == [("error", RESERVED, True)] * 2
    assert len(openai_server.requests) == 2


# -- what each failed attempt records -----------------------------------------------------


async def test_an_http_error_records_its_status_and_message_and_costs_nothing(
    openai_server: OpenAIServer,
) -> None:
    out = await call(
        openai_server,
        Fail(500, message="upstream exploded\nstack trace line"),
        Fail(429, {"retry-after": "0"}, message="slow down"),
        Answer("ok"),
    )
    first, second, ok = out.lines
    assert (first.status, first.cost_usd, first.estimated) == (500, 0, False)
    assert first.error == f"{openai_server.base_url} answered HTTP 500: upstream exploded"
    assert (second.status, second.error) == (
        429,
        f"{openai_server.base_url} answered HTTP 429: slow down",
    )
    assert ok.outcome == "ok" and ok.status is None and ok.error is None


@pytest.mark.parametrize("param", ["max_tokens", "max_completion_tokens"])
async def test_max_tokens_param_names_the_field_sent(
    openai_server: OpenAIServer, param: str
) -> None:
    await call(openai_server, Answer("ok"), max_tokens_param=param)
    body = openai_server.requests[0].body
    assert body[param] == 300 and len({"max_tokens", "max_completion_tokens"} & set(body)) == 1
