"""Turn msgspec's decode errors into messages a scenario author can act on.

msgspec says ``Object contains unknown field `max_round` - at `$.run```. The author also
needs the file, the full path of the bad key, what was expected there and the closest
valid names; and where msgspec writes ``$.actions[...]`` for a table key, the key itself.
This module walks the raw TOML and the Struct types along msgspec's path to add all that.
"""

from __future__ import annotations

import datetime
import json
import re
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal, Union

import msgspec

from .._util import did_you_mean

PathToken = str | int

_MISSING = object()
_AT = re.compile(r"^(?P<text>.*?)(?: - at `(?P<path>\$[^`]*)`)?$", re.S)
_STEP = re.compile(r"\.([^.\[]+)|\[(\d+|\.\.\.)\]")
_LINE_COL = re.compile(r"\(at line (\d+), column (\d+)\)")


def format_path(tokens: list[PathToken]) -> str:
    """``["roles", 0, "watch"]`` -> ``$.roles[0].watch``; keys that are not plain words are
    quoted as TOML does (``$.prices."gpt-4o"``)."""
    out = "$"
    for token in tokens:
        if isinstance(token, int):
            out += f"[{token}]"
        elif re.fullmatch(r"[A-Za-z0-9_]+", token):
            out += f".{token}"
        else:
            out += "." + json.dumps(token)
    return out


def explain_validation_error(error: msgspec.ValidationError, raw: Any, root: type) -> str:
    """One line: what is wrong, ``- at `$.full.path```, what was expected, and the closest
    valid names. ``raw`` is the decoded TOML (plain dicts and lists); ``root`` the Struct
    it was converted to."""
    match = _AT.match(str(error))
    assert match is not None  # the pattern matches any text
    text = match["text"]
    tokens = _real_path(raw, root, _parse_path(match["path"] or "$"))
    here = _type_at(root, tokens)
    value = _value_at(raw, tokens)
    if m := re.fullmatch(r"Object contains unknown field `(.*)`", text):
        return _unknown_key(m[1], tokens, here)
    if m := re.fullmatch(r"Object missing required field `(.*)`", text):
        field_path = [*tokens, m[1]]
        need = _describe(_type_at(root, field_path))
        return f"missing required key `{m[1]}` - at `{format_path(field_path)}`: expected {need}"
    if text.startswith("Invalid enum value"):
        return _bad_choice(value, tokens, here)
    shown = "" if value is _MISSING else f" {_show(value)}"
    if m := re.fullmatch(r"Expected `(.*)`, got `(.*)`", text):
        return _wrong_type(_toml_type(m[1]), _toml_type(m[2]), value, tokens)
    if re.fullmatch(r"Expected `(int|float)` (>=|>|<=|<) \S+", text):
        return _out_of_range(root, tokens, value)
    if text == "Invalid decimal string":
        return f"expected a number, got{shown} - at `{format_path(tokens)}`"
    got = "" if value is _MISSING else f", got{shown}"
    return f"{text[0].lower()}{text[1:]}{got} - at `{format_path(tokens)}`"


def syntax_error_place(error: Exception) -> str:
    """Where a TOML syntax error is, ``line 3, column 5``, without the parser's words (which
    may quote a key or a character of the file) or the line itself."""
    match = _LINE_COL.search(str(error))
    return f"line {match[1]}, column {match[2]}" if match else "somewhere in the file"


def explain_syntax_error(error: msgspec.DecodeError, text: str) -> str:
    """``TOML syntax error at line 3, column 5: <what>`` and the line itself."""
    message = str(error)
    match = _LINE_COL.search(message)
    if match is None:
        return f"not a valid TOML file: {message}"
    line_no, column = int(match[1]), int(match[2])
    what = _LINE_COL.sub("", message).strip()
    lines = text.splitlines()
    source = lines[line_no - 1] if 0 < line_no <= len(lines) else ""
    return (
        f"TOML syntax error at line {line_no}, column {column}: {what}\n"
        f"    {line_no} | {source}\n"
        f"    {' ' * len(str(line_no))} | {' ' * (column - 1)}^"
    )


def _unknown_key(key: str, tokens: list[PathToken], here: Any) -> str:
    valid = _keys_of(here)
    expected = f": expected one of {', '.join(valid)}" if valid else ""
    return (
        f"unknown key `{key}` - at `{format_path([*tokens, key])}`{expected}"
        f"{did_you_mean(key, valid)}"
    )


def _wrong_type(expected: str, got: str, value: Any, tokens: list[PathToken]) -> str:
    scalar = value is not _MISSING and not isinstance(value, Mapping | list)
    text = f"expected `{expected}`, got `{got}`{f' {_show(value)}' if scalar else ''}"
    if (expected, got) == ("array", "table") and tokens and isinstance(tokens[-1], str):
        # [roles] instead of [[roles]]: the one-bracket slip TOML makes easy.
        return f"{text} - at `{format_path(tokens)}`: write [[{tokens[-1]}]] for each entry"
    if tokens and tokens[-1] == "extra_body":
        return (
            f"{text} - at `{format_path(tokens)}`: write a table of the server's own "
            "settings, extra_body = { repeat_penalty = 1.3, top_k = 40 }"
        )
    return f"{text} - at `{format_path(tokens)}`"


def _out_of_range(root: Any, tokens: list[PathToken], value: Any) -> str:
    """A number outside its field's bounds, with the whole allowed range (msgspec names
    only the bound it broke)."""
    tp: Any = root
    for token in tokens:
        tp = _child_type(tp, token)
    meta = _meta(tp)
    if meta.ge is not None and meta.le is not None:
        span = f"from {_num(meta.ge)} to {_num(meta.le)}"
    else:
        parts = [
            f"{_num(meta.ge)} or more" if meta.ge is not None else "",
            f"above {_num(meta.gt)}" if meta.gt is not None else "",
            f"at most {_num(meta.le)}" if meta.le is not None else "",
            f"below {_num(meta.lt)}" if meta.lt is not None else "",
        ]
        span = " and ".join(p for p in parts if p)
    shown = "" if value is _MISSING else f" {_show(value)}"
    return f"out of range:{shown} - at `{format_path(tokens)}`: expected a number {span}"


def _num(bound: Any) -> str:
    return str(int(bound)) if float(bound).is_integer() else str(bound)


def _meta(tp: Any) -> msgspec.Meta:
    """The ``msgspec.Meta`` bounds on a field's type (``Annotated[int, Meta(...)] | None``)."""
    for arg in (tp, *typing.get_args(tp)):
        if typing.get_origin(arg) is typing.Annotated:
            for extra in arg.__metadata__:
                if isinstance(extra, msgspec.Meta):
                    return extra
    return msgspec.Meta()


def _bad_choice(value: Any, tokens: list[PathToken], here: Any) -> str:
    choices = [str(c) for c in _literal_choices(here)]
    shown = "" if value is _MISSING else f" {_show(value)}"
    listed = ", ".join(f"`{c}`" for c in choices)
    hint = did_you_mean(value, choices) if isinstance(value, str) else ""
    return f"invalid value{shown} - at `{format_path(tokens)}`: expected one of {listed}{hint}"


def _parse_path(path: str) -> list[PathToken | None]:
    """``$.roles[0].watch[...]`` -> ``["roles", 0, "watch", None]``; ``None`` stands for the
    table key msgspec did not name."""
    tokens: list[PathToken | None] = []
    for m in _STEP.finditer(path[1:]):
        if m[1] is not None:
            tokens.append(m[1])
        else:
            tokens.append(None if m[2] == "..." else int(m[2]))
    return tokens


def _real_path(raw: Any, root: Any, tokens: list[PathToken | None]) -> list[PathToken]:
    """``tokens`` with each unnamed table key found again: msgspec stops at the first bad
    entry in file order, so it is the first entry that fails on its own."""
    out: list[PathToken] = []
    node, tp = raw, root
    for token in tokens:
        if token is None:
            token = _first_failing_key(node, _child_type(tp, ""))
            if token is None:
                return out
        out.append(token)
        node, tp = _child(node, token), _child_type(tp, token)
    return out


def _first_failing_key(node: Any, value_type: Any) -> str | None:
    if not isinstance(node, Mapping):
        return None
    for key, value in node.items():
        try:
            msgspec.convert(
                value,
                value_type,
                str_keys=True,
                builtin_types=(datetime.datetime, datetime.date, datetime.time),
            )
        except msgspec.ValidationError:
            return str(key)
    return None


def _child(node: Any, token: PathToken) -> Any:
    if isinstance(token, int) and isinstance(node, list) and 0 <= token < len(node):
        return node[token]
    if isinstance(token, str) and isinstance(node, Mapping):
        return node.get(token, _MISSING)
    return _MISSING


def _value_at(raw: Any, tokens: list[PathToken]) -> Any:
    node = raw
    for token in tokens:
        node = _child(node, token)
    return node


def _unwrap(tp: Any) -> Any:
    """Strip ``Annotated`` and ``X | None`` down to ``X``."""
    while True:
        origin = typing.get_origin(tp)
        if origin is typing.Annotated:
            tp = typing.get_args(tp)[0]
        elif origin in (Union, types.UnionType):
            rest = [a for a in typing.get_args(tp) if a is not type(None)]
            if len(rest) != 1:
                return tp
            tp = rest[0]
        else:
            return tp


def _child_type(tp: Any, token: PathToken) -> Any:
    tp = _unwrap(tp)
    if isinstance(tp, type) and issubclass(tp, msgspec.Struct):
        fields = {f.encode_name: f.type for f in msgspec.structs.fields(tp)}
        return fields.get(str(token), Any)
    args = typing.get_args(tp)
    if typing.get_origin(tp) in (list, tuple) and args:
        return args[0]
    if typing.get_origin(tp) is dict and len(args) == 2:
        return args[1]
    return Any


def _type_at(root: Any, tokens: list[PathToken]) -> Any:
    tp = root
    for token in tokens:
        tp = _child_type(tp, token)
    return _unwrap(tp)


def _keys_of(tp: Any) -> list[str]:
    if isinstance(tp, type) and issubclass(tp, msgspec.Struct):
        return [f.encode_name for f in msgspec.structs.fields(tp)]
    return []


def _literal_choices(tp: Any) -> tuple[Any, ...]:
    return typing.get_args(tp) if typing.get_origin(tp) is Literal else ()


def _describe(tp: Any) -> str:
    if isinstance(tp, type) and issubclass(tp, msgspec.Struct):
        return f"a table with keys {', '.join(_keys_of(tp))}"
    if typing.get_origin(tp) is Literal:
        return "one of " + ", ".join(f"`{c}`" for c in typing.get_args(tp))
    names = {str: "a string", int: "an integer", float: "a number", bool: "true or false"}
    return names.get(tp, f"a value of type `{getattr(tp, '__name__', tp)}`")


def _toml_type(name: str) -> str:
    """msgspec's JSON words in TOML's: ``object`` is a table, and TOML has no null (a key
    left out is the "none" of an optional field)."""
    return name.removesuffix(" | null").replace("object", "table")


def _show(value: Any) -> str:
    """A value as the author wrote it, shortened: ``"ten"``, ``true``, ``3``, ``a table``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping):
        return "a table"
    if isinstance(value, list):
        return "an array"
    shown = json.dumps(value) if isinstance(value, str) else str(value)
    return shown if len(shown) <= 60 else shown[:57] + "..."
