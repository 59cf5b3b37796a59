"""The ``openai`` provider: the official SDK's ``AsyncOpenAI`` for any OpenAI-compatible server.

Open it once per run with ``async with OpenAIProvider(...) as provider:``. The SDK's own
retries are off (``max_retries=0``): the :class:`~sopbus.bus.Gateway` retries, so that each attempt is
reserved, priced and ledgered. Failures become :class:`~sopbus.bus.ProviderError`: 429, 408, 409, 5xx,
timeouts and broken connections are retryable (with the server's ``retry-after``), other
4xx are not. ``timeout_s`` bounds each call as a whole, streamed or not; ``idle_timeout_s``
the silence inside a stream once it began (:mod:`sopbus.bus.llm._deadlines`).

Calls stream by default. A server that refuses (an HTTP 400 or 422 naming ``stream``) is
asked again without, within the same attempt, and one that answers a streamed request with
a plain JSON body is read as it is; either way it is not asked to stream again in this run,
and that is logged once.

The body is read here, within a size bound, and parsed strictly (:mod:`sopbus.bus.llm._wire`): an
HTML page, broken JSON, a malformed or error chunk in a stream, a stream cut before its end,
or a body past the bound is a :class:`~sopbus.bus.ProviderError` naming the server and quoting what
it sent. An error event inside a stream counts as its HTTP status (a gateway's
``{"error": {"code": "500"}}`` is retried like an HTTP 500). Failures after the server began
to answer are ``maybe_billed``, and the gateway counts them at their reservation.

Structured output is asked for with ``response_format`` of type ``json_schema``; it is
``strict`` when the schema fits the strict subset (every property required, no extra
properties, only supported keywords), otherwise ``strict: false``. A request with
``output_mode="prompt"`` writes the schema into the system prompt instead, for servers that
lack structured outputs. Usage (cached tokens included) is taken from the API as it is; when
streaming, from the last chunk (``stream_options={"include_usage": True}``).

With ``tokenize`` (``[llm].tokenize``, on by default) the server's own count of a prompt
bounds its reservation where the server can count (llama.cpp, vLLM; see
:mod:`sopbus.bus.llm._server_tokens`): :meth:`OpenAIProvider.prompt_tokens`.

The provider never reads the environment: the caller passes ``base_url`` and ``api_key``
(:func:`openai_settings_from_env` reads the usual variables for the CLI). The key is never
logged nor shown in ``repr``.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

import msgspec
import trio
from loguru import logger

from .._errors import ConfigError, ProviderError
from .._protocol import Completion, LiveFeed, LLMRequest, PromptCounter, ProviderBase, Usage
from .._util import redact_url
from ..scenario import register_provider
from ._deadlines import IdleBound, refuses_stream, timed_out, went_silent
from ._request import from_wire, request_params
from ._server_tokens import Reply, ServerTokens
from ._tokens import count_text, prompt_upper_bound
from ._wire import (
    Answer,
    Lines,
    StreamReader,
    body_limit,
    context_exceeded,
    first_line,
    head,
    read_answer,
    read_body,
    retryable_status,
)

if TYPE_CHECKING:
    import httpx2
    import openai

    from ..scenario import Scenario

# The SDK (openai, and httpx2 under it) is imported where it is used, not here: the registry
# imports this module for the provider's capabilities in every run, the simulator's too.

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_TIMEOUT_S = 600.0  # as [llm].timeout_s (bus.scenario), which the CLI passes
DEFAULT_IDLE_TIMEOUT_S = 60.0  # as [llm].idle_timeout_s
# Counting a prompt on the server is a quick request; past this, the call keeps the bound.
COUNT_TIMEOUT_S = 10.0


class OpenAISettings(msgspec.Struct, frozen=True):
    """Where the ``openai`` provider connects; ``repr`` hides the key."""

    base_url: str | None
    api_key: str | None

    def __repr__(self) -> str:
        return (
            f"OpenAISettings(base_url={self.base_url!r}, api_key={'***' if self.api_key else None})"
        )


def openai_settings_from_env(environ: Mapping[str, str]) -> OpenAISettings:
    """``OPENAI_BASE_URL`` and ``OPENAI_API_KEY`` from ``environ`` (the CLI passes ``os.environ``)."""
    return OpenAISettings(
        base_url=environ.get("OPENAI_BASE_URL") or None,
        api_key=environ.get("OPENAI_API_KEY") or None,
    )


class OpenAIProvider(ProviderBase):
    """An OpenAI-compatible chat completions endpoint (see the module docstring).

    ``max_tokens_param`` names the request field that carries ``max_tokens``:
    ``max_completion_tokens`` (OpenAI's current name, required by reasoning models) or
    ``max_tokens`` (older compatible servers). ``timeout_s``, ``idle_timeout_s`` and
    ``stream`` are the run's; a request's own (a role's ``llm = {...}``) replace them for it.
    """

    name = "openai"

    def __init__(
        self,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S,
        stream: bool = True,
        max_tokens_param: Literal["max_completion_tokens", "max_tokens"] = "max_completion_tokens",
        tokenize: bool = True,
    ):
        # Errors, logs and repr name the server by base_url, so it holds no credentials;
        # only the client gets the URL as given (user info, a key in the query).
        self._url = base_url or DEFAULT_BASE_URL
        self.base_url = redact_url(self._url)
        self._api_key = api_key
        self.timeout_s = timeout_s
        self.idle_timeout_s = idle_timeout_s
        self.stream = stream
        self._streams = True  # False once the server refused a stream: not asked again
        self.max_tokens_param = max_tokens_param
        # OpenAI's own API counts with the tokenizers sopbus has; it has no /tokenize to ask.
        self.tokenize = tokenize and self._url.rstrip("/") != DEFAULT_BASE_URL
        self._tokens: ServerTokens | None = None
        self._client: openai.AsyncOpenAI | None = None
        self.live: LiveFeed | None = None  # set by the live view: streamed text goes there

    def __repr__(self) -> str:
        return f"OpenAIProvider(base_url={self.base_url!r}, stream={self.stream})"

    async def __aenter__(self) -> OpenAIProvider:
        import openai

        if not self._api_key:
            raise ConfigError(
                f"no API key for the openai provider at {self.base_url}; set "
                "OPENAI_API_KEY (any non-empty value for a server without keys)"
            )
        client = openai.AsyncOpenAI(
            api_key=self._api_key, base_url=self._url, timeout=self.timeout_s, max_retries=0
        )
        self._client = await client.__aenter__()
        self._tokens = ServerTokens(self._post_root) if self.tokenize else None
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    async def complete(self, request: LLMRequest) -> Completion:
        if self._client is None:
            raise RuntimeError("OpenAIProvider is not open; use `async with OpenAIProvider(...)`")
        # A request's own settings (a role's llm = {...}) replace the run's.
        stream = (self.stream if request.stream is None else request.stream) and self._streams
        timeout_s = self.timeout_s if request.timeout_s is None else request.timeout_s
        idle_s = self.idle_timeout_s if request.idle_timeout_s is None else request.idle_timeout_s
        call = _Call(request, timeout_s, idle_s, trio.current_time())
        answer: Answer | None = None
        # timeout_s bounds the whole call: the SDK's timeout is per read, and a server that
        # trickles a byte a second would never trip it.
        with trio.move_on_after(timeout_s):
            answer = await self._answer(call, stream)
        if answer is None:
            raise timed_out(self.base_url, timeout_s, stream=stream)
        text, usage, finish_reason, wired = answer
        calls = from_wire(request, wired)
        if usage is None:
            said = text + "".join(f"{c.id} {c.name} {c.arguments}" for c in calls)
            usage = _counted_usage(request, said, self.base_url, self._counted(request))
        return Completion(
            text=text,
            usage=usage,
            model=request.model,
            provider=self.name,
            finish_reason=finish_reason,
            tool_calls=calls,
        )

    def show_live(self, feed: LiveFeed) -> None:
        if self.stream:
            self.live = feed

    def prompt_counter(self) -> PromptCounter | None:
        """:meth:`prompt_tokens` when the server is asked to count (``tokenize``)."""
        return self.prompt_tokens if self.tokenize else None

    async def prompt_tokens(self, request: LLMRequest) -> int | None:
        """The prompt tokens the server will bill for ``request``, by its own count, or
        ``None`` where it cannot count (the gateway then keeps its bound; see
        :mod:`sopbus.bus.llm._server_tokens` for the margin it adds otherwise)."""
        if self._tokens is None:
            return None
        with trio.move_on_after(min(self.timeout_s, COUNT_TIMEOUT_S)):
            counted = await self._tokens.count(self._count_body(request))
            return counted
        return None

    def _counted(self, request: LLMRequest) -> int | None:
        return self._tokens.cached(self._count_body(request)) if self._tokens else None

    def _count_body(self, request: LLMRequest) -> dict[str, Any]:
        """The chat completion's JSON body, as the server renders its prompt from it."""
        params = request_params(request, max_tokens_param=self.max_tokens_param)
        return {**params.pop("extra_body", {}), **params}

    async def _post_root(self, path: str, body: dict[str, Any]) -> Reply:
        """``body`` posted to ``path`` on the server's root (the base URL without ``/v1``),
        with the key; any failure is a reply with its status (0: no answer)."""
        import httpx2
        import openai

        assert self._client is not None
        base = httpx2.URL(self._url)
        url = base.copy_with(path=re.sub(r"/v1/?$", "", base.path.rstrip("/")) + path)
        try:
            response = await self._client.post(str(url), body=body, cast_to=httpx2.Response)
        except openai.APIStatusError as error:
            return Reply(error.status_code, _json_or_none(error.response))
        except (openai.APIError, httpx2.HTTPError):
            return Reply(0)
        return Reply(response.status_code, _json_or_none(response))

    async def _answer(self, call: _Call, stream: bool) -> Answer:
        """The answer, streamed if asked; a server that refuses to stream is asked again
        without, and is not asked to stream again in this run."""
        try:
            return await self._exchange(call, stream)
        except _StreamRefused as refused:
            self._no_streams(refused.why)
            return await self._exchange(call, False)

    def _no_streams(self, why: str) -> None:
        if self._streams:
            self._streams = False
            logger.warning(
                "{} {}; asking it without streaming for the rest of the run", self.base_url, why
            )

    async def _exchange(self, call: _Call, stream: bool) -> Answer:
        """One request and its whole answer, read within the body size bound."""
        request = call.request
        params = request_params(request, max_tokens_param=self.max_tokens_param, stream=stream)
        if request.timeout_s is not None:  # the SDK's per-read timeout follows it too
            params["timeout"] = call.timeout_s
        live = self.live if stream else None
        shown = live.open(request) if live is not None else 0
        try:
            return await self._read(
                params, call, partial(live.feed, shown) if live is not None else None, stream
            )
        finally:
            if live is not None:
                live.close(shown)

    async def _read(
        self,
        params: dict[str, Any],
        call: _Call,
        on_text: Callable[[str], None] | None,
        stream: bool,
    ) -> Answer:
        import httpx2
        import openai

        assert self._client is not None
        limit = body_limit(call.request.max_tokens)
        try:
            async with self._client.chat.completions.with_streaming_response.create(
                **params
            ) as response:
                chunks = response.http_response.aiter_bytes()
                content_type = response.headers.get("content-type", "")
                if stream and not content_type.startswith("application/json"):
                    return await self._read_stream(chunks, call, on_text)
                if stream:  # a plain answer to a streamed request: the server cannot stream
                    self._no_streams("answered a streamed request with a plain JSON body")
                parts: list[bytes] = []
                await read_body(chunks, limit, self.base_url, parts.append)
                return read_answer(b"".join(parts), self.base_url, content_type)
        except openai.APIStatusError as error:
            said = _said(error)
            if stream and refuses_stream(error.status_code, said):
                why = f"refused a streamed call (HTTP {error.status_code}: {said})"
                raise _StreamRefused(why) from None
            raise _provider_error(error, self.base_url) from error
        except openai.APIError as error:
            raise _provider_error(error, self.base_url) from error
        except httpx2.TimeoutException as error:  # while reading the body, past the SDK
            raise ProviderError(
                f"{self.base_url} timed out while answering", retryable=True, maybe_billed=True
            ) from error
        except httpx2.TransportError as error:
            raise ProviderError(
                f"{self.base_url} broke off its answer: {error}", retryable=True, maybe_billed=True
            ) from error

    async def _read_stream(
        self, chunks: AsyncIterator[bytes], call: _Call, on_text: Callable[[str], None] | None
    ) -> Answer:
        """A streamed answer's events, read within the body size bound and the idle bound."""
        reader = StreamReader(self.base_url, on_text=on_text)
        lines = Lines(reader.feed)
        idle = IdleBound(call.idle_s)

        def take(chunk: bytes) -> None:
            idle.heard()
            lines(chunk)

        with idle.scope:
            seen = await read_body(chunks, body_limit(call.request.max_tokens), self.base_url, take)
            lines.close()
            return reader.end(seen)
        elapsed = trio.current_time() - call.started
        raise went_silent(self.base_url, call.idle_s, elapsed, len(reader.text()))


class _Call(NamedTuple):
    """One call's request and bounds, and when it began."""

    request: LLMRequest
    timeout_s: float
    idle_s: float
    started: float


class _StreamRefused(Exception):
    """The server answered a streamed request with an error that names streaming."""

    def __init__(self, why: str):
        super().__init__(why)
        self.why = why


def _counted_usage(request: LLMRequest, text: str, base_url: str, counted: int | None) -> Usage:
    # Some compatible servers send no usage. The call was still made, so count it ourselves
    # rather than ledger it as free: the prompt at the server's own count where it gave one,
    # else on the high side (the bound its reservation took).
    logger.warning("{} sent no usage for {}; counting tokens locally", base_url, request.action)
    bound = prompt_upper_bound(request)
    return Usage(
        prompt_tokens=bound if counted is None else min(bound, counted),
        completion_tokens=count_text(text, request.model),
    )


def _json_or_none(response: httpx2.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def _provider_error(error: openai.APIError, base_url: str) -> ProviderError:
    import openai

    if isinstance(error, openai.APITimeoutError):
        # The request may have reached the server, which may be generating for it.
        return ProviderError(f"{base_url} timed out", retryable=True, maybe_billed=True)
    if isinstance(error, openai.APIConnectionError):
        return ProviderError(f"cannot reach {base_url}: {error}", retryable=True)
    if isinstance(error, openai.APIStatusError):
        status = error.status_code
        said = context_exceeded(error.body) or _said(error)
        return ProviderError(
            f"{base_url} answered HTTP {status}: {said}",
            retryable=retryable_status(status),
            status=status,
            retry_after=_retry_after(error.response.headers),
        )
    return ProviderError(f"{base_url}: {first_line(str(error))}", retryable=False)


def _said(error: openai.APIStatusError) -> str:
    """The first line of what the server said with an error status (its JSON error's
    ``message`` when there is one, else its body as text)."""
    body = error.body
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return (
            first_line(body["message"])
            or f"(an empty message; body {head(error.response.content)})"
        )
    return first_line(error.response.text) or "(no body)"


def _retry_after(headers: Mapping[str, str]) -> float | None:
    for header, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(header)
        if value is not None:
            try:
                return max(float(value) / scale, 0.0)
            except ValueError:
                continue  # an HTTP date; rare for APIs, and the backoff still applies
    return None


def openai_from_scenario(scenario: Scenario, environ: Mapping[str, str]) -> OpenAIProvider:
    """``[llm].provider = "openai"``: the key from ``OPENAI_API_KEY``, the server from
    ``[llm].base_url``, else ``OPENAI_BASE_URL``, else OpenAI's."""
    env = openai_settings_from_env(environ)
    if not env.api_key:
        raise ConfigError(
            f"{scenario.path}: provider 'openai' needs an API key: set "
            f"OPENAI_API_KEY in the environment or in a .env file in the working "
            f"directory (any value for a local server)"
        )
    llm = scenario.llm
    return OpenAIProvider(
        base_url=OPENAI.whole_base_url(scenario, environ),
        api_key=env.api_key,
        timeout_s=llm.timeout_s,
        idle_timeout_s=llm.idle_timeout_s,
        stream=llm.stream is not False,  # not given: on, where the server can stream
        max_tokens_param=llm.max_tokens_param,
        tokenize=llm.tokenize,
    )


OPENAI = register_provider(
    "openai",
    openai_from_scenario,
    network=True,
    base_url=True,
    base_url_env="OPENAI_BASE_URL",
    default_base_url=DEFAULT_BASE_URL,
    secret_env=("OPENAI_API_KEY",),
    key_env="OPENAI_API_KEY",
)
