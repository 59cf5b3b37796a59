"""Prompt tokens counted by the server that bills them, for tight reservations.

For a model whose tokenizer sopbus does not know, :func:`~sopbus.bus.llm._tokens.prompt_upper_bound`
counts UTF-8 bytes: a sure bound, but 7 times what a small local model billed (1,009 reserved
for 141 tokens, issue 26). Two kinds of server count a chat request's prompt themselves, on
their root (the base URL without ``/v1``):

- llama.cpp: ``POST /apply-template`` renders the request body as a chat completion would
  (the chat template, tools, the response format) and ``POST /tokenize`` counts that prompt
  with the special tokens a completion adds (``add_special``);
- vLLM: ``POST /tokenize`` with the ``messages`` (and ``add_generation_prompt``) answers
  ``count``.

The first call of a run finds out which one the server is; a server with neither (OpenAI,
Ollama, LM Studio) is remembered as such and every later call keeps the bound, with no
further request and no error. A count is cached per request body, so a retried attempt asks
nothing. The bound a reservation takes is the count plus 8 tokens or 2 % of it, whichever is
more (:func:`with_margin`: a server whose completion adds a token the count did not see
still fits), and never more than the byte bound.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any, Literal

import msgspec

# What the reservation adds to the server's count: 8 tokens or 2 % of it, the larger.
MARGIN_TOKENS = 8
MARGIN_SHARE = 0.02
_CACHED = 4096  # request bodies whose counts are kept (a run's prompts, repairs included)

Post = Callable[[str, dict[str, Any]], Awaitable["Reply"]]
"""``post(path, body)``: one JSON request to the server's root; its status and JSON body."""

Kind = Literal["unknown", "llama.cpp", "vllm", "none"]
_ABSENT = frozenset({400, 404, 405, 422, 501})  # "no such endpoint" in its various words
_key = msgspec.json.Encoder(order="sorted")


class Reply(msgspec.Struct, frozen=True):
    """A server's answer to one counting request (``body`` is ``None`` when not JSON)."""

    status: int
    body: Any = None


class ServerTokens:
    """Counts chat prompts on the server (see the module docstring); one per run."""

    def __init__(self, post: Post):
        self._post = post
        self.kind: Kind = "unknown"
        self._counts: OrderedDict[bytes, int] = OrderedDict()

    async def count(self, body: dict[str, Any]) -> int | None:
        """The prompt tokens the server bills for the chat completion ``body`` (its
        ``messages``, ``response_format``, tools...), or ``None`` when it cannot say."""
        key = _key.encode(body)
        if key in self._counts:
            self._counts.move_to_end(key)
            return self._counts[key]
        counted = await self._ask(body)
        if counted is not None:
            self._counts[key] = counted
            if len(self._counts) > _CACHED:
                self._counts.popitem(last=False)
        return counted

    def cached(self, body: dict[str, Any]) -> int | None:
        """The count of ``body`` when it was counted already, else ``None``."""
        return self._counts.get(_key.encode(body))

    async def _ask(self, body: dict[str, Any]) -> int | None:
        if self.kind == "none":
            return None
        if self.kind == "vllm":
            return (await self._vllm(body))[0]
        counted, absent = await self._llama(body)
        if self.kind != "unknown" or not absent:
            return counted  # llama.cpp, or a failure to ask again about next time
        counted, absent = await self._vllm(body)
        if absent:
            self.kind = "none"
        return counted

    async def _llama(self, body: dict[str, Any]) -> tuple[int | None, bool]:
        """llama.cpp's count, and whether the server has no such endpoint."""
        rendered = await self._post("/apply-template", body)
        prompt = rendered.body.get("prompt") if isinstance(rendered.body, dict) else None
        if not isinstance(prompt, str):
            return None, _absent(rendered)
        tokens = await self._post(
            "/tokenize", {"content": prompt, "add_special": True, "parse_special": True}
        )
        ids = tokens.body.get("tokens") if isinstance(tokens.body, dict) else None
        if tokens.status != 200 or not isinstance(ids, list) or not ids:
            return None, False
        self.kind = "llama.cpp"
        return len(ids), False

    async def _vllm(self, body: dict[str, Any]) -> tuple[int | None, bool]:
        """vLLM's count, and whether the server has no such endpoint."""
        asked = {"model": body.get("model"), "messages": body.get("messages", [])}
        asked["add_generation_prompt"] = True
        if "tools" in body:
            asked["tools"] = body["tools"]
        reply = await self._post("/tokenize", asked)
        count = reply.body.get("count") if isinstance(reply.body, dict) else None
        if not isinstance(count, int) or isinstance(count, bool) or count <= 0:
            return None, _absent(reply)
        self.kind = "vllm"
        return count, False


def _absent(reply: Reply) -> bool:
    """The server has no such endpoint: a 404 (or the like), or a 200 that does not answer
    the question (llama.cpp's /tokenize answers a body without ``content`` with no tokens).
    A server error or a timeout is not remembered: the next call asks again."""
    return reply.status in _ABSENT or reply.status == 200


def with_margin(counted: int) -> int:
    """The reservation's bound for a prompt the server counts at ``counted`` tokens:
    :data:`MARGIN_TOKENS` or :data:`MARGIN_SHARE` of it more, whichever is more."""
    return counted + max(MARGIN_TOKENS, math.ceil(counted * MARGIN_SHARE))
