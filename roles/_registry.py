"""The registry: actions and roles by name, so that files can name them.

A Python subclass of :class:`~sopbus.roles.Action` or :class:`~sopbus.roles.Role` registers itself into
:data:`registry` (the default) when its class statement runs. A scenario declares its own
actions and roles into ``registry.copy()``, so one scenario's declarations never leak into
another's or into the built-ins.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any, TypeAlias, TypeVar

from sopbus.bus import ConfigError, closest

# The registry holds Action and Role subclasses but names neither type: both register
# themselves here when their class statement runs, so importing them would be a circle.
Action: TypeAlias = Any
Role: TypeAlias = Any

_C = TypeVar("_C", bound=type)


class Registry:
    """Actions and roles by name.

    Lookups of unknown names raise :class:`sopbus.bus.ConfigError` naming the closest known names
    and, when given, where the name was written (``where="$.roles[0].watch[1]"``).
    """

    __slots__ = ("_actions", "_roles", "_tools")

    def __init__(self) -> None:
        self._actions: dict[str, type[Action]] = {}
        self._roles: dict[str, type[Role]] = {}
        self._tools: dict[str, Any] = {}  # Python function tools (sopbus.roles._tools.Tool)

    def copy(self) -> Registry:
        """A registry that starts with this one's entries and grows on its own."""
        new = Registry()
        new._actions.update(self._actions)
        new._roles.update(self._roles)
        new._tools.update(self._tools)
        return new

    @property
    def tools(self) -> Mapping[str, Any]:
        """The Python function tools (``@sopbus.tool``) by name (read-only view)."""
        return MappingProxyType(self._tools)

    def add_tool(self, tool: Any) -> Any:
        old = self._tools.get(tool.name)
        fn = tool.fn
        if old is not None and (old.fn.__module__, old.fn.__qualname__) != (
            fn.__module__,
            fn.__qualname__,
        ):
            raise ConfigError(
                f"tool py.{tool.name} is defined twice: by {old.fn.__module__}."
                f"{old.fn.__qualname__} and by {fn.__module__}.{fn.__qualname__}; "
                f'give one of them another name (@tool(name="..."))'
            )
        self._tools[tool.name] = tool
        return tool

    @property
    def actions(self) -> Mapping[str, type[Action]]:
        """The registered actions by name (read-only view, in registration order)."""
        return MappingProxyType(self._actions)

    @property
    def roles(self) -> Mapping[str, type[Role]]:
        """The registered role classes by name (read-only view, in registration order)."""
        return MappingProxyType(self._roles)

    def add_action(self, cls: type[Action]) -> type[Action]:
        return _add(self._actions, "action", cls.name, cls)

    def add_role(self, cls: type[Role]) -> type[Role]:
        return _add(self._roles, "role", cls.name, cls)

    def action(self, name: str, *, where: str | None = None) -> type[Action]:
        """The action registered as ``name``; :class:`sopbus.bus.ConfigError` if there is none."""
        found = self._actions.get(name)
        if found is None:
            raise ConfigError(unknown_name("action", name, self._actions, where))
        return found

    def role(self, name: str, *, where: str | None = None) -> type[Role]:
        """The role class registered as ``name``; :class:`sopbus.bus.ConfigError` if there is none."""
        found = self._roles.get(name)
        if found is None:
            raise ConfigError(unknown_name("role", name, self._roles, where))
        return found

    def __repr__(self) -> str:
        return (
            f"<Registry: {len(self._actions)} actions, {len(self._roles)} roles, "
            f"{len(self._tools)} tools>"
        )


def _add(table: dict[str, _C], kind: str, name: str, cls: _C) -> _C:
    old = table.get(name)
    if old is not None and old is not cls and not _same_definition(old, cls):
        raise ConfigError(
            f"{kind} {name!r} is defined twice: by {_origin(old)} and by {_origin(cls)}; "
            f'give one of them another name (name = "..."), or declare it into its own '
            f"registry (registry=roles.registry.copy())"
        )
    table[name] = cls
    return cls


def _same_definition(old: type, new: type) -> bool:
    """A module re-imported or a class statement run again (a test, a reload) replaces the
    old class; a declaration from a file never silently replaces anything."""
    if getattr(old, "_declared_at", None) or getattr(new, "_declared_at", None):
        return False
    return (old.__module__, old.__qualname__) == (new.__module__, new.__qualname__)


def _origin(cls: type) -> str:
    declared = getattr(cls, "_declared_at", None)
    return f"the declaration at {declared}" if declared else f"{cls.__module__}.{cls.__qualname__}"


_LISTED = 10  # a registry this small is listed whole when no name is close


def unknown_name(kind: str, name: object, known: Iterable[str], where: str | None) -> str:
    """The message for a name that is not registered: where, the closest names, the fix."""
    known = sorted(known)
    at = f" at {where}" if where else ""
    close = closest(str(name), known, cutoff=0.7)
    hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
    # The closest few say more than a page of names: a listing of 20 cut alphabetically
    # showed whichever family sorts first (Board.*), not what the user meant.
    if close:
        listing = "`sopbus roles` lists the built-in roles and their actions"
    elif len(known) <= _LISTED:
        listing = f"Known {kind}s: {', '.join(known) or '(none)'}"
    else:
        listing = (
            f"None of the {len(known)} known {kind}s is close; `sopbus roles` lists the "
            f"built-in roles and their actions"
        )
    return f"unknown {kind} {name!r}{at}{hint}. {listing}. Fix the spelling, or declare the {kind} before naming it."


registry = Registry()
"""The default registry: Python subclasses of Action and Role register here unless their
class statement says ``registry=...`` or ``register=False``."""
