"""Type specs of declared action outputs: ``"list[str]"`` in a scenario file -> ``list[str]``.

A scenario declares an action's output as ``output = { approved = "bool", problems =
"list[str]" }``. This module turns each spec into the Python type it names, so that
``sopbus.roles`` can build the pydantic model (``pydantic.create_model``) without parsing strings.

The grammar is small on purpose: it covers what a JSON schema for structured outputs can
say and nothing else::

    type    := primary ("|" primary)*
    primary := "str" | "int" | "float" | "bool" | "None"
             | "list" "[" type "]" | "dict" "[" "str" "," type "]" | "optional" "[" type "]"
"""

from __future__ import annotations

import functools
import operator
import re
from typing import Any

from .._errors import SopbusError
from .._util import did_you_mean

TYPE_SPECS = "str, int, float, bool, list[T], dict[str, T], optional[T] or T | None"

_SCALARS: dict[str, Any] = {
    "str": str,
    "int": int,
    "float": float,
    "bool": bool,
    "None": type(None),
}
_GENERICS = ("list", "dict", "optional")
MAX_DEPTH = 32
"""How deep ``list[...]``, ``dict[str, ...]`` and ``optional[...]`` may nest: far more than
an output schema needs, and far less than the recursion the parser and pydantic can take."""
_TOKEN = re.compile(r"\s*(?:([A-Za-z_][A-Za-z0-9_]*)|(.))")
# Names people bring from JSON schema or typing; pointed at ours explicitly because their
# spelling is too far from ours for difflib.
_FOREIGN = {
    "string": "str",
    "integer": "int",
    "number": "float",
    "boolean": "bool",
    "array": "list[T]",
    "object": "dict[str, T]",
    "null": "None",
}


class TypeSpecError(SopbusError, ValueError):
    """A type spec that does not parse. ``problem`` says what is wrong where (``unknown
    type `lst` in `lst[str]```), ``hint`` is ``""`` or ``"; did you mean `list`?"``."""

    def __init__(self, problem: str, hint: str = ""):
        super().__init__(f"{problem} (expected {TYPE_SPECS}){hint}")
        self.problem = problem
        self.hint = hint


def parse_type_spec(spec: str) -> Any:
    """The Python type ``spec`` names: ``"list[str]"`` -> ``list[str]``,
    ``"optional[int]"`` and ``"int | None"`` -> ``int | None``.

    Raises :class:`TypeSpecError` naming the unknown or misplaced part.
    """
    parser = _Parser(spec)
    result = parser.union()
    parser.expect_end()
    return result


class _Parser:
    """Recursive descent over the tokens of one spec; one method per grammar rule."""

    def __init__(self, spec: str):
        self.spec = spec
        self.tokens = [m.group(1) or m.group(2) for m in _TOKEN.finditer(spec.strip())]
        self.pos = 0
        self.depth = 0

    def peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self) -> str | None:
        token = self.peek()
        self.pos += 1
        return token

    def fail(self, what: str, hint: str = "") -> TypeSpecError:
        shown = self.spec if len(self.spec) <= 80 else f"{self.spec[:60]}...{self.spec[-12:]}"
        return TypeSpecError(f"{what} in `{shown}`", hint)

    def expect(self, token: str) -> None:
        got = self.take()
        if got != token:
            found = "the end" if got is None else f"`{got}`"
            raise self.fail(f"expected `{token}` but found {found}")

    def expect_end(self) -> None:
        if self.peek() is not None:
            raise self.fail(f"unexpected `{self.peek()}`")

    def union(self) -> Any:
        members = [self.primary()]
        while self.peek() == "|":
            self.take()
            members.append(self.primary())
        return functools.reduce(operator.or_, members) if len(members) > 1 else members[0]

    def primary(self) -> Any:
        name = self.take()
        if name is None or not (name[0].isalpha() or name[0] == "_"):
            raise self.fail("missing type" + ("" if name is None else f" before `{name}`"))
        if name in _SCALARS:
            return _SCALARS[name]
        if name in _GENERICS:
            return self.generic(name)
        raise self.fail(f"unknown type `{name}`", _hint(name))

    def generic(self, name: str) -> Any:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.fail(
                f"types nested more than {MAX_DEPTH} deep",
                "; flatten the output (structured outputs need a few levels at most)",
            )
        self.expect("[")
        if name == "dict":
            key = self.take()
            if key != "str":
                raise self.fail(f"dict keys must be `str` (JSON object keys), not `{key}`")
            self.expect(",")
        inner = self.union()
        self.expect("]")
        self.depth -= 1
        if name == "list":
            return list[inner]  # type: ignore[valid-type]
        if name == "dict":
            return dict[str, inner]  # type: ignore[valid-type]
        return inner | None


def _hint(name: str) -> str:
    if name.lower() in _FOREIGN:
        return f"; did you mean `{_FOREIGN[name.lower()]}`?"
    return did_you_mean(name, [*_SCALARS, *_GENERICS])
