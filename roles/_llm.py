"""Asking a model for a validated answer: the LLM settings of a call, and the repair loop.

Every call goes through :meth:`sopbus.bus.Turn.ask`, so each attempt, repairs included, is
budget-checked, priced and written to the ledger by the run's gateway.

An action with ``tools`` runs a tool loop inside each ask: the request offers the tools; an
answer that asks for tools has them run (the calls of one answer concurrently) and their
results sent back as ``tool`` messages, and the model is asked again, until it answers or
``max_tool_steps`` answers' calls have run. The answer then goes through the repairs as any.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, TypeVar, overload

import msgspec
import pydantic
import trio
from pydantic import BaseModel, ConfigDict, Field

from sopbus.bus import (
    ChatMessage,
    Completion,
    ConfigError,
    LLMRequest,
    ModelOutputError,
    ToolCall,
    ToolOutput,
    Turn,
    exception_leaves,
)
from sopbus.bus.llm import DEFAULT_MAX_TOOL_STEPS, ToolChoice

from ._prompt import describe_validation_error, repair_text, schema_text

M = TypeVar("M", bound=BaseModel)


class LLMSettings(BaseModel):
    """Which model an action uses and how. ``None`` means "inherit".

    Layers, from weakest to strongest: the action's ``default_max_tokens`` (WriteCode's
    4096), the run's defaults (``[llm]`` of the scenario), the action's own settings, the
    role's settings (``Role.llm`` or ``[[roles]] llm = {...}``). The role wins over the
    action because it is the more specific place: one role of a team moved to a stronger
    model should use it for everything it does. So a scenario's ``[llm].max_tokens`` is
    every action's, unless the action's or the role's ``llm`` sets its own.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str | None = None
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    max_tokens: int | None = Field(default=None, gt=0)
    output_mode: Literal["json_schema", "prompt"] | None = None
    # Transport settings of this role's or action's calls; None keeps the run's [llm] ones.
    stream: bool | None = None
    timeout_s: float | None = Field(default=None, gt=0)
    idle_timeout_s: float | None = Field(default=None, gt=0)
    max_attempts: int | None = Field(default=None, ge=1)
    # Server sampling settings sent as they are; merged key by key over the weaker layer's.
    extra_body: dict[str, Any] | None = None

    def over(self, base: LLMSettings) -> LLMSettings:
        """These settings laid over ``base``: a field set here wins, a ``None`` keeps base's
        (``extra_body`` is merged key by key, so a role's ``top_k`` keeps the run's others)."""
        given = self.model_dump(exclude_none=True)
        if "extra_body" in given and base.extra_body:
            given["extra_body"] = {**base.extra_body, **given["extra_body"]}
        return base.model_copy(update=given) if given else base


def layered(*layers: LLMSettings) -> LLMSettings:
    """The layers merged, each over the ones before it."""
    merged = LLMSettings()
    for layer in layers:
        merged = layer.over(merged)
    return merged


def build_request(
    messages: Sequence[ChatMessage],
    *,
    output: type[BaseModel] | None,
    llm: LLMSettings,
    action: str,
    role: str,
    subject: str = "",
) -> LLMRequest:
    """The request for one call. With ``output_mode="prompt"`` the schema is written into
    the last user turn here, so providers only ever pass ``schema`` on to an API.
    ``subject`` (the file, heading or sample the call is for) goes to the ledger only."""
    if llm.model is None:
        raise ConfigError(
            f"no model for action {action!r} of role {role!r}: set [llm].model "
            f'in the scenario, or llm = {{ model = "..." }} on the role or action'
        )
    schema = output.model_json_schema() if output is not None else None
    if schema is not None and llm.output_mode == "prompt":
        messages = _append_to_last(messages, schema_text(schema))
    options = llm.model_dump(
        include={
            "temperature",
            "max_tokens",
            "output_mode",
            "stream",
            "timeout_s",
            "idle_timeout_s",
            "max_attempts",
            "extra_body",
        },
        exclude_none=True,
    )
    return LLMRequest(
        messages=tuple(messages),
        model=llm.model,
        schema=schema,
        schema_name=schema_name(action) if schema is not None else None,
        role=role,
        action=action,
        subject=subject,
        **options,
    )


def schema_name(action: str) -> str:
    """A schema name the OpenAI API accepts (``^[a-zA-Z0-9_-]{1,64}$``) made from the action's."""
    cleaned = "".join(c if c.isascii() and (c.isalnum() or c in "_-") else "_" for c in action)
    return cleaned[:64] or "output"


@overload
async def ask_model(
    turn: Turn,
    messages: Sequence[ChatMessage],
    *,
    output: type[M],
    llm: LLMSettings,
    action: str,
    role: str,
    max_repairs: int,
    subject: str = "",
    tools: Sequence[str] = (),
    max_tool_steps: int = DEFAULT_MAX_TOOL_STEPS,
    tool_choice: ToolChoice | None = None,
) -> M: ...
@overload
async def ask_model(
    turn: Turn,
    messages: Sequence[ChatMessage],
    *,
    output: None,
    llm: LLMSettings,
    action: str,
    role: str,
    max_repairs: int,
    subject: str = "",
    tools: Sequence[str] = (),
    max_tool_steps: int = DEFAULT_MAX_TOOL_STEPS,
    tool_choice: ToolChoice | None = None,
) -> str: ...
async def ask_model(
    turn: Turn,
    messages: Sequence[ChatMessage],
    *,
    output: type[M] | None,
    llm: LLMSettings,
    action: str,
    role: str,
    max_repairs: int,
    subject: str = "",
    tools: Sequence[str] = (),
    max_tool_steps: int = DEFAULT_MAX_TOOL_STEPS,
    tool_choice: ToolChoice | None = None,
) -> M | str:
    """Ask the model and validate its answer against ``output`` (free text when ``None``).

    An answer that is not valid JSON or does not fit the schema is sent back with the
    validation error, at most ``max_repairs`` times; each ask is its own ``turn.ask``
    with ``attempt`` 1, 2, ... After the last repair fails, raises
    :class:`sopbus.bus.ModelOutputError` naming the action, the role and the last error.
    ``subject`` says what the call is for in the ledger (see :class:`sopbus.bus.LLMRequest`).
    ``tools`` (patterns such as ``git.*``) runs the tool loop of the module docstring;
    ``tool_choice`` is sent with them (``"required"`` only until the first tool results).
    """
    request = build_request(
        messages, output=output, llm=llm, action=action, role=role, subject=subject
    )
    where = f"{role}'s action {action!r}"
    loop = _ToolLoop(turn, request, tools, max_tool_steps, tool_choice, where=where)
    if output is None:
        return (await loop.answer(loop.request, attempt=1))[0].text
    request = loop.request
    first = request.messages
    error = ""
    for attempt in range(1, max_repairs + 2):
        asked = request
        completion, request = await loop.answer(request, attempt=attempt)
        if request is not asked:
            first = request.messages  # a repair keeps the tool exchange it follows
        answer = completion.text
        try:
            return output.model_validate_json(unfence(answer))
        except pydantic.ValidationError as exc:
            error = describe_validation_error(exc)
        if completion.finish_reason == "length":
            # Not a content mistake: a repair with the same max_tokens (and a longer prompt
            # quoting the cut answer) is cut again, at up to max_repairs times the cost.
            raise ModelOutputError(cut_error(request, role, action))
        feedback = (
            ChatMessage("assistant", quoted(answer)),
            ChatMessage("user", repair_text(error)),
        )
        request = msgspec.structs.replace(request, messages=first + feedback)
    raise ModelOutputError(
        f"action {action!r} of role {role!r}: the model's answer did not fit the output schema "
        f"after {max_repairs + 1} attempts (max_repairs={max_repairs}); last validation error:\n"
        f"{error}\nRaise max_repairs, simplify the output fields, or use a model that "
        f'supports structured outputs (output_mode = "json_schema").'
    )


class _ToolLoop:
    """The tool loop of one ask (see the module docstring)."""

    def __init__(
        self,
        turn: Turn,
        request: LLMRequest,
        tools: Sequence[str],
        steps: int,
        choice: ToolChoice | None = None,
        *,
        where: str,
    ):
        self.turn, self.max_steps, self.where = turn, steps, where
        self.steps = 0
        specs = turn.tool_specs(tools, where=where) if tools else ()
        if specs:
            request = msgspec.structs.replace(request, tools=specs, tool_choice=choice)
        self.request = request
        self.offered = [spec.name for spec in specs]

    async def answer(self, request: LLMRequest, *, attempt: int) -> tuple[Completion, LLMRequest]:
        """The model's first answer that asks for no tool, and the request that got it."""
        while True:
            if self.offered:  # the ledger tells the loop's calls of one attempt apart
                request = msgspec.structs.replace(request, step=self.steps + 1)
            completion = await self.turn.ask(request, attempt=attempt)
            if not completion.tool_calls:
                return completion, request
            if self.steps == self.max_steps:
                raise ModelOutputError(self._too_many())
            self.steps += 1
            outputs = await self._run(completion.tool_calls, request.action)
            asked = ChatMessage("assistant", completion.text, tool_calls=completion.tool_calls)
            results = tuple(
                ChatMessage("tool", output.text, tool_call_id=call.id)
                for call, output in zip(completion.tool_calls, outputs, strict=True)
            )
            # "required" holds until results are back: forced on, the loop could never end.
            choice = None if request.tool_choice == "required" else request.tool_choice
            request = msgspec.structs.replace(
                request, messages=(*request.messages, asked, *results), tool_choice=choice
            )

    async def _run(self, calls: Sequence[ToolCall], action: str) -> list[ToolOutput]:
        outputs: list[ToolOutput | None] = [None] * len(calls)

        async def one(i: int, call: ToolCall) -> None:
            outputs[i] = await self.turn.call_tool(call, offered=self.offered, action=action)

        try:
            async with trio.open_nursery() as nursery:
                for i, call in enumerate(calls):
                    nursery.start_soon(one, i, call)
        except BaseExceptionGroup as group:
            # One failed call (a refused price, a crashed server) is that call's error, as the
            # caller would get it from a single call.
            leaves = list(exception_leaves(group))
            if len(leaves) == 1 and isinstance(leaves[0], Exception):
                raise leaves[0] from None
            raise
        return [output for output in outputs if output is not None]

    def _too_many(self) -> str:
        return (
            f"{self.where}: the model still asked for tools after {self.steps} steps of tool "
            f"calls (max_tool_steps = {self.max_steps}); raise max_tool_steps on the action "
            f"([actions.X] max_tool_steps, or Action.max_tool_steps), or say in its "
            f"instruction when to stop calling tools and answer"
        )


def cut_error(request: LLMRequest, role: str, action: str) -> str:
    """Why a structured answer cut at ``max_tokens`` failed, naming the knob to turn."""
    return (
        f"action {action!r} of role {role!r}: the answer was cut at max_tokens = "
        f"{request.max_tokens} (finish_reason length), so it is not whole JSON; no repair was "
        f"sent (it would be cut again): raise max_tokens for {role}'s {action} "
        f"([llm].max_tokens, or llm = {{ max_tokens = ... }} on the action or role)"
    )


REPAIR_QUOTE_CHARS = 8000
"""The most of a bad answer a repair prompt quotes back: enough to show a model its mistake;
a server that sends megabytes must not make the next prompt (and its price) as large."""


def quoted(answer: str, limit: int = REPAIR_QUOTE_CHARS) -> str:
    """``answer`` as a repair prompt quotes it: its head, cut at ``limit`` characters with a
    note of how much was left out."""
    if len(answer) <= limit:
        return answer
    return f"{answer[:limit]}\n[... {len(answer) - limit} more characters of this answer left out]"


def unfence(text: str) -> str:
    """The JSON inside a Markdown code fence, if the whole answer is one (models in prompt
    mode often fence their JSON; repairing that would cost a call for nothing)."""
    stripped = text.strip()
    if not (stripped.startswith("```") and stripped.endswith("```") and len(stripped) >= 6):
        return text
    body = stripped[3:-3]
    newline = body.find("\n")
    return body[newline + 1 :] if newline != -1 else body


def _append_to_last(messages: Sequence[ChatMessage], text: str) -> tuple[ChatMessage, ...]:
    if not messages:
        return (ChatMessage("user", text),)
    last = messages[-1]
    return (*messages[:-1], ChatMessage(last.role, f"{last.content}\n\n{text}"))
