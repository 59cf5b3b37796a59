"""A real Anthropic-compatible HTTP server for tests, on 127.0.0.1 with a free port.

It serves ``POST /v1/messages`` (Anthropic's Messages API) from a script, as
:mod:`support.openai_server` serves chat completions: each request takes the next scripted
reply (the last one repeats), and every request is recorded (path, headers, JSON body).
Replies:

- :class:`Reply` - a message with the given text, ``tool_use`` blocks, ``stop_reason``
  (``max_tokens`` for an answer cut there) and usage (``input_tokens``, ``output_tokens``,
  ``cache_creation_input_tokens``, ``cache_read_input_tokens``); with ``cache=True`` the
  cache counts are the server's own, from the request's ``cache_control`` breakpoints (see
  :class:`PromptCache`). Streamed as Anthropic's server-sent events (``message_start``,
  ``content_block_start``/``delta``/``stop``, ``message_delta`` with the output usage,
  ``message_stop``, and a ``ping``) when the request says ``stream: true``;
- :class:`Fail` - an HTTP error status with an Anthropic error body (``rate_limit_error``
  for 429, ``overloaded_error`` for 529, ``api_error`` for 500) and headers;
- :class:`Slow` - waits, then answers; :class:`Drip` - streams one event every ``every_s``,
  and can go silent for ``stall_s`` after ``stall_after`` events;
- :class:`StreamError` - an ``error`` event after ``after`` events of a stream;
- a callable - computes one of the above from the request's JSON body.

Any other path answers 404. Used as ``with AnthropicServer() as server: ...``;
``server.base_url`` is the root (the SDK adds ``/v1/messages``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from .scripted_http import Received as Received
from .scripted_http import ScriptedServer, received


@dataclass(frozen=True)
class Reply:
    text: str = "hello"
    input_tokens: int = 300
    output_tokens: int = 7
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    stop_reason: str = "end_turn"  # "max_tokens": cut there; tool_use blocks make "tool_use"
    tool_uses: tuple[tuple[str, str, dict[str, Any]], ...] = ()  # (id, name, input)
    chunks: int = 3  # text deltas of a streamed answer
    cache: bool = False  # True: cache counts (and input_tokens) from the server's PromptCache


@dataclass(frozen=True)
class Fail:
    status: int
    headers: Mapping[str, str] = field(default_factory=dict)
    message: str = "scripted failure"


@dataclass(frozen=True)
class Slow:
    seconds: float
    then: Reply


@dataclass(frozen=True)
class Drip:
    then: Reply
    every_s: float = 0.05
    stall_after: int | None = None
    stall_s: float = 30.0


@dataclass(frozen=True)
class StreamError:
    then: Reply
    after: int = 2
    kind: str = "overloaded_error"


Static = Reply | Fail | Slow | Drip | StreamError
Scripted = Static | Callable[[dict[str, Any]], Static]

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


def tokens(value: Any) -> int:
    """The server's token count of a block: a quarter of its JSON's bytes, at least 1 (never
    more than the bytes, as a byte-level tokenizer never makes more tokens than bytes)."""
    block = {k: v for k, v in value.items() if k != "cache_control"}
    return max(1, len(json.dumps(block, sort_keys=True).encode()) // 4)


def blocks(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The request's prompt in the order Anthropic's cache reads it: tools, system, messages."""
    system = body.get("system") or []
    out = list(body.get("tools") or [])
    out += [{"type": "text", "text": system}] if isinstance(system, str) else list(system)
    for message in body.get("messages") or []:
        content = message["content"]
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        out += [{**block, "role": message["role"]} for block in content]
    return out


class PromptCache:
    """Anthropic's prompt cache as a test can predict it: at each ``cache_control``
    breakpoint the prefix up to it is cached; a request reads the longest cached prefix
    that ends at one of its breakpoints and writes the rest up to its last breakpoint.
    Prefixes under ``min_tokens`` are not cached (as Claude's 1,024-token minimum)."""

    def __init__(self, min_tokens: int = 0) -> None:
        self.min_tokens = min_tokens
        self._seen: set[str] = set()

    def usage(self, body: dict[str, Any]) -> tuple[int, int, int]:
        """(uncached input, cache write, cache read) tokens of ``body``, remembering it."""
        sequence = blocks(body)
        counts = [tokens(b) for b in sequence]
        total = sum(counts)
        marks = [i + 1 for i, b in enumerate(sequence) if "cache_control" in b]
        keys = {end: self._key(sequence[:end]) for end in marks}
        read = max((sum(counts[:e]) for e in marks if keys[e] in self._seen), default=0)
        last = max((e for e in marks if sum(counts[:e]) >= self.min_tokens), default=0)
        write = max(sum(counts[:last]) - read, 0)
        self._seen |= {keys[e] for e in marks if sum(counts[:e]) >= self.min_tokens}
        return total - read - write, write, read

    @staticmethod
    def _key(prefix: list[dict[str, Any]]) -> str:
        plain = [{k: v for k, v in b.items() if k != "cache_control"} for b in prefix]
        return hashlib.sha256(json.dumps(plain, sort_keys=True).encode()).hexdigest()


class AnthropicServer(ScriptedServer[Scripted]):
    """See the module docstring."""

    def __init__(self, min_cache_tokens: int = 0) -> None:
        super().__init__(Reply(), _handler_for)
        self.usages: list[dict[str, int]] = []  # the usage of each answer, as sent
        self.cache = PromptCache(min_cache_tokens)


def _handler_for(server: AnthropicServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            request = received(self)
            body = request.body
            if self.path.split("?")[0] != "/v1/messages":
                server.elsewhere.append(request)
                self._send(404, _error_body(404, f"no route {self.path}"))
                return
            scripted = server.take(request)
            reply = scripted(body) if callable(scripted) else scripted
            try:
                self._reply(reply, body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test)

        def _reply(self, reply: Static, body: dict[str, Any]) -> None:
            if isinstance(reply, Slow):
                if server.pause(reply.seconds):
                    return
                reply = reply.then
            if isinstance(reply, Fail):
                self._send(reply.status, _error_body(reply.status, reply.message), reply.headers)
                return
            answer = reply.then if isinstance(reply, Drip | StreamError) else reply
            message = _message(answer, body, server.cache)
            server.usages.append(message["usage"])
            if not body.get("stream"):
                self._send(200, message)
                return
            events = _events(message, answer.chunks)
            if isinstance(reply, StreamError):
                error = {"type": "error", "error": {"type": reply.kind, "message": "mid-stream"}}
                events = [*events[: reply.after], ("error", error)]
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.end_headers()  # the end is the connection's close
            for i, (name, data) in enumerate(events):
                if isinstance(reply, Drip) and i:
                    pause = reply.stall_s if i == reply.stall_after else reply.every_s
                    if server.pause(pause):
                        return
                self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
                self.wfile.flush()
            self.close_connection = True

        def _send(self, status: int, data: Any, headers: Mapping[str, str] = {}) -> None:
            raw = json.dumps(data).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(raw)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


def _error_body(status: int, message: str) -> dict[str, Any]:
    kind = _ERROR_TYPES.get(status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": message}}


def _message(reply: Reply, body: dict[str, Any], cache: PromptCache) -> dict[str, Any]:
    usage = {
        "input_tokens": reply.input_tokens,
        "output_tokens": reply.output_tokens,
        "cache_creation_input_tokens": reply.cache_creation_input_tokens,
        "cache_read_input_tokens": reply.cache_read_input_tokens,
    }
    if reply.cache:
        uncached, write, read = cache.usage(body)
        usage |= {
            "input_tokens": uncached,
            "cache_creation_input_tokens": write,
            "cache_read_input_tokens": read,
        }
    content: list[dict[str, Any]] = [{"type": "text", "text": reply.text}] if reply.text else []
    content += [
        {"type": "tool_use", "id": i, "name": name, "input": given}
        for i, name, given in reply.tool_uses
    ]
    return {
        "id": "msg_test",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", ""),
        "content": content,
        "stop_reason": "tool_use" if reply.tool_uses else reply.stop_reason,
        "stop_sequence": None,
        "usage": usage,
    }


def _events(message: dict[str, Any], chunks: int) -> list[tuple[str, dict[str, Any]]]:
    """``message`` as Anthropic streams it."""
    usage = message["usage"]
    start = {**message, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": start})
    ]
    events.append(("ping", {"type": "ping"}))
    for index, block in enumerate(message["content"]):
        opened: dict[str, Any]
        if block["type"] == "text":
            opened = {"type": "text", "text": ""}
            text = block["text"]
            size = max(1, -(-len(text) // chunks))
            deltas = [
                {"type": "text_delta", "text": text[i : i + size]}
                for i in range(0, len(text), size)
            ]
        else:
            opened = {**block, "input": {}}
            given = json.dumps(block["input"])
            half = len(given) // 2
            deltas = [
                {"type": "input_json_delta", "partial_json": p}
                for p in (given[:half], given[half:])
            ]
        events.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": opened},
            )
        )
        events += [
            ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})
            for d in deltas
        ]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    delta = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": delta,
                "usage": {"output_tokens": usage["output_tokens"]},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events
