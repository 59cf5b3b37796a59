"""Actions and roles from plain declarations (a scenario file's ``[actions.X]`` and
``[[roles]]``), built through the same classes a Python declaration uses, so both behave
the same.

Mistakes are :class:`sopbus.bus.ConfigError` naming the place (``$.roles[0].watch[1]``), what was
expected and the closest valid names. A declaration is registered only once it is valid.
"""

from __future__ import annotations

import keyword
import types
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

import pydantic
from pydantic import BaseModel, ConfigDict

from sopbus.bus import ConfigError, closest
from sopbus.bus.llm import DEFAULT_MAX_TOOL_STEPS, TOOL_CHOICES, ToolChoice
from sopbus.bus.scenario import ActionSpec, action_spec

from ._action import Action, check_artifact, declare_with
from ._llm import LLMSettings
from ._registry import Registry
from ._role import ActionRef, LLMLike, Role, WatchRef, settings


def declare_action(
    name: str,
    *,
    instruction: str = "",
    output: Mapping[str, Any] | None = None,
    llm: LLMLike = None,
    max_repairs: int = 2,
    artifact: str | None = None,
    registry: Registry,
    where: str | None = None,
    tools: Sequence[str] = (),
    max_tool_steps: int = DEFAULT_MAX_TOOL_STEPS,
    tool_choice: ToolChoice | None = None,
) -> type[Action]:
    """An Action subclass named ``name``, registered into ``registry``.

    ``output`` maps field names to Python types (``{"approved": bool, "problems":
    list[str]}``); ``None`` means free text. The output model forbids extra keys, which
    is what structured-output APIs require of a schema. ``artifact`` is the file each
    result is kept in (see :attr:`sopbus.roles.Action.artifact`). ``tools``,
    ``max_tool_steps`` and ``tool_choice``: the tools the model may call and how (see
    :attr:`sopbus.roles.Action.tools`).
    """
    at = where or f"$.actions.{name}"
    _check_name(name, at)
    _check_action(at, instruction, max_repairs, tools, max_tool_steps, tool_choice)
    body = {
        "tool_choice": tool_choice,
        "tools": tuple(tools),
        "max_tool_steps": max_tool_steps,
        "name": name,
        "instruction": instruction,
        "max_repairs": max_repairs,
        "Output": output_model(name, output, f"{at}.output") if output is not None else None,
        "llm": settings(llm, f"{at}.llm"),
        "_declared_at": at,
        "__module__": __name__,
        "artifact": None if artifact is None else check_artifact(artifact, f"{at}.artifact"),
        "__doc__": f"Action {name!r}, declared at {at}.",
    }
    cls = cast(
        type[Action],
        types.new_class(name, (Action,), {"register": False}, lambda ns: ns.update(body)),
    )
    registry.add_action(cls)
    return cls


def _check_action(
    at: str,
    instruction: object,
    max_repairs: object,
    tools: Sequence[str],
    max_tool_steps: object,
    tool_choice: object,
) -> None:
    """The ConfigError for the first of an action's settings that has the wrong type or
    range, named at ``at.<field>``."""
    if not isinstance(instruction, str):
        raise ConfigError(f"expected a string at {at}.instruction, got {instruction!r}")
    _check_whole(max_repairs, 0, f"{at}.max_repairs")
    if isinstance(tools, str) or not all(isinstance(t, str) for t in tools):
        raise ConfigError(f'expected a list of tool names at {at}.tools ("git.*"), got {tools!r}')
    _check_whole(max_tool_steps, 1, f"{at}.max_tool_steps")
    if tool_choice is not None and tool_choice not in TOOL_CHOICES:
        raise ConfigError(
            f"expected one of {', '.join(repr(c) for c in TOOL_CHOICES)} at {at}.tool_choice, "
            f"got {tool_choice!r}"
        )


def _check_whole(value: object, least: int, where: str) -> None:
    # bool is an int to Python, but `max_repairs = true` is a mistake in a file
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ConfigError(f"expected a whole number >= {least} at {where}, got {value!r}")


def action_from_spec(
    name: str, spec: ActionSpec, *, registry: Registry, where: str | None = None
) -> type[Action]:
    """The action a checked ``[actions.<name>]`` table declares (:func:`declare_action`), into
    ``registry``; the class keeps the table as its ``spec``."""
    cls = declare_action(
        name,
        instruction=spec.instruction,
        output=spec.output_types(),
        llm=spec.llm,
        max_repairs=spec.max_repairs,
        artifact=spec.artifact,
        registry=registry,
        where=where,
        tools=spec.tools,
        max_tool_steps=spec.max_tool_steps,
        tool_choice=spec.tool_choice,
    )
    cls.spec = spec
    return cls


def declared_action(name: object, instruction: object, settings: Mapping[str, Any]) -> type[Action]:
    """The class of ``Action(name, instruction, output=..., ...)``: the keywords are the keys of
    a scenario file's ``[actions.<name>]`` table, checked as the file's are, and the class is
    the one that table declares. It is registered nowhere: a team declares it when it runs."""
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(
            f"Action(name, instruction, ...): expected a non-empty name, got {name!r}"
        )
    shown = f"Action({name!r})"
    table = {"instruction": instruction, **settings}
    if isinstance(table.get("llm"), LLMSettings):
        table["llm"] = table["llm"].model_dump(exclude_none=True)
    spec = action_spec(name, {k: v for k, v in table.items() if v is not None}, shown)
    return action_from_spec(name, spec, registry=Registry(), where=f"$.actions.{name}")


declare_with(declared_action)


def output_model(action: str, fields: Mapping[str, Any], where: str) -> type[BaseModel]:
    """The pydantic model of an action's output, from field names and Python types.

    Named ``Output`` with qualname ``<action>.Output``, like the nested ``class Output``
    of a Python declaration, so both give the same JSON schema.
    """
    if not isinstance(fields, Mapping) or not fields:
        raise ConfigError(
            f"expected a table of field names and types at {where}, "
            f'e.g. {{ approved = "bool", problems = "list[str]" }}; got {fields!r}'
        )
    for field in fields:
        if (
            not isinstance(field, str)
            or not field.isidentifier()
            or keyword.iskeyword(field)
            or field.startswith("_")
        ):
            raise ConfigError(
                f"bad output field name {field!r} at {where}: use letters, digits "
                f"and underscores, not starting with a digit or underscore"
            )
    config = ConfigDict(extra="forbid", protected_namespaces=())
    definitions: dict[str, Any] = {k: (t, ...) for k, t in fields.items()}
    try:
        model: type[BaseModel] = pydantic.create_model(
            "Output",
            __config__=config,
            __module__=__name__,
            __qualname__=f"{action}.Output",
            **definitions,
        )
        model.model_json_schema()  # an unsupported type fails here, not at the first call
    except (
        pydantic.PydanticSchemaGenerationError,
        pydantic.PydanticUserError,
        TypeError,
        ValueError,
    ) as exc:
        raise ConfigError(
            f"cannot build the output of action {action!r} at {where}: {str(exc).splitlines()[0]}"
        ) from None
    return model


def declare_role(
    name: str,
    *,
    profile: str = "",
    goal: str = "",
    constraints: str = "",
    aliases: Iterable[str] = (),
    watch: Iterable[WatchRef] = (),
    actions: Iterable[ActionRef] = (),
    send_to: Iterable[str] = (),
    react_mode: str = "by_order",
    max_react_steps: int | None = None,
    llm: LLMLike = None,
    human: bool = False,
    registry: Registry,
    where: str | None = None,
) -> Role:
    """A role named ``name``: an instance of a new Role subclass, registered into
    ``registry`` once it has been checked; the same object a Python subclass builds.

    Names in ``watch`` and ``actions`` are looked up in ``registry``; an unknown one is a
    :class:`sopbus.bus.ConfigError` at ``where`` + ``.watch[i]`` / ``.actions[i]``.
    """
    at = where or f"$.roles[{name!r}]"
    _check_name(name, at)
    body: dict[str, Any] = {
        "name": name,
        "profile": profile,
        "goal": goal,
        "constraints": constraints,
        "aliases": aliases,
        "watch": watch,
        "actions": actions,
        "send_to": send_to,
        "react_mode": react_mode,
        "llm": settings(llm, f"{at}.llm"),
        "human": human,
        "_declared_at": at,
        "__module__": __name__,
        "__doc__": f"Role {name!r}, declared at {at}.",
    }
    if max_react_steps is not None:
        body["max_react_steps"] = max_react_steps
    cls = cast(
        type[Role], types.new_class(name, (Role,), {"register": False}, lambda ns: ns.update(body))
    )
    role = cls(registry=registry, where=at)
    _freeze_class_fields(cls, role)
    registry.add_role(cls)
    return role


def role_with_overrides(
    base: Role, *, registry: Registry | None = None, where: str | None = None, **fields: Any
) -> Role:
    """A new role like ``base`` (same class, fresh memory) with ``fields`` replaced.

    For a scenario's ``[[roles]]`` entry that names an existing role: only the fields it
    gives change. ``llm`` and ``llm_defaults`` are laid over the base's rather than
    replacing them, so ``llm = { temperature = 0 }`` keeps the base's model.
    """
    at = where or type(base).__qualname__.rpartition("<locals>.")[2]
    current = base.fields()
    for key in fields:
        if key not in current:
            near = closest(key, current, cutoff=0.7)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise ConfigError(
                f"unknown role field {key!r} at {at}{hint}. Role fields: {', '.join(current)}"
            )
    given = {k: v for k, v in fields.items() if v is not None}
    for key in ("llm", "llm_defaults"):
        if key in given:
            given[key] = settings(given[key], f"{at}.{key}").over(current[key])
    return type(base)(**{**current, **given}, registry=registry or base.registry, where=at)


def _check_name(name: object, where: str) -> None:
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"expected a non-empty name at {where}, got {name!r}")


def _freeze_class_fields(cls: type[Role], role: Role) -> None:
    # The class now shows the checked declaration (names, not whatever iterable was given),
    # as a Python class statement would: what `sopbus roles` lists without an instance.
    cls.aliases = role.aliases
    cls.send_to = role.send_to
    cls.watch = role.watch_entries
    cls.actions = role.actions
