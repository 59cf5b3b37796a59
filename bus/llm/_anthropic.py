"""The ``anthropic`` provider: Anthropic's Messages API through the official ``anthropic`` SDK.

Install it with ``pip install 'sopbus[anthropic]'``; the SDK is imported when the provider
is opened, so a run on another provider never needs it. Open it once per run
(``async with AnthropicProvider(...)``). As for ``openai``: the SDK's own retries are off
(the :class:`~sopbus.bus.Gateway` retries, each attempt reserved, priced and ledgered); 429,
408, 409, 5xx (529 "overloaded" too), timeouts and broken connections are retryable, with
the server's ``retry-after``; ``timeout_s`` bounds a whole call, ``idle_timeout_s`` the
silence inside a stream (:mod:`sopbus.bus.llm._deadlines`). Calls stream by default.

The prompt cache is why this provider exists: Anthropic bills a prompt token read from the
cache at a tenth of the input price and one written to it at 1.25 times. sopbus lays every
prompt out stable part first (tools, then the system turn holding a role's context, then the
news), and marks ``cache_control`` breakpoints (the five-minute cache) where that stable part
ends: after the last tool, after the system turn, and, in a conversation that the next call
will continue (a tool loop, a repair, a chat), after its last message. The usage's
``input_tokens``, ``cache_creation_input_tokens`` and ``cache_read_input_tokens`` add up to
the call's ``prompt_tokens``; the two cache counts are ledgered as ``cache_write_tokens`` and
``cached_tokens`` and priced at their own prices (genai-prices knows Claude's).

Structured output uses a forced tool, which every Claude model with tool use honours:
the schema is the ``input_schema`` of one more tool (:data:`ANSWER_TOOL`) that the model
must call (``tool_choice`` ``tool``; ``any`` when the action's own tools are offered too,
so the model either calls one of them or answers), and the answer is that call's input as
JSON text. ``output_mode = "prompt"`` writes the schema into the system turn instead.

No ``temperature`` is sent: the SDK (2.x) no longer takes one, as current Claude models
refuse it; a model that still takes it gets it through ``[llm].extra_body``.

``stop_reason`` becomes the ``finish_reason`` the rest of sopbus reads: ``max_tokens`` is
``length`` (a cut answer, known as such everywhere), ``end_turn`` and ``stop_sequence`` are
``stop``, ``tool_use`` is ``tool_calls`` (``stop`` when the tool called is the answer's).

The reservation's prompt bound is sopbus's own byte bound plus the system prompt Anthropic
adds when tools are offered (:meth:`AnthropicProvider.prompt_overhead`: up to
:data:`TOOL_PROMPT_TOKENS`, which the request does not show). The key is never logged nor
shown in ``repr``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any, NamedTuple

import msgspec
import trio

from .._errors import ConfigError, ProviderError
from .._protocol import ChatMessage, Completion, LiveFeed, LLMRequest, ProviderBase, ToolCall, Usage
from .._util import redact_url
from ..scenario import register_provider
from ._deadlines import IdleBound, timed_out, went_silent
from ._request import from_wire, wire_names, with_schema_instruction
from ._wire import Lines, body_limit, first_line, head, read_body, retryable_status

if TYPE_CHECKING:
    import anthropic

    from ..scenario import Scenario

DEFAULT_BASE_URL = "https://api.anthropic.com"
DEFAULT_TIMEOUT_S = 600.0
DEFAULT_IDLE_TIMEOUT_S = 60.0
ANSWER_TOOL = "answer"
"""The name of the tool whose input is a structured answer (numbered if an action's own
tool has that name)."""
TOOL_PROMPT_TOKENS = 600
"""More than the system prompt Anthropic adds to a request with tools (530 tokens at most
in its published table, Claude 3 Opus with ``auto``)."""
INSTALL = "pip install 'sopbus[anthropic]'"
_EPHEMERAL = {"type": "ephemeral"}
_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}
_RETRYABLE_KINDS = frozenset({"overloaded_error", "api_error", "rate_limit_error"})


class AnthropicSettings(msgspec.Struct, frozen=True):
    """Where the ``anthropic`` provider connects; ``repr`` hides the key."""

    base_url: str | None
    api_key: str | None

    def __repr__(self) -> str:
        key = "***" if self.api_key else None
        return f"AnthropicSettings(base_url={self.base_url!r}, api_key={key})"


def anthropic_settings_from_env(environ: Mapping[str, str]) -> AnthropicSettings:
    """``ANTHROPIC_BASE_URL`` and ``ANTHROPIC_API_KEY`` from ``environ``."""
    return AnthropicSettings(
        base_url=environ.get("ANTHROPIC_BASE_URL") or None,
        api_key=environ.get("ANTHROPIC_API_KEY") or None,
    )


def sdk() -> Any:
    """The ``anthropic`` module, or a :class:`~sopbus.bus.ConfigError` saying how to get it."""
    try:
        import anthropic
    except ImportError:
        raise ConfigError(
            f"the anthropic provider needs Anthropic's SDK, which is not installed: {INSTALL}"
        ) from None
    return anthropic


class AnthropicProvider(ProviderBase):
    """Anthropic's Messages API (see the module docstring). ``timeout_s``,
    ``idle_timeout_s`` and ``stream`` are the run's; a request's own replace them for it."""

    name = "anthropic"

    def __init__(
        self,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S,
        stream: bool = True,
    ):
        self._url = base_url or DEFAULT_BASE_URL
        self.base_url = redact_url(self._url)  # errors and logs name it without credentials
        self._api_key = api_key
        self.timeout_s = timeout_s
        self.idle_timeout_s = idle_timeout_s
        self.stream = stream
        self._client: anthropic.AsyncAnthropic | None = None
        self.live: LiveFeed | None = None  # set by the live view: streamed text goes there

    def __repr__(self) -> str:
        return f"AnthropicProvider(base_url={self.base_url!r}, stream={self.stream})"

    async def __aenter__(self) -> AnthropicProvider:
        if not self._api_key:
            raise ConfigError(
                f"no API key for the anthropic provider at {self.base_url}; set "
                "ANTHROPIC_API_KEY (any non-empty value for a server without keys)"
            )
        client = sdk().AsyncAnthropic(
            api_key=self._api_key, base_url=self._url, timeout=self.timeout_s, max_retries=0
        )
        self._client = await client.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    def prompt_overhead(self, request: LLMRequest) -> int:
        """The system prompt Anthropic adds, unseen, to a request that sends tools (the
        answer tool too): the gateway adds it to sopbus's bound of the prompt."""
        return TOOL_PROMPT_TOKENS if request.tools or _forced(request) else 0

    def show_live(self, feed: LiveFeed) -> None:
        if self.stream:
            self.live = feed

    async def complete(self, request: LLMRequest) -> Completion:
        if self._client is None:
            raise RuntimeError(
                "AnthropicProvider is not open; use `async with AnthropicProvider(...)`"
            )
        stream = self.stream if request.stream is None else request.stream
        timeout_s = self.timeout_s if request.timeout_s is None else request.timeout_s
        idle_s = self.idle_timeout_s if request.idle_timeout_s is None else request.idle_timeout_s
        body = Body.of(request)
        params = {**body.params, "timeout": timeout_s}
        read: _Read | None = None
        # timeout_s bounds the whole call: the SDK's timeout is per read.
        with trio.move_on_after(timeout_s):
            read = await self._exchange(request, params, stream, idle_s)
        if read is None:
            raise timed_out(self.base_url, timeout_s, stream=stream)
        return body.completion(read, self.name)

    async def _exchange(
        self, request: LLMRequest, params: dict[str, Any], stream: bool, idle_s: float
    ) -> _Read:
        assert self._client is not None
        api = sdk()
        try:
            if not stream:
                return _read_message(await self._client.messages.create(**params))
            return await self._read_stream(request, params, idle_s)
        except api.APIStatusError as error:
            raise _status_error(error, self.base_url) from error
        except api.APITimeoutError as error:
            raise ProviderError(
                f"{self.base_url} timed out", retryable=True, maybe_billed=True
            ) from error
        except api.APIConnectionError as error:
            raise ProviderError(f"cannot reach {self.base_url}: {error}", retryable=True) from error
        except api.APIError as error:
            raise ProviderError(f"{self.base_url}: {first_line(str(error))}") from error
        except (_httpx().TimeoutException, _httpx().TransportError) as error:
            raise ProviderError(
                f"{self.base_url} broke off its answer: {error}", retryable=True, maybe_billed=True
            ) from error

    async def _read_stream(
        self, request: LLMRequest, params: dict[str, Any], idle_s: float
    ) -> _Read:
        """A streamed answer's events, within the idle bound and the body size bound. The
        body is read here, not through the SDK's event iterator: a bound that fires, or an
        error event, then cancels the read at the socket instead of leaving the SDK's async
        generators half-iterated."""
        assert self._client is not None
        live = self.live
        shown = live.open(request) if live is not None else 0
        reader = _Stream(self.base_url)
        if live is not None:
            reader.on_text = partial(live.feed, shown)
        lines = Lines(reader.feed)
        idle = IdleBound(idle_s)
        started = trio.current_time()

        def take(chunk: bytes) -> None:
            idle.heard()
            lines(chunk)

        create = self._client.messages.with_streaming_response.create
        try:
            async with create(**params, stream=True) as response:
                chunks = response.http_response.aiter_bytes()
                with idle.scope:
                    limit = body_limit(request.max_tokens)
                    await read_body(chunks, limit, self.base_url, take)
                    lines.close()
                    return reader.end()
        finally:
            if live is not None:
                live.close(shown)
        elapsed = trio.current_time() - started
        raise went_silent(self.base_url, idle_s, elapsed, len(reader.text()))


def _httpx() -> Any:
    import httpx2  # the HTTP client the SDK runs on, whose errors can reach past it

    return httpx2


class _Read(NamedTuple):
    """An answer as read: its text, tool calls (id, wire name, input), stop_reason, usage."""

    text: str
    calls: tuple[tuple[str, str, Any], ...]
    stop_reason: str | None
    usage: Usage


def _usage(input: Any, output: Any, written: Any, read: Any) -> Usage:
    """Anthropic's counts as sopbus's: its ``input_tokens`` leave out the cache's, which are
    part of the prompt (and of ``prompt_tokens``) all the same."""
    plain, out, write, cached = (int(n or 0) for n in (input, output, written, read))
    return Usage(
        prompt_tokens=plain + write + cached,
        completion_tokens=out,
        cached_tokens=cached,
        cache_write_tokens=write,
    )


def _read_message(message: Any) -> _Read:
    text, calls = [], []
    for block in message.content or ():
        if block.type == "text":
            text.append(block.text)
        elif block.type == "tool_use":
            calls.append((block.id, block.name, block.input))
    u = message.usage
    usage = _usage(
        u.input_tokens, u.output_tokens, u.cache_creation_input_tokens, u.cache_read_input_tokens
    )
    return _Read("".join(text), tuple(calls), message.stop_reason, usage)


class _Stream:
    """Reads the server-sent events of a streamed message, one line at a time."""

    def __init__(self, base_url: str):
        self.base_url = base_url
        self.on_text: Callable[[str], None] | None = None
        self._text: list[str] = []
        self._calls: dict[int, list[Any]] = {}  # by block index: [id, name, partial json]
        self._counts: dict[str, Any] = {}
        self.stop_reason: str | None = None
        self.began = False  # a content block arrived: the server was generating
        self.finished = False

    def text(self) -> str:
        return "".join(self._text)

    def feed(self, line: bytes) -> None:
        """One line of the body (the ``event:`` lines are named again in each ``data``)."""
        if not line.startswith(b"data:"):
            return
        try:
            event = msgspec.json.decode(line[5:].strip())
        except msgspec.DecodeError as error:
            raise ProviderError(
                f"{self.base_url} sent a malformed stream event ({error}); it began: {head(line)}",
                retryable=True,
                maybe_billed=True,
            ) from None
        if isinstance(event, dict):
            self._take(event)

    def _take(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "error":
            raise _stream_error(event.get("error"), self.base_url)
        if kind == "message_start":
            self._count((event.get("message") or {}).get("usage"))
        elif kind == "content_block_start":
            self.began = True
            block = event.get("content_block") or {}
            if block.get("type") == "tool_use":
                self._calls[event.get("index", 0)] = [block.get("id"), block.get("name"), ""]
        elif kind == "content_block_delta":
            self._delta(event.get("index", 0), event.get("delta") or {})
        elif kind == "message_delta":
            self.stop_reason = (event.get("delta") or {}).get("stop_reason") or self.stop_reason
            self._count(event.get("usage"))
        elif kind == "message_stop":
            self.finished = True

    def _count(self, usage: Any) -> None:
        # message_start carries the prompt's counts, message_delta the output's (and, on
        # newer servers, the prompt's again): the latest value of each wins.
        for name, value in (usage or {}).items():
            if value is not None:
                self._counts[name] = value

    def _delta(self, index: int, delta: dict[str, Any]) -> None:
        if delta.get("type") == "text_delta":
            piece = str(delta.get("text") or "")
            self._text.append(piece)
            if self.on_text is not None:
                self.on_text(piece)
        elif delta.get("type") == "input_json_delta" and index in self._calls:
            self._calls[index][2] += str(delta.get("partial_json") or "")

    def end(self) -> _Read:
        if not self.finished:
            raise ProviderError(
                f"{self.base_url} ended the stream before the message was whole (no "
                f"message_stop; {len(self.text())} characters of answer by then)",
                retryable=True,
                maybe_billed=True,
            )
        c = self._counts
        usage = _usage(
            c.get("input_tokens"),
            c.get("output_tokens"),
            c.get("cache_creation_input_tokens"),
            c.get("cache_read_input_tokens"),
        )
        calls = tuple((i, name, _parsed(raw)) for i, name, raw in self._calls.values())
        return _Read(self.text(), calls, self.stop_reason, usage)


def _stream_error(error: Any, base_url: str) -> ProviderError:
    """An ``error`` event inside a stream (``overloaded_error``, ...): the server had begun
    to answer, so it may bill; retried as its HTTP status would be."""
    detail = error if isinstance(error, dict) else {"message": error}
    kind = str(detail.get("type") or "")
    said = first_line(str(detail.get("message") or "")) or "(no message)"
    return ProviderError(
        f"{base_url} sent an error inside the stream ({kind or 'no type'}): {said}",
        retryable=kind in _RETRYABLE_KINDS,
        maybe_billed=True,
    )


def _parsed(raw: str) -> Any:
    """A streamed tool input: its JSON, or the text as sent when it is not whole (an
    answer cut at max_tokens; the caller sees ``length`` and repairs)."""
    try:
        return json.loads(raw or "{}")
    except ValueError:
        return raw


def _status_error(error: Any, base_url: str) -> ProviderError:
    """An HTTP error status, with Anthropic's error ``type`` and message."""
    body: dict[str, Any] = error.body if isinstance(error.body, dict) else {}
    inner = body.get("error")
    detail: dict[str, Any] = inner if isinstance(inner, dict) else body
    kind = str(detail.get("type") or "")
    said = first_line(str(detail.get("message") or error.message or "")) or "(no message)"
    status = error.status_code
    return ProviderError(
        f"{base_url} answered HTTP {status} ({kind or 'no type'}): {said}",
        retryable=retryable_status(status),
        status=status,
        retry_after=_retry_after(error.response.headers),
    )


def _retry_after(headers: Mapping[str, str]) -> float | None:
    for header, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(header)
        if value is not None:
            try:
                return max(float(value) / scale, 0.0)
            except ValueError:
                continue
    return None


def _forced(request: LLMRequest) -> bool:
    """Whether the schema is asked for by the answer tool (not written into the prompt)."""
    return request.schema is not None and request.output_mode == "json_schema"


class Body:
    """One request as the Messages API takes it (``params``), and how to read its answer
    back (the answer tool's name, whether its input was wrapped)."""

    def __init__(self, request: LLMRequest, params: dict[str, Any], answer: str, wrapped: bool):
        self.request, self.params, self.answer, self.wrapped = request, params, answer, wrapped

    @classmethod
    def of(cls, request: LLMRequest) -> Body:
        wires = wire_names(request)
        names = {spec.name: wire for spec, wire in zip(request.tools, wires, strict=True)}
        messages = with_schema_instruction(request) if _prompted(request) else request.messages
        system, turns = _turns(messages, names)
        tools = [
            {
                "name": wire,
                "description": spec.description,
                "input_schema": _object(spec.parameters),
            }
            for spec, wire in zip(request.tools, wires, strict=True)
        ]
        answer, wrapped = _answer_name(wires), False
        if _forced(request):
            assert request.schema is not None
            wrapped = request.schema.get("type") != "object"
            schema = _wrapped(request.schema) if wrapped else request.schema
            tools.append({"name": answer, "description": _ANSWER_HELP, "input_schema": schema})
        params: dict[str, Any] = {
            "model": request.model,
            "max_tokens": request.max_tokens,
            "messages": turns,
        }
        _mark_cache(system, turns, tools, conversation=bool(request.tools) or len(turns) > 1)
        if system:
            params["system"] = system
        if tools:
            params["tools"] = tools
            choice = _tool_choice(request, answer)
            if choice is not None:
                params["tool_choice"] = choice
        if request.extra_body:
            params["extra_body"] = dict(request.extra_body)
        return cls(request, params, answer, wrapped)

    def completion(self, read: _Read, provider: str) -> Completion:
        """The answer as sopbus's :class:`Completion`: the answer tool's input as the text."""
        text, calls, answered = read.text, [], False
        for call_id, name, given in read.calls:
            if _forced(self.request) and name == self.answer:
                value = given.get("value") if self.wrapped and isinstance(given, dict) else given
                text = value if isinstance(value, str) and not self.wrapped else json.dumps(value)
                answered = True
            else:
                arguments = given if isinstance(given, str) else json.dumps(given)
                calls.append((call_id, name, arguments))
        tool_calls: tuple[ToolCall, ...] = from_wire(self.request, tuple(calls))
        finish = _FINISH.get(read.stop_reason or "", read.stop_reason)
        if finish == "tool_calls" and answered and not tool_calls:
            finish = "stop"  # the tool called was the answer
        return Completion(
            text=text,
            usage=read.usage,
            model=self.request.model,
            provider=provider,
            finish_reason=finish,
            tool_calls=tool_calls,
        )


_ANSWER_HELP = "Give your answer by calling this tool; its input is the answer."


def _prompted(request: LLMRequest) -> bool:
    return request.schema is not None and request.output_mode == "prompt"


def _answer_name(wires: list[str]) -> str:
    name, number = ANSWER_TOOL, 1
    while name in wires:
        number += 1
        name = f"{ANSWER_TOOL}_{number}"
    return name


def _object(schema: dict[str, Any]) -> dict[str, Any]:
    return schema or {"type": "object", "properties": {}}


def _wrapped(schema: dict[str, Any]) -> dict[str, Any]:
    """A schema that is no object, as the one property of an object (a tool's input is one)."""
    return {"type": "object", "properties": {"value": schema}, "required": ["value"]}


def _tool_choice(request: LLMRequest, answer: str) -> dict[str, Any] | None:
    if _forced(request):
        if not request.tools or request.tool_choice == "none":
            return {"type": "tool", "name": answer}
        return {"type": "any"}  # one of the action's tools, or the answer
    return {"auto": {"type": "auto"}, "required": {"type": "any"}, "none": {"type": "none"}}.get(
        request.tool_choice or ""
    )


def _turns(
    messages: tuple[ChatMessage, ...], names: Mapping[str, str]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The system blocks and the user/assistant turns of ``messages``; a turn of the same
    role as the one before joins it (a tool turn is the user's: its ``tool_result``)."""
    system: list[dict[str, Any]] = []
    turns: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            if message.content:
                system.append({"type": "text", "text": message.content})
            continue
        role = "assistant" if message.role == "assistant" else "user"
        content = _blocks(message, names)
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(content)
        else:
            turns.append({"role": role, "content": content})
    for turn in turns:
        turn["content"] = turn["content"] or [{"type": "text", "text": "(empty)"}]
    return system, turns


def _blocks(message: ChatMessage, names: Mapping[str, str]) -> list[dict[str, Any]]:
    if message.role == "tool":
        return [
            {
                "type": "tool_result",
                "tool_use_id": message.tool_call_id or "",
                "content": message.content or "(empty)",
            }
        ]
    # Anthropic refuses empty text blocks: an assistant turn that only called tools has none.
    out: list[dict[str, Any]] = (
        [{"type": "text", "text": message.content}] if message.content else []
    )
    for call in message.tool_calls:
        try:
            given = json.loads(call.arguments or "{}")
        except ValueError:
            given = None
        out.append(
            {
                "type": "tool_use",
                "id": call.id,
                "name": names.get(call.name, call.name),
                "input": given if isinstance(given, dict) else {"arguments": call.arguments},
            }
        )
    return out


def _mark_cache(
    system: list[dict[str, Any]],
    turns: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    *,
    conversation: bool,
) -> None:
    """``cache_control`` breakpoints where the stable prefix ends: after the tools, after
    the system turn and, in a conversation the next call continues, after its last turn (at
    most three of the API's four)."""
    ends = [tools, system] + ([turns[-1]["content"]] if conversation and turns else [])
    for blocks in ends:
        if blocks:
            blocks[-1]["cache_control"] = _EPHEMERAL


def anthropic_from_scenario(scenario: Scenario, environ: Mapping[str, str]) -> AnthropicProvider:
    """``[llm].provider = "anthropic"``: the key from ``ANTHROPIC_API_KEY``, the server from
    ``[llm].base_url``, else ``ANTHROPIC_BASE_URL``, else Anthropic's; the SDK checked
    before the run starts."""
    env = anthropic_settings_from_env(environ)
    if not env.api_key:
        raise ConfigError(
            f"{scenario.path}: provider 'anthropic' needs an API key: set "
            f"ANTHROPIC_API_KEY in the environment or in a .env file in the working directory"
        )
    try:
        sdk()
    except ConfigError as exc:
        raise ConfigError(f"{scenario.path}: {exc}") from None
    llm = scenario.llm
    return AnthropicProvider(
        base_url=ANTHROPIC.whole_base_url(scenario, environ),
        api_key=env.api_key,
        timeout_s=llm.timeout_s,
        idle_timeout_s=llm.idle_timeout_s,
        stream=llm.stream is not False,  # not given: on
    )


ANTHROPIC = register_provider(
    "anthropic",
    anthropic_from_scenario,
    network=True,
    base_url=True,
    base_url_env="ANTHROPIC_BASE_URL",
    default_base_url=DEFAULT_BASE_URL,
    secret_env=("ANTHROPIC_API_KEY",),
    key_env="ANTHROPIC_API_KEY",
)
