"""Providers and requests for the shared-account tests (the file account and the NATS account): one that answers at once, one that hangs, a price book, a request."""

from __future__ import annotations

import trio

from sopbus.bus import ChatMessage, Completion, LLMRequest, PriceBook, Usage


class Answering:
    """A provider that answers at once with 10 prompt and 5 completion tokens."""

    name = "answering"

    async def complete(self, request: LLMRequest) -> Completion:
        await trio.sleep(0)
        return Completion(text="ok", usage=Usage(10, 5), model=request.model, provider=self.name)


class Hanging:
    name = "hanging"

    async def complete(self, request: LLMRequest) -> Completion:
        await trio.sleep_forever()
        raise AssertionError("unreachable")


PRICES = PriceBook.load({"m": {"input": 1000, "output": 2000}})  # $0.001 / $0.002 a token


def request(max_tokens: int = 10) -> LLMRequest:
    return LLMRequest(
        messages=(ChatMessage("user", "hi"),),
        model="m",
        max_tokens=max_tokens,
        role="Alice",
        action="WritePRD",
    )
