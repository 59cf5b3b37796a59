"""A real OpenAI-compatible HTTP server for tests, on 127.0.0.1 with a free port.

It serves ``POST /v1/chat/completions`` from a script: each request takes the next scripted
reply (the last one repeats), and every request is recorded (path, headers, JSON body) so a
test can check what the client sent. Replies:

- :class:`Answer` - a chat completion with the given usage and finish_reason (``length``
  for an answer cut at max_tokens), and ``tool_calls`` ((id, function name, arguments
  JSON) each: the answer asks for tools, finish_reason ``tool_calls``); streamed as server-sent events
  when the request says ``stream: true`` (usage in a last chunk with no choices, only when
  ``stream_options.include_usage`` asks for it, as OpenAI does);
- :class:`Fail` - an HTTP error status with an OpenAI-style error body and headers
  (``retry-after`` for a 429);
- :class:`Slow` - waits, then answers (for client timeouts);
- a callable - computes one of the above from the request's JSON body.

Hostile replies, for the hardening tests (usage lies are plain :class:`Answer` values with
inflated, negative, huge or zero counts, cached tokens above the prompt, or a count left out
of the usage with ``None``):

- :class:`Raw` - any status, content type and body (an HTML page with 200, broken JSON);
- :class:`Huge` - a 200 answer of ``size`` bytes, written in pieces so the server never
  holds it (a streamed request gets well-formed events, each a big piece of content);
- :class:`Trickle` - a whole answer, written one byte every ``every_s`` seconds;
- :class:`Cut` - an answer broken off: a stream after ``events`` events (the connection
  closes cleanly, no ``[DONE]``), a plain answer half-way through its announced length;
- :class:`BadChunk` - a stream with a malformed event after ``after`` good ones;
- :class:`Echo` - an answer that repeats the request's path and headers (the key, Basic
  auth) after a given text;
- :class:`StreamError` - a stream with an error event (``{"error": {"code": "500"}}``)
  after ``after`` good ones, as a gateway sends when its backend fails mid-stream.

Servers of other kinds, for the bounds and the fallback of streamed calls:

- :class:`Drip` - a streamed answer, one event every ``every_s`` seconds (a CPU server's
  pace), that can go silent for ``stall_s`` after ``stall_after`` events (a stalled one);
- :class:`NoStream` - refuses a streamed request with an HTTP error naming ``stream``
  and answers a plain one, as servers without streaming do;
- :class:`Plain` - answers every request with a plain JSON body, streamed or not (a server
  that ignores ``stream``).

``Answer(..., stream_usage=False)`` streams no usage chunk even when asked for one.

Any other path answers 404, as OpenAI's API does (the ``/apply-template`` and ``/tokenize``
a run asks a server that counts tokens), unless ``routes`` maps it (``/tokenize`` as vLLM
answers it) to a function of the JSON body giving the status and JSON reply; those requests
are kept apart, in ``elsewhere``.

Used as ``with OpenAIServer() as server: ...``; ``server.base_url`` ends in ``/v1``.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from .scripted_http import Received as Received
from .scripted_http import ScriptedServer, received


@dataclass(frozen=True)
class Answer:
    text: str
    prompt_tokens: int | None = 11  # None: the usage leaves the field out
    completion_tokens: int | None = 7
    cached_tokens: int = 0
    chunks: int = 3  # how many pieces the text is streamed in
    finish_reason: str = "stop"  # "length": the server cut the answer at max_tokens
    stream_usage: bool = True  # False: no usage chunk even when include_usage asks for it
    tool_calls: tuple[tuple[str, str, str], ...] = ()  # (id, function name, arguments JSON)


@dataclass(frozen=True)
class Fail:
    status: int
    headers: Mapping[str, str] = field(default_factory=dict)
    message: str = "scripted failure"


@dataclass(frozen=True)
class Slow:
    seconds: float
    then: Answer


@dataclass(frozen=True)
class Raw:
    body: bytes
    content_type: str = "text/html"
    status: int = 200


@dataclass(frozen=True)
class Huge:
    size: int
    piece: int = 64 * 1024


@dataclass(frozen=True)
class Trickle:
    then: Answer
    every_s: float = 1.0


@dataclass(frozen=True)
class Cut:
    then: Answer
    events: int = 2


@dataclass(frozen=True)
class BadChunk:
    then: Answer
    after: int = 1
    chunk: str = 'data: {"choices": [{"index": 0, "delta": {"content": "tru'


@dataclass(frozen=True)
class StreamError:
    then: Answer
    after: int = 1
    code: str = "500"
    message: str = "the backend failed mid-stream"


@dataclass(frozen=True)
class Drip:
    then: Answer
    every_s: float = 0.1
    stall_after: int | None = None  # events sent before the silence; None: no silence
    stall_s: float = 30.0


@dataclass(frozen=True)
class NoStream:
    then: Answer
    status: int = 400
    message: str = "'stream' is not supported by this server"


@dataclass(frozen=True)
class Plain:
    then: Answer


@dataclass(frozen=True)
class Echo:
    """An answer whose text is ``text`` followed by the request's path and headers, as a
    server that repeats what it was sent (so a test sees what reaches the run's files)."""

    text: str = ""


Hostile = Raw | Huge | Trickle | Cut | BadChunk | StreamError
Other = Drip | NoStream | Plain
Static = Answer | Fail | Slow | Echo | Hostile | Other
Reply = Static | Callable[[dict[str, Any]], Static]
"""A scripted reply; a callable computes it from the request's JSON body (e.g. an answer
that fits the request's ``response_format`` schema)."""


class OpenAIServer(ScriptedServer[Reply]):
    """See the module docstring."""

    def __init__(self) -> None:
        super().__init__(Answer("hello"), _handler_for, root="/v1")
        self.routes: dict[str, Callable[[dict[str, Any]], tuple[int, Any]]] = {}


def _handler_for(server: OpenAIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            request = received(self)
            body = request.body
            path = urllib.parse.urlsplit(self.path).path
            # In the path or, behind a base URL with a query, after it (the SDK appends it).
            if "chat/completions" not in self.path:
                server.elsewhere.append(request)
                error = {"error": {"message": f"no route {self.path}", "type": "not_found"}}
                route = server.routes.get(path)
                status, said = route(body) if route else (404, error)
                self._send(status, "application/json", json.dumps(said).encode())
                return
            scripted = server.take(request)
            reply = scripted(body) if callable(scripted) else scripted
            if isinstance(reply, Echo):
                said = " ".join(f"{k}: {v}" for k, v in request.headers.items())
                reply = Answer(f"{reply.text} {request.path} {said}")
            try:
                self._reply(reply, body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test); nothing to answer

        def _reply(
            self, reply: Answer | Fail | Slow | Hostile | Other, body: dict[str, Any]
        ) -> None:
            if isinstance(reply, Slow):
                if server.pause(reply.seconds):
                    return
                reply = reply.then
            streamed = bool(body.get("stream"))
            if isinstance(reply, NoStream):
                refused = Fail(reply.status, message=reply.message)
                reply = refused if streamed else reply.then
            if isinstance(reply, Plain):
                data = json.dumps(_completion(reply.then, body["model"])).encode()
                return self._send(200, "application/json", data)
            if isinstance(reply, Drip):
                return self._drip(reply, body) if streamed else self._reply(reply.then, body)
            if isinstance(reply, Fail):
                error = {"error": {"message": reply.message, "type": "scripted", "code": None}}
                self._send(
                    reply.status, "application/json", json.dumps(error).encode(), reply.headers
                )
            elif isinstance(reply, Answer):
                self._send(200, *_answer(reply, body))
            else:
                self._hostile(reply, body)

        def _drip(self, reply: Drip, body: dict[str, Any]) -> None:
            self._head(200, "text/event-stream", None)  # the end is the connection's close
            for i, event in enumerate(_events(reply.then, body)):
                pause = reply.stall_s if i and i == reply.stall_after else reply.every_s
                if i and server.pause(pause):
                    return
                self.wfile.write(event.encode())
                self.wfile.flush()

        def _hostile(self, reply: Hostile, body: dict[str, Any]) -> None:
            streamed = bool(body.get("stream"))
            if isinstance(reply, Raw):
                self._send(reply.status, reply.content_type, reply.body)
            elif isinstance(reply, Huge):
                self._head(200, "text/event-stream" if streamed else "application/json", reply.size)
                _write_huge(self.wfile, reply, streamed)
            elif isinstance(reply, Trickle):
                kind, data = _answer(reply.then, body)
                self._head(200, kind, len(data))
                for i in range(len(data)):
                    if server.pause(reply.every_s if i else 0):
                        return
                    self.wfile.write(data[i : i + 1])
                    self.wfile.flush()
            elif isinstance(reply, Cut) and not streamed:
                data = _answer(reply.then, body)[1]
                self._head(200, "application/json", len(data))  # promises more than it sends
                self.wfile.write(data[: len(data) // 2])
            else:
                events = _events(reply.then, body)
                if isinstance(reply, Cut):
                    events = events[: reply.events]
                elif isinstance(reply, BadChunk):
                    events = [*events[: reply.after], reply.chunk + "\n\n", *events[reply.after :]]
                elif isinstance(reply, StreamError):
                    error = {
                        "error": {
                            "code": reply.code,
                            "message": reply.message,
                            "type": "server_error",
                        }
                    }
                    events = [*events[: reply.after], f"data: {json.dumps(error)}\n\n"]
                self._head(200, "text/event-stream", None)  # the end is the connection's close
                self.wfile.write("".join(events).encode())

        def _head(
            self, status: int, kind: str, length: int | None, headers: Mapping[str, str] = {}
        ) -> None:
            self.send_response(status)
            self.send_header("content-type", kind)
            if length is not None:
                self.send_header("content-length", str(length))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()

        def _send(
            self, status: int, kind: str, data: bytes, headers: Mapping[str, str] = {}
        ) -> None:
            self._head(status, kind, len(data), headers)
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep test output clean

    return Handler


def _usage(reply: Answer) -> dict[str, Any]:
    counts = {"prompt_tokens": reply.prompt_tokens, "completion_tokens": reply.completion_tokens}
    return {
        **{name: value for name, value in counts.items() if value is not None},
        "total_tokens": sum(value or 0 for value in counts.values()),
        "prompt_tokens_details": {"cached_tokens": reply.cached_tokens},
    }


def _completion(reply: Answer, model: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 1700000000,
        "model": model,
        "usage": _usage(reply),
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls" if reply.tool_calls else reply.finish_reason,
                "message": {
                    "role": "assistant",
                    "content": reply.text or None if reply.tool_calls else reply.text,
                    **({"tool_calls": _calls(reply)} if reply.tool_calls else {}),
                },
            }
        ],
    }


def _calls(reply: Answer) -> list[dict[str, Any]]:
    return [
        {"id": i, "type": "function", "function": {"name": name, "arguments": arguments}}
        for i, name, arguments in reply.tool_calls
    ]


def _call_deltas(reply: Answer) -> list[dict[str, Any]]:
    # As OpenAI streams a call: its id and name in one delta, its arguments in two more.
    deltas = []
    for index, (i, name, arguments) in enumerate(reply.tool_calls):
        half = len(arguments) // 2
        deltas.append(
            {
                "index": index,
                "id": i,
                "type": "function",
                "function": {"name": name, "arguments": ""},
            }
        )
        deltas += [
            {"index": index, "function": {"arguments": part}}
            for part in (arguments[:half], arguments[half:])
        ]
    return deltas


def _answer(reply: Answer, body: dict[str, Any]) -> tuple[str, bytes]:
    """The content type and bytes of ``reply`` as the request asks for it (streamed or not)."""
    if body.get("stream"):
        return "text/event-stream", "".join(_events(reply, body)).encode()
    return "application/json", json.dumps(_completion(reply, body["model"])).encode()


def _events(reply: Answer, body: dict[str, Any]) -> list[str]:
    asked = bool((body.get("stream_options") or {}).get("include_usage"))
    include_usage = asked and reply.stream_usage
    return _sse(reply, body["model"], include_usage)


def _write_huge(out: Any, reply: Huge, streamed: bool) -> None:
    # Written piece by piece: the test server must stay small however big the body it sends.
    if streamed:
        event = 'data: {"choices": [{"index": 0, "delta": {"content": "%s"}}]}\n\n'
        piece = (event % ("x" * (reply.piece - len(event)))).encode()
        opening = b""
    else:
        opening, piece = b'{"choices": [{"index": 0, "message": {"content": "', b"x" * reply.piece
    out.write(opening)
    sent = len(opening)
    while sent < reply.size:
        data = piece[: reply.size - sent]
        out.write(data)
        sent += len(data)


def _sse(reply: Answer, model: str, include_usage: bool) -> list[str]:
    size = max(1, -(-len(reply.text) // reply.chunks))
    pieces = [reply.text[i : i + size] for i in range(0, len(reply.text), size)]
    base = {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": model,
    }
    events = [
        {
            **base,
            "choices": [
                {
                    "index": 0,
                    "delta": {"role": "assistant", "content": piece},
                    "finish_reason": None,
                }
            ],
        }
        for piece in pieces
    ]
    events += [
        {**base, "choices": [{"index": 0, "delta": {"tool_calls": [delta]}, "finish_reason": None}]}
        for delta in _call_deltas(reply)
    ]
    finish = "tool_calls" if reply.tool_calls else reply.finish_reason
    events.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    if include_usage:
        events.append({**base, "choices": [], "usage": _usage(reply)})
    return [f"data: {json.dumps(event)}\n\n" for event in events] + ["data: [DONE]\n\n"]
