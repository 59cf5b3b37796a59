"""Sender subscriptions: an action watched from named senders only.

``Role("Bob", watch=["Kickoff", Watch("Post", senders=["Alice"])])`` takes every
``Kickoff`` and only Alice's ``Post`` messages; a scenario file writes the same entry
``{ action = "Post", from = ["Alice"] }``. The Environment indexes them beside the plain
watches (``(action, sender) -> watchers``), so a post costs O(its author's followers).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from sopbus.bus import ConfigError

if TYPE_CHECKING:
    from ._action import Action


class Watch:
    """``action`` watched from ``senders`` (role names) only.

    ``action`` is an Action class, instance or name, as in ``watch``; ``senders`` a list of
    names (``[]`` watches the action from nobody, which a team built from a follower graph
    gives an agent that follows no one). Entries of one action merge: a plain entry of the
    same action in the same ``watch`` wins (watched from anyone), and two ``Watch`` entries
    add up their senders. The team checks that each sender is one of its roles.
    """

    __slots__ = ("action", "senders")

    def __init__(self, action: type[Action] | Action | str, senders: Iterable[str]):
        if isinstance(senders, str) or not isinstance(senders, Iterable):
            raise ConfigError(
                f"Watch({action!r}, senders=...): expected a list of role names, got "
                f"{senders!r}; write senders=[{senders!r}] for a single one"
            )
        self.action = action
        self.senders = tuple(dict.fromkeys(senders))

    @property
    def name(self) -> str:
        """The action's name (what ``cause_by`` says)."""
        action: Any = self.action
        return action if isinstance(action, str) else str(action.name)

    def as_table(self) -> dict[str, Any]:
        """The scenario file's form: ``{ action = "Post", from = ["Alice"] }``."""
        return {"action": self.name, "from": list(self.senders)}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Watch):
            return NotImplemented
        return (self.name, self.senders) == (other.name, other.senders)

    def __hash__(self) -> int:
        return hash((self.name, self.senders))

    def __repr__(self) -> str:
        return f"Watch({self.name!r}, senders={list(self.senders)!r})"


def merged(entries: Iterable[tuple[str, tuple[str, ...] | None]]) -> tuple[Any, ...]:
    """Resolved watch entries (action name, senders or ``None`` for anyone), merged per
    action in first-seen order: the plain names and ``Watch`` values that rebuild them."""
    senders: dict[str, list[str] | None] = {}
    for name, given in entries:
        if given is None:
            senders[name] = None
        elif name not in senders:
            senders[name] = list(given)
        elif (kept := senders[name]) is not None:
            kept.extend(s for s in given if s not in kept)
    return tuple(name if s is None else Watch(name, s) for name, s in senders.items())
