"""What an OpenAI-compatible server sends back, read strictly and within bounds.

The ``openai`` provider reads the HTTP body itself (the SDK would hand a ``str`` for an HTML
page, or a decoder's message for broken JSON) and gives it here. Whatever is not a chat
completion becomes a :class:`~sopbus.bus.ProviderError` that names the server and quotes the first
bytes it sent; the server had answered 200, so the attempt may have been billed
(``maybe_billed``), and the same request may well work again (``retryable``).

A body is at most :func:`body_limit` bytes: a generous envelope plus 1 KiB per token of
``max_tokens`` (a streamed token costs about 200 bytes of event around it). A server that
sends more is cut off there: the answer cannot be what was asked for, and reading it whole
would let one server fill the memory and, echoed into a repair prompt, the budget.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import msgspec
import trio

from .._errors import ProviderError
from .._protocol import Usage

BODY_ENVELOPE_BYTES = 64 * 1024
BODY_BYTES_PER_TOKEN = 1024
HEAD_BYTES = 160
MESSAGE_CHARS = 300
_RETRYABLE_STATUS = frozenset({408, 409, 429})


def body_limit(max_tokens: int) -> int:
    """The most bytes an answer of at most ``max_tokens`` tokens is allowed to take."""
    return BODY_ENVELOPE_BYTES + BODY_BYTES_PER_TOKEN * max_tokens


def retryable_status(status: int) -> bool:
    """Whether a request that got ``status`` may succeed if sent again (429, 408, 409, 5xx)."""
    return status in _RETRYABLE_STATUS or status >= 500


def head(data: bytes) -> str:
    """The first bytes of ``data`` for an error message, as readable text."""
    text = data[:HEAD_BYTES].decode("utf-8", errors="replace")
    return repr(text + ("..." if len(data) > HEAD_BYTES else ""))


def first_line(text: str) -> str:
    """The first non-empty line of ``text``, at most :data:`MESSAGE_CHARS` long."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    line = lines[0].strip() if lines else ""
    return line if len(line) <= MESSAGE_CHARS else line[: MESSAGE_CHARS - 3] + "..."


class _Details(msgspec.Struct):
    cached_tokens: int | None = None


class _Usage(msgspec.Struct):
    # A count the server left out reads as 0: the gateway books such usage at its own
    # count (bus.llm._plausible), where a decoding error would fail an answered call.
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    prompt_tokens_details: _Details | None = None

    def value(self) -> Usage:
        details = self.prompt_tokens_details
        cached = details.cached_tokens if details is not None else None
        return Usage(
            prompt_tokens=self.prompt_tokens or 0,
            completion_tokens=self.completion_tokens or 0,
            cached_tokens=cached or 0,
        )


class _Function(msgspec.Struct):
    name: str | None = None
    arguments: str | None = None


class _ToolCall(msgspec.Struct):
    id: str | None = None
    function: _Function | None = None
    index: int = 0  # in a stream: which call a delta continues


class _Message(msgspec.Struct):
    content: str | None = None
    refusal: str | None = None
    tool_calls: list[_ToolCall] | None = None


class _Choice(msgspec.Struct):
    message: _Message | None = None
    finish_reason: str | None = None


class _Answer(msgspec.Struct):
    choices: list[_Choice]
    usage: _Usage | None = None


class _Delta(msgspec.Struct):
    content: str | None = None
    tool_calls: list[_ToolCall] | None = None


class _ChunkChoice(msgspec.Struct):
    delta: _Delta | None = None
    finish_reason: str | None = None


class _Chunk(msgspec.Struct):
    choices: list[_ChunkChoice] | None = None
    usage: _Usage | None = None
    error: Any = None


WireCall = tuple[str, str, str]
"""A tool call as the server sent it: its id, its (wire) function name, its arguments text."""
Answer = tuple[str, Usage | None, str | None, tuple[WireCall, ...]]
"""An answer as read off the wire: its text, its usage (if the server said), its
finish_reason (if the server said) and the tool calls it asks for."""


def _wire_calls(calls: list[_ToolCall] | None) -> tuple[WireCall, ...]:
    out = []
    for i, call in enumerate(calls or ()):
        function = call.function or _Function()
        out.append((call.id or f"call_{i}", function.name or "", function.arguments or "{}"))
    return tuple(out)


def not_an_answer(base_url: str, what: str, data: bytes) -> ProviderError:
    """A 200 answer that is no chat completion (see the module docstring)."""
    return ProviderError(
        f"{base_url} answered HTTP 200 with {what}; it began: {head(data)}",
        retryable=True,
        maybe_billed=True,
    )


def read_answer(body: bytes, base_url: str, content_type: str) -> Answer:
    """The text, usage and finish_reason of a (not streamed) chat completion ``body``."""
    try:
        answer = msgspec.json.decode(body, type=_Answer)
    except msgspec.DecodeError as error:
        raise not_an_answer(
            base_url,
            f"a body that is not a chat completion ({content_type or 'no content-type'}: {error})",
            body,
        ) from None
    choice = answer.choices[0] if answer.choices else None
    message = choice.message if choice is not None else None
    text = (message.content or message.refusal or "") if message is not None else ""
    usage = answer.usage.value() if answer.usage is not None else None
    calls = _wire_calls(message.tool_calls if message is not None else None)
    return text, usage, choice.finish_reason if choice is not None else None, calls


async def read_body(
    chunks: AsyncIterator[bytes], limit: int, base_url: str, take: Callable[[bytes], None]
) -> bytes:
    """Gives each chunk of a body to ``take`` until the body ends; returns its first bytes.

    More than ``limit`` bytes, or a :class:`~sopbus.bus.ProviderError` from ``take``, ends the read
    by cancelling it: the cancellation starts at the socket and unwinds every async generator
    of the HTTP stack, where breaking out of the loop would leave them half-iterated (trio
    reports those). The error is raised once the read has unwound.
    """
    seen = bytearray()
    total = 0
    failure: ProviderError | None = None
    with trio.CancelScope() as reading:
        async for chunk in chunks:
            if failure is not None:
                continue  # already buffered before the cancellation could land
            total += len(chunk)
            if len(seen) < HEAD_BYTES:
                seen += chunk[: HEAD_BYTES - len(seen)]
            try:
                if total > limit:
                    raise ProviderError(
                        f"{base_url} sent more than {limit} bytes for an answer of at most the "
                        f"request's max_tokens; refused (a body that large cannot be the answer "
                        f"asked for); it began: {head(bytes(seen))}",
                        maybe_billed=True,
                    )
                take(chunk)
            except ProviderError as error:
                failure = error
                reading.cancel()
    if failure is not None:
        raise failure
    return bytes(seen)


class Lines:
    """Splits a body's chunks into lines (without their line breaks) for ``feed``."""

    def __init__(self, feed: Callable[[bytes], None]):
        self._feed = feed
        self._pending = b""

    def __call__(self, chunk: bytes) -> None:
        *lines, self._pending = (self._pending + chunk).split(b"\n")
        for line in lines:
            self._feed(line.rstrip(b"\r"))

    def close(self) -> None:
        """Feeds the last line, if the body did not end with a line break."""
        if self._pending:
            self._feed(self._pending.rstrip(b"\r"))
            self._pending = b""


class StreamReader:
    """Reads server-sent events of a streamed chat completion, one line at a time."""

    def __init__(self, base_url: str, *, on_text: Callable[[str], None] | None = None):
        self.base_url = base_url
        self._on_text = on_text  # each piece of text as it arrives (the live view)
        self.parts: list[str] = []
        self.usage: Usage | None = None
        self.finished = False  # a finish_reason or [DONE] arrived: the answer is whole
        self.finish_reason: str | None = None  # the last one the stream named
        self.began = False  # a chunk with choices arrived: the server was generating
        self._calls: dict[int, list[str]] = {}  # tool calls by index: [id, name, arguments]

    def text(self) -> str:
        return "".join(self.parts)

    def feed(self, line: bytes) -> None:
        """One line of the body (without its line break)."""
        if not line.startswith(b"data:"):
            return  # blank separators, comments, event names
        data = line[5:].strip()
        if data == b"[DONE]":
            self.finished = True
            return
        try:
            chunk = msgspec.json.decode(data, type=_Chunk)
        except msgspec.DecodeError as error:
            raise ProviderError(
                f"{self.base_url} sent a malformed stream chunk ({error}); it began: {head(data)}",
                retryable=True,
                maybe_billed=True,
            ) from None
        if chunk.error:
            raise self._error_event(chunk.error)
        for choice in chunk.choices or ():
            self.began = True
            if choice.delta is not None and choice.delta.content:
                self.parts.append(choice.delta.content)
                if self._on_text is not None:
                    self._on_text(choice.delta.content)
            if choice.delta is not None and choice.delta.tool_calls:
                self._add_calls(choice.delta.tool_calls)
            if choice.finish_reason is not None:
                self.finished = True
                self.finish_reason = choice.finish_reason
        if chunk.usage is not None:  # the last chunk, with include_usage
            self.usage = chunk.usage.value()

    def _add_calls(self, deltas: list[_ToolCall]) -> None:
        # A streamed call arrives in pieces: its id and name first, its arguments after.
        for delta in deltas:
            call = self._calls.setdefault(delta.index, ["", "", ""])
            call[0] = delta.id or call[0]
            if delta.function is not None:
                call[1] += delta.function.name or ""
                call[2] += delta.function.arguments or ""

    def calls(self) -> tuple[WireCall, ...]:
        return tuple(
            (c[0] or f"call_{i}", c[1], c[2] or "{}") for i, c in sorted(self._calls.items())
        )

    def _error_event(self, error: Any) -> ProviderError:
        # A gateway whose backend fails mid-stream sends {"error": {"code": "500", ...}}:
        # the same failure as an HTTP 500, so it is retried like one.
        fields = error if isinstance(error, dict) else {"message": error}
        code = str(fields.get("code") or fields.get("status") or "")
        status = int(code) if code.isdigit() and 100 <= int(code) <= 599 else None
        retryable = (
            retryable_status(status) if status is not None else fields.get("type") == "server_error"
        )
        message = first_line(str(fields.get("message") or fields.get("type") or error))
        said = f"HTTP {status}" if status is not None else f"code {code or 'none'}"
        return ProviderError(
            f"{self.base_url} sent an error inside the stream ({said}): {message}",
            retryable=retryable,
            status=status,
            maybe_billed=self.began,
        )

    def end(self, seen: bytes) -> Answer:
        """The text, usage and finish_reason once the body ended; a stream cut before its end
        is an error."""
        if not self.finished:
            raise ProviderError(
                f"{self.base_url} ended the stream before the answer was whole "
                f"(no finish_reason, no [DONE]); it began: {head(seen)}",
                retryable=True,
                maybe_billed=True,
            )
        return self.text(), self.usage, self.finish_reason, self.calls()


def context_exceeded(body: object) -> str | None:
    """What to do about llama.cpp's ``exceed_context_size_error`` (HTTP 400 whose error
    names the server's ``n_ctx``), or ``None`` for any other error body. The request will
    not fit however often it is sent, so this is the server's configuration against the
    run's, and the fix is in one of them."""
    if not isinstance(body, dict) or body.get("type") != "exceed_context_size_error":
        return None
    n_ctx, prompt = body.get("n_ctx"), body.get("n_prompt_tokens")
    needs = f"a prompt of {prompt} tokens" if isinstance(prompt, int) else "the prompt"
    return (
        f"the request does not fit the server's context: {needs} plus max_tokens of answer "
        f"is more than its n_ctx = {n_ctx} tokens; lower max_tokens ([llm].max_tokens, or "
        f"llm = {{ max_tokens = ... }} on the action or role) or the history the prompt "
        f"carries, or start the server with a larger context (llama.cpp: --ctx-size)"
    )
