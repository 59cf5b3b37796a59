"""A role's memory: every message it received or published, in order, indexed by action."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from sopbus.bus import Message


class Memory:
    """The messages a role has seen, oldest first.

    Received messages are kept once per id (a message delivered twice is remembered once);
    the role's own messages, which have no id until the Environment stamps them, are kept
    as published. ``by_cause`` is an index lookup, not a scan.
    """

    __slots__ = ("_by_cause", "_ids", "_messages")

    def __init__(self) -> None:
        self._messages: list[Message] = []
        self._by_cause: dict[str, list[Message]] = {}
        self._ids: set[str] = set()

    def add(self, message: Message) -> bool:
        """Remember ``message``; ``False`` if a message with its id is already remembered."""
        if message.id:
            if message.id in self._ids:
                return False
            self._ids.add(message.id)
        self._messages.append(message)
        self._by_cause.setdefault(message.cause_by, []).append(message)
        return True

    def extend(self, messages: Iterable[Message]) -> None:
        for message in messages:
            self.add(message)

    def by_cause(self, cause_by: str) -> tuple[Message, ...]:
        """The remembered messages caused by the action ``cause_by``, oldest first."""
        return tuple(self._by_cause.get(cause_by, ()))

    def latest(self, cause_by: str) -> Message | None:
        """The newest remembered message caused by ``cause_by``, if any."""
        found = self._by_cause.get(cause_by)
        return found[-1] if found else None

    def recent(self, n: int) -> tuple[Message, ...]:
        """The ``n`` newest messages, oldest first."""
        return tuple(self._messages[-n:]) if n > 0 else ()

    def __contains__(self, message_id: object) -> bool:
        return message_id in self._ids

    def __iter__(self) -> Iterator[Message]:
        return iter(self._messages)

    def __len__(self) -> int:
        return len(self._messages)

    def clear(self) -> None:
        self._messages.clear()
        self._by_cause.clear()
        self._ids.clear()
