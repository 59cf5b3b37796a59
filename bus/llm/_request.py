"""The body of one chat completion request, as the OpenAI API spells it: the parameters,
the messages (tool calls and results under wire names a function name may carry), the
response format and the strict form of a schema. The provider (:mod:`._openai`) sends it;
the server token counter (:mod:`._server_tokens`) renders the same body.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .._protocol import ChatMessage, LLMRequest, ToolCall
from ._tokens import schema_text

SCHEMA_INSTRUCTION = (
    "Answer with one JSON value and nothing else (no prose, no code fence). "
    "It must validate against this JSON schema:\n"
)
_STRICT_KEYWORDS = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "enum",
        "const",
        "anyOf",
        "$ref",
        "$defs",
        "definitions",
        "description",
        "title",
        "pattern",
        "format",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minItems",
        "maxItems",
    }
)
_STRICT_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)


def request_params(
    request: LLMRequest, *, max_tokens_param: str = "max_completion_tokens", stream: bool = False
) -> dict[str, Any]:
    """The keyword arguments of ``chat.completions.create`` for ``request``."""
    messages = request.messages
    params: dict[str, Any] = {
        "model": request.model,
        "temperature": request.temperature,
        max_tokens_param: request.max_tokens,
    }
    if request.schema is not None and request.output_mode == "prompt":
        messages = with_schema_instruction(request)
    elif request.schema is not None:
        params["response_format"] = response_format(request)
    to_wire = {full: wire for wire, full in _wire_name_of(request).items()}
    params["messages"] = [wire_message(m, to_wire) for m in messages]
    if request.tools:
        params["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": wire,
                    "description": spec.description,
                    "parameters": spec.parameters or {"type": "object", "properties": {}},
                },
            }
            for wire, spec in zip(wire_names(request), request.tools, strict=True)
        ]
        if request.tool_choice is not None:
            params["tool_choice"] = request.tool_choice
    if request.extra_body:
        # The SDK merges it into the JSON body: sampling keys the SDK has no argument for.
        params["extra_body"] = dict(request.extra_body)
    if stream:
        params["stream"] = True
        params["stream_options"] = {"include_usage": True}
    return params


_WIRE_NAME = re.compile(r"[^a-zA-Z0-9_-]")


def wire_names(request: LLMRequest) -> list[str]:
    """The function names the API is sent for ``request.tools`` (``^[a-zA-Z0-9_-]{1,64}$``):
    ``git.git_log`` becomes ``git__git_log``; a name that would clash or is too long gets a
    number. :func:`from_wire` maps them back by the same request."""
    out: list[str] = []
    for spec in request.tools:
        name = _WIRE_NAME.sub("_", spec.name.replace(".", "__", 1))[:64] or "tool"
        number = 1
        while name in out:
            number += 1
            name = f"{name[: 60 - len(str(number))]}_{number}"
        out.append(name)
    return out


def _wire_name_of(request: LLMRequest) -> dict[str, str]:
    return {wire: spec.name for wire, spec in zip(wire_names(request), request.tools, strict=True)}


def from_wire(request: LLMRequest, calls: tuple[tuple[str, str, str], ...]) -> tuple[ToolCall, ...]:
    """The tool calls of an answer with their full names; a name the request did not offer
    is kept as the model wrote it (the tool loop answers it with an error)."""
    names = _wire_name_of(request)
    return tuple(
        ToolCall(id=call_id, name=names.get(name, name), arguments=arguments)
        for call_id, name, arguments in calls
    )


def wire_message(message: ChatMessage, names: Mapping[str, str] | None = None) -> dict[str, Any]:
    """One message as the API takes it (an assistant's tool calls, a tool's result);
    ``names`` maps full tool names to the request's wire names."""
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        out["content"] = message.content or None
        out["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {
                    "name": (names or {}).get(call.name) or _to_wire(call.name),
                    "arguments": call.arguments,
                },
            }
            for call in message.tool_calls
        ]
    if message.tool_call_id is not None:
        out["tool_call_id"] = message.tool_call_id
    return out


def _to_wire(name: str) -> str:
    return _WIRE_NAME.sub("_", name.replace(".", "__", 1))[:64] or "tool"


def with_schema_instruction(request: LLMRequest) -> tuple[ChatMessage, ...]:
    """The messages with the schema written into the (first) system prompt."""
    instruction = SCHEMA_INSTRUCTION + schema_text(request)
    messages = request.messages
    if messages and messages[0].role == "system":
        first = ChatMessage("system", f"{messages[0].content}\n\n{instruction}")
        return (first, *messages[1:])
    return (ChatMessage("system", instruction), *messages)


def response_format(request: LLMRequest) -> dict[str, Any]:
    """``response_format`` of type ``json_schema``, strict when the schema allows it."""
    assert request.schema is not None
    strict = strict_schema(request.schema)
    name = request.schema_name or str(request.schema.get("title") or request.action or "output")
    return {
        "type": "json_schema",
        "json_schema": {
            "name": re.sub(r"[^A-Za-z0-9_-]", "_", name)[:64],
            "schema": strict if strict is not None else request.schema,
            "strict": strict is not None,
        },
    }


def strict_schema(schema: Mapping[str, Any]) -> dict[str, Any] | None:
    """``schema`` made fit for ``strict: true`` (closed objects, defaults dropped), or ``None``
    when it uses something strict mode cannot express (optional properties, open objects,
    unsupported keywords or formats)."""
    if not isinstance(schema, Mapping):
        return None
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "default":
            continue  # informative only; we validate with pydantic on our side
        if key not in _STRICT_KEYWORDS or (key == "format" and value not in _STRICT_FORMATS):
            return None
        if key in ("properties", "$defs", "definitions"):
            subs = {name: strict_schema(sub) for name, sub in value.items()}
            if any(sub is None for sub in subs.values()):
                return None
            out[key] = subs
        elif key in ("items", "additionalProperties") and isinstance(value, Mapping):
            if key == "additionalProperties":
                return None
            sub = strict_schema(value)
            if sub is None:
                return None
            out[key] = sub
        elif key == "anyOf":
            options = [strict_schema(option) for option in value]
            if any(option is None for option in options):
                return None
            out[key] = options
        else:
            out[key] = value
    return _closed(out)


def _closed(schema: dict[str, Any]) -> dict[str, Any] | None:
    if schema.get("type") != "object" and "properties" not in schema:
        return schema
    if schema.get("additionalProperties", False) is not False:
        return None
    if set(schema.get("properties", {})) != set(schema.get("required", ())):
        return None
    schema["additionalProperties"] = False
    return schema
