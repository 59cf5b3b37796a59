"""What an action and the react loop see of the role running them: a small protocol, so
that ``Action`` and the react helpers need not import ``Role`` (which imports them)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from sopbus.bus import Message, Turn

if TYPE_CHECKING:
    from ._memory import Memory


class RoleView(Protocol):
    """The part of a :class:`~sopbus.roles.Role` that its actions use. ``actions`` are the role's
    actions in declared order; the react loop picks among them by ``name``."""

    name: str
    profile: str
    goal: str
    max_react_steps: int
    memory: Memory
    actions: Any

    def system_text(self) -> str: ...

    def recall(
        self, news: tuple[Message, ...], earlier: tuple[Message, ...], limit: int
    ) -> tuple[Message, ...]: ...

    def action_named(self, name: str) -> Any: ...

    def context(
        self, action: Any, news: tuple[Message, ...], turn: Turn, earlier: tuple[Message, ...] = ()
    ) -> Any: ...
