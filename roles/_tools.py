"""Python function tools: ``@sopbus.tool`` on a typed function makes it a tool an action can
name as ``py.NAME``, and the tool source that runs such tools in a run.

The JSON schema of the arguments comes from the type hints (a pydantic model made from the
signature), the description from the docstring; the model's arguments are validated by that
model, and a validation error goes back to the model as the tool's error result. A plain
function runs in a worker thread, so a slow one does not stop the run; an ``async`` one runs
on the run's trio loop. What it returns reaches the model as text: a ``str`` as it is,
anything else as JSON.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from functools import partial
from typing import Any, get_type_hints, overload

import pydantic
import pydantic_core
import trio

from sopbus.bus.llm import DEFAULT_MAX_RESULT_CHARS, SOURCE_PYTHON, ToolOutput, ToolSpec

from ._prompt import describe_validation_error


class Tool:
    """A Python function tool (made by :func:`tool`); calling it calls the function."""

    def __init__(self, fn: Callable[..., Any], *, name: str | None = None):
        self.fn = fn
        self.name = name or fn.__name__
        self.description = inspect.cleandoc(fn.__doc__ or "")
        self.arguments = _arguments_model(fn, self.name)
        schema = self.arguments.model_json_schema()
        schema.pop("title", None)
        self.spec = ToolSpec(name=self.name, description=self.description, parameters=schema)
        self.is_async = inspect.iscoroutinefunction(fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    async def run(self, arguments: Mapping[str, Any]) -> ToolOutput:
        """The function's result on ``arguments`` as the model sees it (an error result when
        the arguments do not fit, or the function raises)."""
        try:
            checked = self.arguments.model_validate(dict(arguments))
        except pydantic.ValidationError as exc:
            return _error(
                f"the arguments of py.{self.name} do not fit: {describe_validation_error(exc)}"
            )
        values = {field: getattr(checked, field) for field in type(checked).model_fields}
        try:
            if self.is_async:
                result = await self.fn(**values)
            else:
                result = await trio.to_thread.run_sync(partial(self.fn, **values))
        except Exception as exc:  # the tool's own failure is its result, for the model
            return _error(f"py.{self.name} raised {type(exc).__name__}: {exc}")
        return as_output(result)

    def __repr__(self) -> str:
        return f"<tool py.{self.name}>"


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...
@overload
def tool(*, name: str | None = None) -> Callable[[Callable[..., Any]], Tool]: ...
def tool(
    fn: Callable[..., Any] | None = None, /, *, name: str | None = None
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Makes a typed function a tool (``py.NAME`` in an action's ``tools``) and registers it
    into ``sopbus.roles.registry``::

        @sopbus.tool
        def word_count(text: str) -> int:
            \"\"\"How many words ``text`` has.\"\"\"
            return len(text.split())
    """
    from ._registry import registry

    def make(function: Callable[..., Any]) -> Tool:
        made = Tool(function, name=name)
        registry.add_tool(made)
        return made

    return make(fn) if fn is not None else make


class PythonTools:
    """The tool source ``py``: the registered Python tools (free: no price per call)."""

    name = SOURCE_PYTHON
    price_per_call: Decimal | None = None

    def __init__(self, tools: Sequence[Tool], *, max_result_chars: int = DEFAULT_MAX_RESULT_CHARS):
        self._tools = {t.name: t for t in tools}
        self._max = max_result_chars

    def specs(self) -> Sequence[ToolSpec]:
        return [t.spec for t in self._tools.values()]

    async def call(self, tool: str, arguments: dict[str, Any]) -> ToolOutput:
        found = self._tools.get(tool)
        if found is None:
            return _error(f"there is no Python tool {tool!r}")
        return cut(await found.run(arguments), self._max)


def as_output(result: Any) -> ToolOutput:
    text = result if isinstance(result, str) else pydantic_core.to_json(result).decode()
    return ToolOutput(text=text, chars=len(text))


def cut(output: ToolOutput, limit: int) -> ToolOutput:
    """``output`` cut to ``limit`` characters, saying so at its end."""
    if len(output.text) <= limit:
        return output
    note = f"\n[... cut: {len(output.text) - limit} more characters of this result left out]"
    return ToolOutput(
        text=output.text[:limit] + note, is_error=output.is_error, chars=output.chars, cut=True
    )


def _error(text: str) -> ToolOutput:
    text = f"Error: {text}"
    return ToolOutput(text=text, is_error=True, chars=len(text))


def _arguments_model(fn: Callable[..., Any], name: str) -> type[pydantic.BaseModel]:
    """A pydantic model of ``fn``'s parameters (each must be typed; no ``*args``)."""
    hints = get_type_hints(fn)
    fields: dict[str, Any] = {}
    for parameter in inspect.signature(fn).parameters.values():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            raise TypeError(f"tool {name}: *args and **kwargs cannot be described to a model")
        if parameter.name not in hints:
            raise TypeError(f"tool {name}: parameter {parameter.name!r} needs a type hint")
        default = ... if parameter.default is parameter.empty else parameter.default
        fields[parameter.name] = (hints[parameter.name], default)
    return pydantic.create_model(f"{name}_arguments", **fields)
