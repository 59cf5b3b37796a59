"""Python classes that a scenario's ``[[roles]]`` name by ``"module:Class"``: a role's
``class``, and Action classes in its ``watch`` and ``actions``.

A class handed over in the same process (``Scenario.classes``, what a ``sopbus.Team``
passes) is used as it is; any other is imported, beside the scenario file first, as a
user's SOP module is.
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec

from sopbus.bus import ConfigError, RoleSpec, Scenario
from sopbus.bus.scenario import WatchSpec
from sopbus.roles import Action, Registry, Role
from sopbus.roles import registry as default_registry

from ._import import import_sop_module

C = TypeVar("C", bound=type)


def python_class(ref: str, kind: C, scenario: Scenario, where: str) -> C:
    """The class ``ref`` (``"module:Class"``) names, which must be a subclass of ``kind``;
    a :class:`~sopbus.bus.ConfigError` naming the file, ``where`` and the fix otherwise."""
    file = f"{scenario.path}: "
    found: object = scenario.classes.get(ref)
    if found is None:
        module_name, _, qualname = ref.partition(":")
        what = f"{kind.__name__} class"
        found = import_sop_module(module_name, scenario.path.parent, where, file, kind=what)
        for part in qualname.split("."):
            if not hasattr(found, part):
                raise ConfigError(
                    f"{file}{ref!r} at {where}: module {module_name} "
                    f"({getattr(found, '__file__', module_name)}) has no {qualname}; "
                    f"check the class's name"
                )
            found = getattr(found, part)
    if not (isinstance(found, type) and issubclass(found, kind)):
        raise ConfigError(
            f"{file}{ref!r} at {where} is not a {kind.__name__} class (it is {found!r}); "
            f"name a subclass of sopbus.{kind.__name__}"
        )
    return found  # type: ignore[return-value]  # checked: a subclass of kind


def with_action_classes(scenario: Scenario, registry: Registry) -> tuple[RoleSpec, ...]:
    """The scenario's ``[[roles]]``, each Action class they name as ``"module:Class"``
    registered into ``registry`` and named by its action name. All of them come first, so
    a role may watch, by name, the Python action of a role declared after it; so do the
    modules of the Role classes they name, whose own actions register when imported."""
    for i, spec in enumerate(scenario.roles):
        if spec.cls is not None:
            python_class(spec.cls, Role, scenario, f"$.roles[{i}].class")
    out = []
    for i, spec in enumerate(scenario.roles):
        changes: dict[str, tuple[Any, ...]] = {}
        for key in ("watch", "actions"):
            refs: tuple[Any, ...] = getattr(spec, key) or ()
            if any(":" in _action_of(ref) for ref in refs):
                changes[key] = tuple(
                    _with_class(ref, scenario, registry, f"$.roles[{i}].{key}[{j}]")
                    for j, ref in enumerate(refs)
                )
        out.append(msgspec.structs.replace(spec, **changes) if changes else spec)
    # An imported module's Action classes registered themselves into the default registry
    # (their class statements ran); the scenario's copy of it knows them too.
    for name, cls in default_registry.actions.items():
        if name not in registry.actions:
            registry.add_action(cls)
    return tuple(out)


def _action_of(ref: str | WatchSpec) -> str:
    return ref if isinstance(ref, str) else ref.action


def _with_class(
    ref: str | WatchSpec, scenario: Scenario, registry: Registry, where: str
) -> str | WatchSpec:
    """``ref`` naming its action by name, a ``"module:Class"`` one registered."""
    if isinstance(ref, WatchSpec):
        if ":" not in ref.action:
            return ref
        action = _registered(ref.action, scenario, registry, f"{where}.action")
        return msgspec.structs.replace(ref, action=action)
    return _registered(ref, scenario, registry, where) if ":" in ref else ref


def _registered(ref: str, scenario: Scenario, registry: Registry, where: str) -> str:
    cls = python_class(ref, Action, scenario, where)
    if registry.actions.get(cls.name) is not cls:
        try:
            registry.add_action(cls)
        except ConfigError as exc:
            raise ConfigError(f"{scenario.path}: {exc} (named at {where})") from None
    return cls.name
