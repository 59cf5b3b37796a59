"""A real OpenAI-compatible HTTP server for tests, on 127.0.0.1 with a free port.

It serves ``POST /v1/chat/completions`` from a script: each request takes the next scripted
reply (the last one repeats), and every request is recorded (path, headers, JSON body) so a
test can check what the client sent. Replies:

- :class:`Answer` - a chat completion with the given usage; streamed as server-sent events
  when the request says ``stream: true`` (usage in a last chunk with no choices, only when
  ``stream_options.include_usage`` asks for it, as OpenAI does);
- :class:`Fail` - an HTTP error status with an OpenAI-style error body and headers
  (``retry-after`` for a 429);
- :class:`Slow` - waits, then answers (for client timeouts);
- a callable - computes one of the above from the request's JSON body.

Used as ``with OpenAIServer() as server: ...``; ``server.base_url`` ends in ``/v1``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Answer:
    text: str
    prompt_tokens: int = 11
    completion_tokens: int = 7
    cached_tokens: int = 0
    chunks: int = 3  # how many pieces the text is streamed in


@dataclass(frozen=True)
class Fail:
    status: int
    headers: Mapping[str, str] = field(default_factory=dict)
    message: str = "scripted failure"


@dataclass(frozen=True)
class Slow:
    seconds: float
    then: Answer


Reply = Answer | Fail | Slow | Callable[[dict[str, Any]], "Answer | Fail | Slow"]
"""A scripted reply; a callable computes it from the request's JSON body (e.g. an answer
that fits the request's ``response_format`` schema)."""


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


class OpenAIServer:
    """See the module docstring."""

    def __init__(self) -> None:
        self.requests: list[Received] = []
        self._script: list[Reply] = [Answer("hello")]
        self._next = 0
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._httpd.daemon_threads = True
        self._httpd.block_on_close = False  # a Slow reply must not hold up shutdown
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def script(self, *replies: Reply) -> None:
        """The replies to the next requests, in order; the last one repeats."""
        with self._lock:
            self._script, self._next = list(replies), 0

    def _take(self, received: Received) -> Reply:
        with self._lock:
            self.requests.append(received)
            reply = self._script[min(self._next, len(self._script) - 1)]
            self._next += 1
            return reply

    def __enter__(self) -> OpenAIServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()


def _handler_for(server: OpenAIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", 0))
            body = json.loads(self.rfile.read(length) or b"{}")
            received = Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
            reply = server._take(received)
            try:
                self._reply(reply, body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test); nothing to answer

        def _reply(self, reply: Reply, body: dict[str, Any]) -> None:
            if callable(reply):
                reply = reply(body)
            if isinstance(reply, Slow):
                if server._stopping.wait(reply.seconds):
                    return
                reply = reply.then
            if isinstance(reply, Fail):
                error = {"error": {"message": reply.message, "type": "scripted", "code": None}}
                self._send(reply.status, "application/json", json.dumps(error).encode(), reply.headers)
            elif body.get("stream"):
                include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
                self._send(200, "text/event-stream", _sse(reply, body["model"], include_usage))
            else:
                self._send(200, "application/json", json.dumps(_completion(reply, body["model"])).encode())

        def _send(self, status: int, kind: str, data: bytes, headers: Mapping[str, str] = {}) -> None:
            self.send_response(status)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(data)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep test output clean

    return Handler


def _usage(reply: Answer) -> dict[str, Any]:
    return {"prompt_tokens": reply.prompt_tokens, "completion_tokens": reply.completion_tokens,
            "total_tokens": reply.prompt_tokens + reply.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": reply.cached_tokens}}


def _completion(reply: Answer, model: str) -> dict[str, Any]:
    return {"id": "chatcmpl-test", "object": "chat.completion", "created": 1700000000,
            "model": model, "usage": _usage(reply),
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": reply.text}}]}


def _sse(reply: Answer, model: str, include_usage: bool) -> bytes:
    size = max(1, -(-len(reply.text) // reply.chunks))
    pieces = [reply.text[i:i + size] for i in range(0, len(reply.text), size)]
    base = {"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 1700000000,
            "model": model}
    events = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": piece},
                                    "finish_reason": None}]} for piece in pieces]
    events.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    if include_usage:
        events.append({**base, "choices": [], "usage": _usage(reply)})
    lines = [f"data: {json.dumps(event)}\n\n" for event in events] + ["data: [DONE]\n\n"]
    return "".join(lines).encode()
