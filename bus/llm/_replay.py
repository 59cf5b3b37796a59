"""Cassettes: record a run's LLM answers and replay them, free, in a later run.

A cassette is a JSON-lines file of :class:`CassetteLine` (``key``, ``role``, ``action``,
``completion``). The key is :func:`request_key`: a SHA-256 of the msgspec JSON of what the
model sees (messages, model, temperature, max_tokens, schema, schema name, output mode, and
``extra_body`` where one is given, the tools offered where there are any: a request
without them keys as before they existed).
``role`` and ``action`` are left out of the key on purpose: they are bookkeeping the model
never sees, so renaming a role keeps its recordings; they are kept on the line for people and
for error messages.

The same request may be asked more than once (two roles with one prompt, a retried repair).
The answers recorded under one key are replayed in recorded order, the last one repeating,
so a replayed run sees what the recorded run saw.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from .._errors import ConfigError
from .._protocol import (
    ChatMessage,
    Completion,
    LiveFeed,
    LLMRequest,
    PromptCounter,
    Provider,
    ProviderBase,
    ToolSpec,
)
from .._util import JsonlWriter
from ..scenario import register_provider
from ._recording import read_recording  # the recording's reader skips its tool lines

if TYPE_CHECKING:
    from ..scenario import Scenario


class CassetteLine(msgspec.Struct, frozen=True, kw_only=True):
    """One recorded answer."""

    key: str
    role: str
    action: str
    completion: Completion


class _Seen(msgspec.Struct, frozen=True, array_like=True):
    # Field order is part of the key: append new fields at the end, never reorder.
    messages: tuple[ChatMessage, ...]
    model: str
    temperature: float
    max_tokens: int
    schema: dict[str, object] | None
    schema_name: str | None
    output_mode: str


class _SeenSampled(_Seen, frozen=True, array_like=True):
    # Only a request with extra_body keys on it, so every older recording keeps its key.
    extra_body: dict[str, object]


class _SeenTooled(_Seen, frozen=True, array_like=True):
    # Only a request that offers tools keys on them (and on extra_body, given or not).
    extra_body: dict[str, object] | None
    tools: tuple[ToolSpec, ...]


class _SeenChoosing(_SeenTooled, frozen=True, array_like=True):
    # Only a request that sets tool_choice keys on it.
    tool_choice: str


_encoder = msgspec.json.Encoder(order="sorted")


def request_key(request: LLMRequest) -> str:
    """The cassette key of ``request`` (see the module docstring)."""
    return hashlib.sha256(_seen(request)).hexdigest()


def batch_key(requests: Sequence[LLMRequest]) -> str:
    """The fingerprint of a batch of requests: one SHA-256 over what each asks, in order
    (what :func:`request_key` hashes of each)."""
    digest = hashlib.sha256()
    for request in requests:
        digest.update(_seen(request))
    return digest.hexdigest()


def _seen(request: LLMRequest) -> bytes:
    kind: type[_Seen] = _SeenSampled if request.extra_body else _Seen
    extra: tuple[object, ...] = (request.extra_body,) if request.extra_body else ()
    if request.tools:
        kind, extra = _SeenTooled, (request.extra_body or None, request.tools)
        if request.tool_choice is not None:
            kind, extra = _SeenChoosing, (*extra, request.tool_choice)
    seen = kind(
        request.messages,
        request.model,
        request.temperature,
        request.max_tokens,
        request.schema,
        request.schema_name,
        request.output_mode,
        *extra,
    )
    return _encoder.encode(seen)


class ReplayProvider(ProviderBase):
    """Answers from a cassette; each answer is ``replayed=True`` and the gateway bills $0."""

    name = "replay"
    free = True  # tells the Gateway to reserve nothing: a replayed answer costs nothing

    def __init__(self, cassette_path: str | Path):
        self.path = Path(cassette_path)
        if not self.path.is_file():
            raise ConfigError(f"cassette {self.path} does not exist; record one with --record FILE")
        self._answers: dict[str, list[Completion]] = defaultdict(list)

        for line in read_recording(self.path).calls:
            self._answers[line.key].append(line.completion)
        self._used: dict[str, int] = defaultdict(int)

    async def complete(self, request: LLMRequest) -> Completion:
        key = request_key(request)
        answers = self._answers.get(key)
        if not answers:
            raise ConfigError(
                f"cassette {self.path} has no answer for action {request.action!r} of role "
                f"{request.role!r} on model {request.model!r} (key {key[:12]}): the prompt differs "
                "from the recorded run; record the cassette again with --record"
            )
        index = min(self._used[key], len(answers) - 1)
        self._used[key] += 1
        return msgspec.structs.replace(answers[index], replayed=True)


class RecordingProvider(ProviderBase):
    """Wraps ``inner`` and appends each answer to ``cassette_path`` (flushed per line),
    each line rewritten by ``scrub`` first (the run's secrets blanked).

    Use it with ``async with``: that opens ``inner`` too when it is a context manager (the
    ``openai`` provider is), and closes both; :meth:`aclose` closes the cassette alone.
    """

    def __init__(
        self,
        inner: Provider,
        cassette_path: str | Path,
        *,
        scrub: Callable[[bytes], bytes] | None = None,
    ):
        self.inner: Provider = inner
        self.name = inner.name
        self._writer = JsonlWriter(Path(cassette_path))
        # The run's redaction (RunStore.redactor): an answer that repeats the key or the
        # URL's credentials must not keep them in the cassette either.
        self._writer.scrub = scrub

    async def complete(self, request: LLMRequest) -> Completion:
        completion = await self.inner.complete(request)
        self._writer.write(
            CassetteLine(
                key=request_key(request),
                role=request.role,
                action=request.action,
                completion=completion,
            )
        )
        return completion

    async def aclose(self) -> None:
        self._writer.close()

    def prompt_counter(self) -> PromptCounter | None:
        return self.inner.prompt_counter()

    def prompt_overhead(self, request: LLMRequest) -> int:
        return self.inner.prompt_overhead(request)

    def show_live(self, feed: LiveFeed) -> None:
        self.inner.show_live(feed)

    async def __aenter__(self) -> RecordingProvider:
        await self.inner.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        try:
            await self.inner.__aexit__(*exc)
        finally:
            await self.aclose()


def replay_from_scenario(scenario: Scenario, environ: Mapping[str, str]) -> ReplayProvider:
    """``[llm].provider = "replay"``: the answers of ``[llm].cassette``."""
    cassette = scenario.cassette_path()
    if cassette is None:
        raise ConfigError(
            f"{scenario.path}: provider 'replay' needs a cassette: set "
            f"[llm].cassette to a file recorded with `sopbus run --record FILE`"
        )
    return ReplayProvider(cassette)


register_provider("replay", replay_from_scenario, cassette=True)
