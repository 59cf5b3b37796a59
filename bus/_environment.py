"""The Environment: the address book and the router.

Data flows one way: a role's step returns messages, :meth:`Environment.publish` stamps them
(id, run id, round) and appends them to the private inbox of every recipient. Routing goes
through two indexes, so one publish costs O(recipients), never O(roles):

* ``cause_by -> watchers`` (in the order the roles joined), for messages with no ``send_to``;
* ``name or alias -> role name``, for messages that name their recipients.

The contract (DESIGN.md, "Routing"): message ``m`` reaches role ``r`` exactly when ``r`` is
not ``m.sent_from`` and either ``m.send_to`` names ``r`` (by name or alias), or
``m.send_to`` is empty and ``r`` watches ``m.cause_by``. A message that reaches nobody is
recorded as undelivered.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import msgspec
import trio

from ._errors import ConfigError
from ._events import MessagePublished, MessageUndelivered, RoleJoined, RoleLeft
from ._member import Member
from ._message import Message

EventSink = Callable[[Any], None]
_replace = msgspec.structs.replace


class Environment:
    """The address book of a run's roles and the router of its messages.

    Roles may join and leave at any time; a new role receives messages from the next
    publish on. ``log`` receives the event records (the run store writes them); pass
    ``None`` to route without a log.
    """

    def __init__(self, run_id: str = "", *, log: EventSink | None = None):
        self.run_id = run_id
        self.round = 0
        self.published = 0
        self.undelivered = 0
        self.deliveries = 0  # messages put into inboxes, counted per recipient
        self.consumed = 0  # of those, taken by their role (or dropped when it left)
        self._log = log
        self._members: dict[str, Member] = {}
        # Unbounded inboxes on purpose: roles consume and publish (a cycle), so a bounded
        # buffer can deadlock; the round limit and the budget bound the total work.
        self._inboxes: dict[str, list[Message]] = {}
        self._waiters: dict[str, trio.Event] = {}  # events mode: roles parked until news
        self._by_action: dict[str, list[str]] = {}
        self._by_address: dict[str, str] = {}
        # Called with each role added from now on; the events-mode run loop sets it so that a
        # role hired mid-run gets its own task.
        self.on_join: Callable[[Member], None] | None = None

    # -- the address book -------------------------------------------------------------

    def add(self, member: Member) -> None:
        """Registers ``member``; its name and aliases must be free."""
        name = member.name
        addresses = (name, *member.aliases)
        taken = [a for a in addresses if a in self._by_address]
        if taken:
            raise ConfigError(f"cannot add role {name!r}: the name or alias {taken[0]!r} is "
                              f"already used by role {self._by_address[taken[0]]!r}; "
                              f"give each role a unique name and aliases")
        self._members[name] = member
        self._inboxes[name] = []
        for address in addresses:
            self._by_address[address] = name
        for action in member.watch:
            self._by_action.setdefault(action, []).append(name)
        if self._log is not None:
            self._log(RoleJoined(round=self.round, name=name, aliases=tuple(member.aliases),
                                 watch=tuple(sorted(member.watch))))
        if self.on_join is not None:
            self.on_join(member)

    def add_all(self, members: Iterable[Member]) -> None:
        for member in members:
            self.add(member)

    def remove(self, name: str) -> None:
        """Takes ``name`` out of the address book; its unread messages are recorded."""
        member = self._members.pop(name)
        inbox = self._inboxes.pop(name)
        for address in (name, *member.aliases):
            del self._by_address[address]
        for action in member.watch:
            watchers = self._by_action[action]
            watchers.remove(name)
            if not watchers:
                del self._by_action[action]
        self.consumed += len(inbox)
        waiter = self._waiters.pop(name, None)
        if waiter is not None:
            waiter.set()  # wake its loop so it can see it has left
        if self._log is not None:
            self._log(RoleLeft(round=self.round, name=name, unread=tuple(m.id for m in inbox)))

    @property
    def members(self) -> list[Member]:
        """The roles in the order they joined (the team's declared order)."""
        return list(self._members.values())

    def member(self, name: str) -> Member:
        return self._members[name]

    def resolve(self, address: str) -> str | None:
        """The role name behind a name or alias, or ``None``."""
        return self._by_address.get(address)

    def watchers(self, action: str) -> Sequence[str]:
        return self._by_action.get(action, ())

    # -- inboxes ------------------------------------------------------------------------

    def has_news(self, name: str) -> bool:
        return bool(self._inboxes[name])

    def take(self, name: str) -> list[Message]:
        """Drains ``name``'s inbox: the messages delivered since its last turn."""
        news = self._inboxes[name]
        self._inboxes[name] = []
        self.consumed += len(news)
        return news

    async def wait_for_news(self, name: str) -> None:
        """Returns when ``name`` has news or has left the address book."""
        if name in self._inboxes and not self._inboxes[name]:
            waiter = self._waiters[name] = trio.Event()
            await waiter.wait()

    def pending(self) -> int:
        """How many delivered messages no role has read yet (O(1))."""
        return self.deliveries - self.consumed

    def __contains__(self, name: object) -> bool:
        return name in self._members

    # -- routing ------------------------------------------------------------------------

    def publish(self, message: Message, *, round: int | None = None) -> Message:
        """Stamps ``message`` and delivers it; returns the stamped message."""
        return self.publish_all((message,), round=round)[0]

    def publish_all(self, messages: Iterable[Message], *, round: int | None = None) -> list[Message]:
        """Stamps and delivers ``messages`` in order; returns them stamped.

        The hot path of the bus, so the common case (broadcast by ``cause_by``) is inlined.
        """
        rnd = self.round if round is None else round
        run_id, inboxes, waiters, log = self.run_id, self._inboxes, self._waiters, self._log
        by_action, members = self._by_action, self._members
        n, delivered, dropped = self.published, 0, 0
        out = []
        for message in messages:
            n += 1
            message = _replace(message, id=f"m{n}", run_id=run_id, round=rnd)
            if message.send_to:
                recipients: Sequence[str] = self._named(message)
            else:
                recipients = by_action.get(message.cause_by, ())
                sender = message.sent_from
                if sender in members and sender in recipients:
                    recipients = [r for r in recipients if r != sender]
            for name in recipients:
                inboxes[name].append(message)
            if waiters:
                for name in recipients:
                    if name in waiters:
                        waiters.pop(name).set()
            if recipients:
                delivered += len(recipients)
            else:
                dropped += 1
            if log is not None:
                self._record(message, recipients)
            out.append(message)
        self.published, self.deliveries, self.undelivered = (
            n, self.deliveries + delivered, self.undelivered + dropped)
        return out

    def _named(self, message: Message) -> list[str]:
        sender = message.sent_from
        found: list[str] = []
        for address in message.send_to:
            name = self._by_address.get(address)
            if name is not None and name != sender and name not in found:
                found.append(name)
        return found

    def _record(self, message: Message, recipients: Sequence[str]) -> None:
        assert self._log is not None
        if recipients:
            self._log(MessagePublished(message=message, recipients=tuple(recipients)))
            return
        if message.send_to:
            reason = f"no role is named {', '.join(message.send_to)}"
        else:
            reason = f"no role watches {message.cause_by}"
        self._log(MessageUndelivered(message=message, reason=reason))
