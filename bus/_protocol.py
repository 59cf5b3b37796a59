"""The LLM protocol every provider speaks: a request in, a completion with usage out.

These are plain values (msgspec Structs) so that a request can be hashed for a replay
cassette and a completion written to the run log as it is.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal, NamedTuple, Protocol

import msgspec

DEFAULT_MAX_TOKENS = 1024
"""The ``max_tokens`` of a call that neither the scenario's ``[llm].max_tokens``, nor its
action's default (WriteCode's 4096), nor a setting of the action or role gives one."""


class ToolSpec(msgspec.Struct, frozen=True, kw_only=True):
    """One tool as its source lists it: ``name`` as the source calls it (``git_log``; in an
    :class:`LLMRequest`, the full name ``git.git_log``), ``description`` for the model,
    ``parameters`` the JSON schema (an object) of its arguments."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = msgspec.field(default_factory=dict)


class ToolCall(msgspec.Struct, frozen=True, kw_only=True):
    """One call a model asked for: ``id`` as the model gave it, ``name`` the full name
    (``git.git_log``), ``arguments`` the JSON text of the arguments as the model wrote it."""

    id: str
    name: str
    arguments: str = "{}"


class ToolOutput(msgspec.Struct, frozen=True, kw_only=True):
    """What a tool gave back, as text for the model. ``is_error``: the tool said it failed
    (the text says how; it still goes back to the model as the result). ``chars``: the
    length of the whole result before any cut; ``cut``: ``text`` was cut to the source's
    bound (the text says so at its end)."""

    text: str
    is_error: bool = False
    chars: int = 0
    cut: bool = False


class ChatMessage(msgspec.Struct, frozen=True, omit_defaults=True):
    """One chat turn sent to the model: ``role`` is ``system``, ``user``, ``assistant`` or
    ``tool``. An assistant turn that asked for tools carries its ``tool_calls``; a ``tool``
    turn is one call's result, ``tool_call_id`` naming the call. Both are left out of the
    encoding when empty, so a message without them encodes (and keys a recording) as
    before tools existed."""

    role: str
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None


class LLMRequest(msgspec.Struct, frozen=True, kw_only=True):
    """What an action asks of a model.

    ``schema`` is the JSON schema of the expected output (a pydantic model's
    ``model_json_schema()``) or ``None`` for free text. ``output_mode`` says how the schema
    is asked for: ``json_schema`` (the API's structured outputs) or ``prompt`` (the schema is
    written into the prompt, for servers without structured outputs). ``role`` and
    ``action`` say who asks; the ledger records them and the simulator picks fixtures by
    them. ``subject`` is what the call is for, where the action knows it (the file a
    ``WriteTest`` writes, a book's heading, a sample): the ledger records it so that two
    calls of one action can be told apart. ``stream``, ``timeout_s``, ``idle_timeout_s`` and
    ``max_attempts`` are a role's or an action's own transport settings (``llm = {...}``);
    ``None`` keeps the run's (``[llm]``). None of these is part of what the model sees, so
    none is part of a cassette's key. ``extra_body`` is sent with the request as it is (a server's
    sampling settings, ``repeat_penalty``...): it changes the answer, so it is part of the key.
    ``tools`` are the tools offered to the model (full names ``SOURCE.TOOL``); part of the
    key when there are any. ``tool_choice`` is the API's ``tool_choice`` for them
    (``"required"``: the answer must call a tool; ``"none"``: it must not); ``None`` leaves
    it to the server (``"auto"``) and keeps it out of the key.
    """

    messages: tuple[ChatMessage, ...]
    model: str
    temperature: float = 0.2
    max_tokens: int = DEFAULT_MAX_TOKENS
    schema: dict[str, Any] | None = None
    schema_name: str | None = None
    output_mode: Literal["json_schema", "prompt"] = "json_schema"
    role: str = ""
    action: str = ""
    subject: str = ""
    step: int = 0  # the model call's step in its tool loop (1, 2, ...); 0: no tool loop
    stream: bool | None = None
    timeout_s: float | None = None
    max_attempts: int | None = None
    extra_body: dict[str, Any] | None = None
    tools: tuple[ToolSpec, ...] = ()
    idle_timeout_s: float | None = None  # the simulator's seed leaves it out
    tool_choice: Literal["auto", "required", "none"] | None = None  # the seed leaves out None


class Usage(msgspec.Struct, frozen=True):
    """Token counts of one call, as the provider reports (or, for the simulator, counts) them.

    ``prompt_tokens`` is the whole prompt; of it, ``cached_tokens`` were read from the
    provider's prompt cache and ``cache_write_tokens`` written to it (Anthropic bills each
    at its own price; a provider that does not say leaves them 0)."""

    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0
    cache_write_tokens: int = 0


class Completion(msgspec.Struct, frozen=True, kw_only=True):
    """A provider's answer: the text (JSON text when a schema was asked for) and its usage.

    ``finish_reason`` is why the model stopped, as the server said it (``"length"``: cut at
    ``max_tokens``, so the text is not whole); ``None`` where the provider does not say.
    ``tool_calls``: the tools the model asks to be called (full names) before it answers.
    """

    text: str
    usage: Usage
    model: str
    provider: str
    replayed: bool = False
    finish_reason: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()


PromptCounter = Callable[["LLMRequest"], Awaitable["int | None"]]
"""Counts a request's prompt on the server (``None``: it cannot); the gateway bounds the
call's reservation by it."""


class Answers(NamedTuple):
    """What :meth:`sopbus.bus.Gateway.complete_many` gives back: ``answers[i]`` answers the
    ``i``-th request, ``None`` where the call was not made; ``refused`` says why the cap
    stopped the calls not made (``None``: every call was made)."""

    answers: list[Completion | None]
    refused: str | None = None

    @property
    def made(self) -> int:
        """How many of the calls were made."""
        return sum(answer is not None for answer in self.answers)


class LiveFeed(Protocol):
    """Where a streaming provider shows the text of its calls in flight (the live view)."""

    def open(self, request: LLMRequest) -> int: ...
    def feed(self, call: int, piece: str) -> None: ...
    def close(self, call: int) -> None: ...


class Person(Protocol):
    """The person who answers ``human = true`` roles, as the live view sees them:
    ``waiting`` names the call they are asked for now; ``pause`` (set by the live view)
    keeps the display quiet while they type."""

    waiting: str | None
    pause: Callable[[], Any] | None


class Completer(Protocol):
    """What a provider must implement: a ``name`` (the ledger's ``provider``) and
    ``complete``. Everything else a caller uses is on :class:`Provider`, with defaults in
    :class:`ProviderBase`; :func:`as_provider` gives any completer those defaults."""

    name: str

    async def complete(self, request: LLMRequest) -> Completion: ...


class Provider(Protocol):
    """An LLM backend, with every member a caller may use. Raises
    :class:`sopbus.bus.ProviderError` on failure; never retries itself (the gateway retries,
    so that each attempt is reserved, priced and logged). Subclass :class:`ProviderBase` to
    get the defaults and write only ``name`` and ``complete``.

    * ``free``: its answers cost nothing (a replay): the gateway reserves nothing for them.
    * ``inner``: the provider a wrapper (a recorder, a person's router) stands in front of.
    * ``human``: the person a router sends ``human = true`` roles' calls to.
    * ``name_for(request)``: who answers ``request`` (a router answers some calls by a
      person); the ledger's ``provider``.
    * ``observe(request)``: ``request`` was answered from a run's recording (resume, fork),
      so a stateful provider (the simulator's fixture sequences) moves on as if it had.
    * ``prompt_counter()``: what counts prompts on the server, or ``None``.
    * ``prompt_overhead(request)``: prompt tokens the provider adds to what ``request``
      says and bills for (Anthropic's system prompt for tools), which sopbus's own bound
      of the request cannot see; the gateway adds them to the reservation's bound.
    * ``show_live(feed)``: stream the text of calls in flight to ``feed`` (the live view).
    * ``batches`` and ``complete_batch(requests)``: whether it answers many requests at
      once, and the answers, in order (without one, the gateway sends them one by one).
      Only a provider that counts usage itself with sopbus's own tokenizer (the
      simulator) offers it: a batch is priced as reported, checked against each call's
      reservation, without the recount of :mod:`sopbus.bus.llm._plausible`.
    * ``async with provider``: opened for as long as it is used (a connection pool).
    """

    name: str

    @property
    def free(self) -> bool: ...
    @property
    def inner(self) -> Provider | None: ...
    @property
    def human(self) -> Person | None: ...

    async def complete(self, request: LLMRequest) -> Completion: ...
    def name_for(self, request: LLMRequest) -> str: ...
    def observe(self, request: LLMRequest) -> None: ...
    def prompt_counter(self) -> PromptCounter | None: ...
    def prompt_overhead(self, request: LLMRequest) -> int: ...
    def show_live(self, feed: LiveFeed) -> None: ...
    @property
    def batches(self) -> bool: ...
    def complete_batch(self, requests: Sequence[LLMRequest]) -> list[Completion]: ...
    async def __aenter__(self) -> Any: ...
    async def __aexit__(self, *exc: object) -> None: ...


class ProviderBase:
    """The defaults of :class:`Provider`'s optional members: not free, no wrapper, no
    person, answered by itself, nothing to observe, no server-side counting, no live text,
    nothing to open or close. A provider subclasses it and writes ``name`` and
    ``complete`` (and overrides what it does differently)."""

    name: str
    free: bool = False
    batches: bool = False
    inner: Provider | None = None
    human: Person | None = None

    async def complete(self, request: LLMRequest) -> Completion:
        raise NotImplementedError(f"{type(self).__name__} must define async complete(request)")

    def name_for(self, request: LLMRequest) -> str:
        return self.name

    def observe(self, request: LLMRequest) -> None:
        return None

    def prompt_counter(self) -> PromptCounter | None:
        return None

    def prompt_overhead(self, request: LLMRequest) -> int:
        return 0

    def show_live(self, feed: LiveFeed) -> None:
        return None

    def complete_batch(self, requests: Sequence[LLMRequest]) -> list[Completion]:
        raise NotImplementedError(f"the {self.name} provider has no batch method (batches)")

    async def __aenter__(self) -> Any:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None


class _Adapted(ProviderBase):
    """A completer that is not a :class:`ProviderBase`, with the defaults around it."""

    def __init__(self, completer: Completer):
        self._completer = completer
        self.name = completer.name
        # Duck-typed on purpose, once, here: an object written before the protocol declared
        # these may still have them (and callers then need not probe).
        self.free = bool(getattr(completer, "free", False))
        self._name_for = getattr(completer, "name_for", None)
        self._observe = getattr(completer, "observe", None)
        self._overhead = getattr(completer, "prompt_overhead", None)

    async def complete(self, request: LLMRequest) -> Completion:
        return await self._completer.complete(request)

    def name_for(self, request: LLMRequest) -> str:
        return str(self._name_for(request)) if callable(self._name_for) else self.name

    def observe(self, request: LLMRequest) -> None:
        if callable(self._observe):
            self._observe(request)

    def prompt_overhead(self, request: LLMRequest) -> int:
        return int(self._overhead(request)) if callable(self._overhead) else 0

    async def __aenter__(self) -> Any:
        enter = getattr(self._completer, "__aenter__", None)
        if enter is not None:
            await enter()
        return self

    async def __aexit__(self, *exc: object) -> None:
        leave = getattr(self._completer, "__aexit__", None)
        if leave is not None:
            await leave(*exc)


def as_provider(completer: Completer) -> Provider:
    """``completer`` as a whole :class:`Provider`: itself when it is a :class:`ProviderBase`,
    else wrapped with the defaults (an object written to the two-member protocol before the
    others existed keeps working)."""
    if isinstance(completer, ProviderBase):
        return completer
    return _Adapted(completer)
