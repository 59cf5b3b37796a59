"""A team's roles as a scenario file's tables: ``[[roles]]`` entries, the ``[actions.X]``
tables of the actions declared with ``Action(name, instruction, ...)``, and the Python
classes the entries name by ``"module:Class"``.

What a scenario file cannot say is a :class:`~sopbus.ConfigError` here, with the fix: an
Action instance with settings of its own (the file names classes, not instances), or two
different actions of one name.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from sopbus.bus import ConfigError
from sopbus.bus.scenario import ActionSpec
from sopbus.roles import Action, LLMSettings, Role, Watch

# What a role entry says when the role's value is not the default (base Role) or not the
# class's own (a subclass): the keys of a [[roles]] table.
_SCALARS = ("profile", "goal", "constraints", "react_mode", "max_react_steps", "human")
_NAMES = ("aliases", "send_to")


@dataclass
class Tables:
    """The ``[[roles]]`` entries, ``[actions.X]`` tables and classes of a team's roles."""

    roles: list[dict[str, Any]] = field(default_factory=list)
    actions: dict[str, ActionSpec] = field(default_factory=dict)
    classes: dict[str, type] = field(default_factory=dict)

    def actions_as_tables(self) -> dict[str, dict[str, Any]]:
        return {name: _spec_table(spec) for name, spec in self.actions.items()}


RoleLike = Role | type[Role]


def role_tables(roles: Iterable[RoleLike], shown: str) -> Tables:
    """The tables of ``roles`` (each a ``Role("Name", ...)``, an instance of a Role
    subclass, or a Role subclass), in their order."""
    out = Tables()
    for i, role in enumerate(roles):
        where = f"{shown}: roles[{i}]"
        if isinstance(role, type) and issubclass(role, Role):
            out.roles.append({"name": role.name, "class": _ref(role, out, where)})
            _declared_in(role.actions, out, f"{where}.actions")
        elif isinstance(role, Role):
            out.roles.append(_entry(role, out, where))
        else:
            raise ConfigError(
                f'{where}: expected a sopbus.Role (Role("Name", watch=[...], actions=[...]), '
                f"a Role subclass or its instance), got {role!r}"
            )
    return out


def _entry(role: Role, out: Tables, where: str) -> dict[str, Any]:
    cls = type(role)
    entry: dict[str, Any] = {"name": role.name}
    if cls is not Role:
        entry["class"] = _ref(cls, out, where)
    for key in _SCALARS:
        if getattr(role, key) != getattr(cls, key):
            entry[key] = getattr(role, key)
    for key in _NAMES:
        if tuple(getattr(role, key)) != tuple(getattr(cls, key)):
            entry[key] = list(getattr(role, key))
    if cls is Role or list(role.watch_entries) != _watches(cls.watch):
        # A sender subscription as the file writes it: { action = "Post", from = ["Alice"] }
        entry["watch"] = [e if isinstance(e, str) else e.as_table() for e in role.watch_entries]
    actions = [_action_ref(a, out, f"{where}.actions[{j}]") for j, a in enumerate(role.actions)]
    if cls is Role or [a.name for a in role.actions] != _names(cls.actions):
        entry["actions"] = actions
    if role.llm != cls.llm:
        entry["llm"] = role.llm.model_dump(exclude_none=True)
    if role.llm_defaults != cls.llm_defaults:
        raise ConfigError(
            f"{where}: role {role.name!r} has llm_defaults of its own; a team's defaults are "
            f"its [llm] settings: give the Team model=..., temperature=..., or llm={{...}}"
        )
    return entry


def _declared_in(refs: Iterable[Any], out: Tables, where: str) -> None:
    """The ``[actions]`` tables of the declared actions in a Role class's own ``actions``:
    the class names them itself, and other roles of the team may watch them by name."""
    for j, ref in enumerate(refs):
        if isinstance(ref, Action) or (isinstance(ref, type) and issubclass(ref, Action)):
            if ref.spec is not None:
                _add_spec(ref.name, ref.spec, out, f"{where}[{j}]")


def _add_spec(name: str, spec: ActionSpec, out: Tables, where: str) -> None:
    if out.actions.setdefault(name, spec) != spec:
        raise ConfigError(
            f"{where}: two different actions are named {name!r} in this team; "
            f"give one of them another name"
        )


def _watches(declared: Iterable[Any]) -> list[Any]:
    return [ref if isinstance(ref, (str, Watch)) else ref.name for ref in declared]


def _names(declared: Iterable[Any]) -> list[str]:
    return [ref if isinstance(ref, str) else ref.name for ref in declared]


def _action_ref(action: Action, out: Tables, where: str) -> str:
    """How a role entry names ``action``: a declared action by its name (its table goes to
    ``[actions]``), a built-in by its name, any other Python class as ``"module:Class"``."""
    cls = type(action)
    own = {k: v for k, v in vars(action).items() if k in ("llm", "max_repairs", "artifact")}
    if own:
        raise ConfigError(
            f"{where}: action {action.name!r} has settings of its own ({', '.join(own)}), which "
            f"a scenario's role entry cannot say (it names actions, not instances): "
            f"declare them on the class, or use Action({action.name!r}, instruction, "
            f"{', '.join(f'{k}=...' for k in own)})"
        )
    if cls.spec is not None:
        _add_spec(action.name, cls.spec, out, where)
        return action.name
    if cls.__module__.startswith("sopbus."):
        return action.name
    return _ref(cls, out, where)


def _ref(cls: type, out: Tables, where: str) -> str:
    """``"module:Class"`` for a Python class (a local class's ``<locals>`` left out: it is
    handed over in-process, and :func:`check_importable` says why a file cannot name it)."""
    ref = f"{cls.__module__}:{cls.__qualname__.replace('<locals>.', '')}"
    old = out.classes.setdefault(ref, cls)
    if old is not cls:
        raise ConfigError(f"{where}: two different classes are both {ref}; rename one of them")
    return ref


def check_importable(classes: Mapping[str, type], shown: str) -> None:
    """Raise :class:`~sopbus.ConfigError` unless a scenario file run elsewhere finds each
    class by its reference: a script's own (``__main__``) and a function's local classes
    are not, and neither is a class its module no longer holds."""
    for ref, cls in classes.items():
        module_name, _, qualname = ref.partition(":")
        why = ""
        if "<locals>" in cls.__qualname__:
            why = f"it is defined inside a function ({cls.__qualname__})"
        elif module_name == "__main__":
            why = "it is defined in the script being run (__main__)"
        else:
            found: Any = importlib.import_module(module_name)
            for part in qualname.split("."):
                found = getattr(found, part, None)
            if found is not cls:
                why = f"importing {ref} does not give this class"
        if why:
            raise ConfigError(
                f"{shown}: cannot write {cls.__name__} into a scenario file as {ref!r}: {why}, "
                f"so `sopbus run` of the file could not import it; move the class to the top "
                f"level of a module that is importable (beside the file, or on PYTHONPATH)"
            )


def _spec_table(spec: ActionSpec) -> dict[str, Any]:
    """An ``[actions.X]`` table as a file writes it: the keys that differ from the defaults."""
    table: dict[str, Any] = msgspec.to_builtins(spec)
    defaults = {f.name: f.default for f in msgspec.structs.fields(ActionSpec)}
    plain = {k: msgspec.to_builtins(v) for k, v in defaults.items() if v is not msgspec.NODEFAULT}
    return {k: v for k, v in table.items() if v is not None and plain.get(k, object()) != v}


def llm_table(llm: LLMSettings | Mapping[str, Any] | None) -> dict[str, Any]:
    if llm is None:
        return {}
    if isinstance(llm, LLMSettings):
        return llm.model_dump(exclude_none=True)
    return dict(llm)
