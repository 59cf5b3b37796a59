"""A population's answers: one repaired until it fits the action's output, the numeric
field read from it and its bounds, and the one message a round publishes (the game's sums,
or a feed round's spread)."""

from __future__ import annotations

from typing import Any

import msgspec
import pydantic
from pydantic import BaseModel

from sopbus.bus import ChatMessage, Completion, LLMRequest, Message, ModelOutputError, Turn

from ._action import Action
from ._llm import cut_error, quoted, unfence
from ._prompt import describe_validation_error, repair_text


async def repaired(action: Action, turn: Turn, request: LLMRequest, answer: Completion) -> Any:
    """A validated answer after ``answer`` (the first attempt's) did not fit ``action``'s
    output: each repair its own call (as :func:`sopbus.roles.ask_model` asks, without a tool
    loop: a population's action names no tools)."""
    output, name = action.Output, action.name
    assert output is not None, "an answer without an output schema always fits"
    first, error, completion = request.messages, "", answer
    for attempt in range(2, action.max_repairs + 3):
        try:
            return output.model_validate_json(unfence(completion.text))
        except pydantic.ValidationError as exc:
            error = describe_validation_error(exc)
        if completion.finish_reason == "length":
            raise ModelOutputError(cut_error(request, request.role, name))
        if attempt > action.max_repairs + 1:
            break
        feedback = (
            ChatMessage("assistant", quoted(completion.text)),
            ChatMessage("user", repair_text(error)),
        )
        request = msgspec.structs.replace(request, messages=first + feedback)
        completion = await turn.ask(request, attempt=attempt)
    raise ModelOutputError(
        f"action {name!r} of agent {request.role!r}: the answer did not fit the output "
        f"schema after {action.max_repairs + 1} attempts; last error:\n{error}"
    )


def round_message(
    name: str, size: int, action: str, field: str | None, result: dict[str, Any]
) -> Message:
    """The round's one message: its sums (``result``) as the payload, said in a line."""
    mean = result["mean"]
    said = f"mean {field} {mean}" if mean is not None else f"no {field}"
    return Message(
        cause_by=action,
        sent_from=name,
        content=f"{result['acted']} of {size} {name} agents answered: {said}",
        payload=result,
    )


def spread_message(
    name: str, size: int, action: str, result: dict[str, Any], roots: tuple[str, ...]
) -> Message:
    """A feed round's one message: its choices and spread (``result``). Its parents are
    the posts passed on (``roots``), not the round's news: a round of a population on a
    graph reads tens of thousands of reposts."""
    return Message(
        cause_by=action,
        sent_from=name,
        content=(
            f"{result['acted']} of {size} {name} agents read their feeds: "
            f"{result['ignored']} ignored, {result['liked']} liked, {result['reposted']} "
            f"reposted; reached {result['reached']}, adopted by {result['adopters']}"
        ),
        payload=result,
        parents=roots,
    )


def numeric_field(output: type[BaseModel] | None) -> str | None:
    """The first int or float field of an output model (what a round's sums are of)."""
    if output is None:
        return None
    for name, info in output.model_fields.items():
        if info.annotation in (int, float):
            return name
    return None


def field_bounds(output: type[BaseModel] | None, field: str | None) -> tuple[float, float]:
    """The field's bounds as its schema states them, else 0..100 (the histogram's span)."""
    if output is None or field is None:
        return 0.0, 100.0
    prop = output.model_json_schema().get("properties", {}).get(field, {})
    return float(prop.get("minimum", 0)), float(prop.get("maximum", 100))


def number_of(output: Any, field: str | None) -> float | None:
    if field is None or not isinstance(output, BaseModel):
        return None
    value = getattr(output, field, None)
    return float(value) if isinstance(value, (int, float)) else None


def shown(x: float) -> str:
    """``x`` as a prompt shows it: ``42`` for 42.0, ``3.5``."""
    return str(int(x)) if x == int(x) else f"{x:g}"
