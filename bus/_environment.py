"""The Environment: the address book and the router.

Data flows one way: a role's step returns messages, :meth:`Environment.publish` stamps them
(id, round) and appends them to the private inbox of every recipient. Routing goes
through two indexes, so one publish costs O(recipients), never O(roles):

* ``cause_by -> watchers`` (in the order the roles joined), for messages with no ``send_to``,
  beside it ``(cause_by, sender) -> watchers`` for the roles that watch an action from
  named senders only (sender subscriptions: a follower of Alice watches Alice's posts);
* ``name or alias -> role name``, for messages that name their recipients.

A delivery into an empty inbox also puts the role on the list of roles with news, so the
rounds loop finds who has work in O(roles with news), never by looking at every role.

The contract (docs/design/routing.md): message ``m`` reaches role ``r`` exactly when ``r`` is
not ``m.sent_from`` and either ``m.send_to`` names ``r`` (by name or alias), or
``m.send_to`` is empty and ``r`` watches ``m.cause_by`` from any sender or from
``m.sent_from``. A message that reaches nobody is recorded as undelivered.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

import msgspec
import trio

from ._errors import ConfigError
from ._events import MessagePublished, MessageUndelivered, RoleJoined, RoleLeft
from ._member import Crowd, Member, sender_subscriptions
from ._message import Message

EventSink = Callable[[Any], None]
"""Takes one event record."""


class EventLog(Protocol):
    """A sink that also takes the records of one publish together (the run store), in
    chunks of at most 1024 records for a larger publish."""

    def log(self, event: Any) -> None: ...

    def log_all(self, events: list[Any]) -> None: ...


_replace = msgspec.structs.replace
_CHUNK = 1024  # a publish hands its log records over in chunks of this many (the run store's batch)


class Environment:
    """The address book of a run's roles and the router of its messages.

    Roles may join and leave at any time; a new role receives messages from the next
    publish on. ``log`` receives the event records: a callable taking one record, or an
    :class:`EventLog` such as the run store, which is handed the records of a publish
    together; ``None`` routes without a log. ``run_id`` names the run for its turns
    (:attr:`sopbus.bus.Turn.run_id`) and its result; messages do not carry it while the run goes
    (see :class:`sopbus.bus.Message`).
    """

    def __init__(self, run_id: str = "", *, log: EventSink | EventLog | None = None):
        self.run_id = run_id
        self.round = 0
        self.published = 0
        self.undelivered = 0
        self.deliveries = 0  # messages put into inboxes, counted per recipient
        self.consumed = 0  # of those, taken by their role (or dropped when it left)
        self._log: EventSink | None = None
        self._log_all: Callable[[list[Any]], None] | None = None
        if log is not None and not callable(log):
            self._log, self._log_all = log.log, log.log_all
        elif log is not None:
            self._log = log
        self._members: dict[str, Member] = {}
        # Unbounded inboxes on purpose: roles consume and publish (a cycle), so a bounded
        # buffer can deadlock; the round limit and the budget bound the total work.
        self._inboxes: dict[str, list[Message]] = {}
        self._waiters: dict[str, trio.Event] = {}  # events mode: roles parked until news
        self._ready: dict[str, None] = {}  # roles whose inbox is not empty (an ordered set)
        self._rank: dict[str, int] = {}  # name -> place in the joining order
        self._joined = 0
        # Tuples, rebuilt when a role joins or leaves (rare): a publish hands them to its log
        # records as they are, with no copy, since they never change in place.
        self._by_action: dict[str, tuple[str, ...]] = {}
        self._by_address: dict[str, str] = {}
        # Populations by name: an agent's address (Player-17) is resolved by its crowd,
        # not kept in _by_address, so a million agents cost no million entries.
        self._crowds: dict[str, Crowd] = {}
        # Sender subscriptions: (action, sender) -> the roles that watch action from sender
        # only; a role is never both here and in _by_action for one action, so the two are
        # disjoint. _both caches their merge, in joining order, for the pairs that have both.
        self._by_sender: dict[tuple[str, str], tuple[str, ...]] = {}
        self._both: dict[tuple[str, str], tuple[str, ...]] = {}
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
            raise ConfigError(
                f"cannot add role {name!r}: the name or alias {taken[0]!r} is "
                f"already used by role {self._by_address[taken[0]]!r}; "
                f"give each role a unique name and aliases"
            )
        self._members[name] = member
        if isinstance(member, Crowd):
            self._crowds[name] = member
        self._inboxes[name] = []
        self._rank[name] = self._joined
        self._joined += 1
        for address in addresses:
            self._by_address[address] = name
        senders = sender_subscriptions(member)
        for action in member.watch:
            if action not in senders:
                self._by_action[action] = (*self._by_action.get(action, ()), name)
        for key in _pairs(senders):
            self._by_sender[key] = (*self._by_sender.get(key, ()), name)
        self._both.clear()
        if self._log is not None:
            self._log(
                RoleJoined(
                    round=self.round,
                    name=name,
                    aliases=tuple(member.aliases),
                    watch=tuple(sorted({*member.watch, *senders})),
                    watch_from={a: tuple(sorted(senders[a])) for a in sorted(senders)},
                )
            )
        if self.on_join is not None:
            self.on_join(member)

    def add_all(self, members: Iterable[Member]) -> None:
        for member in members:
            self.add(member)

    def remove(self, name: str) -> None:
        """Takes ``name`` out of the address book; its unread messages are recorded."""
        member = self._members.pop(name)
        self._crowds.pop(name, None)
        inbox = self._inboxes.pop(name)
        del self._rank[name]
        self._ready.pop(name, None)
        for address in (name, *member.aliases):
            del self._by_address[address]
        senders = sender_subscriptions(member)
        for action in member.watch:
            if action not in senders:
                _drop(self._by_action, action, name)
        for key in _pairs(senders):
            _drop(self._by_sender, key, name)
        self._both.clear()
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
        """The role name behind a name or alias (or the population behind an agent's
        address, ``Player-17``), or ``None``."""
        return self._by_address.get(address) or self._crowd_of(address)

    def _crowd_of(self, address: str) -> str | None:
        if not self._crowds:
            return None
        crowd = self._crowds.get(address.rpartition("-")[0])
        return crowd.name if crowd is not None and crowd.agent_index(address) is not None else None

    @property
    def crowds(self) -> list[Crowd]:
        """The populations among the members, in the order they joined."""
        return list(self._crowds.values())

    def watchers(self, action: str, sender: str | None = None) -> list[str]:
        """The roles that watch ``action`` from any sender (and, given ``sender``, those
        that watch it from ``sender``), in the order they joined."""
        if sender is None:
            return list(self._by_action.get(action, ()))
        return list(self._watching(action, sender))

    # -- inboxes ------------------------------------------------------------------------

    def has_news(self, name: str) -> bool:
        return bool(self._inboxes[name])

    def with_news(self) -> list[str]:
        """The roles that have news, in the order they joined (the team's declared order).
        Costs O(k log k) for k roles with news, whatever the size of the team."""
        ready = self._ready
        if len(ready) == 1:
            return list(ready)
        return sorted(ready, key=self._rank.__getitem__)

    def take(self, name: str) -> list[Message]:
        """Drains ``name``'s inbox: the messages delivered since its last turn."""
        news = self._inboxes[name]
        self._inboxes[name] = []
        self._ready.pop(name, None)
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

    def publish_all(
        self,
        messages: Iterable[Message],
        *,
        round: int | None = None,
        parents: tuple[str, ...] = (),
    ) -> list[Message]:
        """Stamps and delivers ``messages`` in order; returns them stamped. ``parents``, if
        given, are stamped on each message that names none (the run loop passes the ids of
        what the publishing turn read).

        Each message is stamped (id, round), routed (:meth:`recipients`: the contract),
        delivered in publish order, and recorded; the records of one publish go to the
        log together."""
        rnd = self.round if round is None else round
        records = _Records(self._log_all or self._write) if self._log is not None else None
        inboxes, waiters, ready = self._inboxes, self._waiters, self._ready
        recipients_of = self.recipients
        n, delivered, dropped = self.published, 0, 0
        out = []
        for message in messages:
            n += 1
            message = _stamped(message, f"m{n}", rnd, parents)
            recipients = recipients_of(message)
            # Delivered in publish order; an inbox that was empty puts its role on the list
            # of roles with news (and, in events mode, wakes it). Inlined: the hot path.
            for name in recipients:
                inbox = inboxes[name]
                if not inbox:
                    ready[name] = None
                    if waiters and name in waiters:
                        waiters.pop(name).set()
                inbox.append(message)
            delivered += len(recipients)
            dropped += not recipients
            if records is not None:
                records.add(message, recipients)
            out.append(message)
        self.published = n
        self.deliveries += delivered
        self.undelivered += dropped
        if records is not None:
            records.hand_over()
        return out

    def recipients(self, message: Message) -> tuple[str, ...]:
        """Who ``message`` goes to, by the contract: every role that ``send_to`` names (by
        name or alias) or, when it names none, every role that watches ``cause_by`` from
        any sender or from ``sent_from``; never
        its sender. In the order they were named, or joined. O(recipients)."""
        if message.send_to:
            return self._named(message)
        sender = message.sent_from
        watchers = (
            self._watching(message.cause_by, sender)
            if self._by_sender
            else self._by_action.get(message.cause_by, ())
        )
        # The membership test first: most senders are roles, few watch their own action.
        if sender in self._members and sender in watchers:
            return tuple([r for r in watchers if r != sender])
        return watchers

    def _watching(self, action: str, sender: str) -> tuple[str, ...]:
        """Who watches ``action`` from anyone or from ``sender``, in joining order."""
        anyone = self._by_action.get(action, ())
        followers = self._by_sender.get((action, sender))
        if not followers:
            return anyone
        if not anyone:
            return followers
        key = (action, sender)
        both = self._both.get(key)
        if both is None:
            both = self._both[key] = tuple(
                sorted((*anyone, *followers), key=self._rank.__getitem__)
            )
        return both

    def _write(self, records: list[Any]) -> None:
        assert self._log is not None
        for record in records:
            self._log(record)

    def _named(self, message: Message) -> tuple[str, ...]:
        sender = message.sent_from
        found: list[str] = []
        for address in message.send_to:
            name = self._by_address.get(address) or self._crowd_of(address)
            if name is not None and name != sender and name not in found:
                found.append(name)
        return tuple(found)


def _pairs(senders: Mapping[str, frozenset[str]]) -> list[tuple[str, str]]:
    return [(action, sender) for action in senders for sender in sorted(senders[action])]


def _drop(index: dict[Any, tuple[str, ...]], key: Any, name: str) -> None:
    """``name`` out of ``index[key]``; the key goes when no watcher is left."""
    watchers = tuple(w for w in index[key] if w != name)
    if watchers:
        index[key] = watchers
    else:
        del index[key]


def _stamped(message: Message, id: str, rnd: int, parents: tuple[str, ...]) -> Message:
    """``message`` with its id and round, and ``parents`` when it names none."""
    if parents and not message.parents:
        return _replace(message, id=id, round=rnd, parents=parents)
    return _replace(message, id=id, round=rnd)


class _Records:
    """The log records of one publish, handed to the log in chunks of ``_CHUNK`` while they
    are fresh in the cache. The messages of one step usually answer the same news: a
    message with the same two or more parents as the last one written out names that one
    instead (``parents_as``) of repeating them."""

    __slots__ = ("_hand", "_records", "_shared", "_shared_id")

    def __init__(self, hand: Callable[[list[Any]], None]):
        self._hand = hand
        self._records: list[Any] = []
        self._shared_id, self._shared = "", ()  # type: str, tuple[str, ...]

    def add(self, message: Message, recipients: tuple[str, ...]) -> None:
        if len(message.parents) < 2:
            record = (
                MessagePublished(message, recipients) if recipients else _undelivered(message, "")
            )
        elif message.parents == self._shared:
            record = _record(_replace(message, parents=()), recipients, self._shared_id)
        else:
            self._shared_id, self._shared = message.id, message.parents
            record = _record(message, recipients, "")
        self._records.append(record)
        if len(self._records) == _CHUNK:
            self.hand_over()

    def hand_over(self) -> None:
        if self._records:
            self._hand(self._records)
            self._records = []


def _record(message: Message, recipients: tuple[str, ...], parents_as: str) -> Any:
    """The log record of ``message`` (see :class:`~sopbus.bus._events.MessagePublished` for
    ``parents_as``: the messages of one step usually answer the same news, which is then
    written out once per publish)."""
    if recipients:
        return MessagePublished(message, recipients, parents_as=parents_as)
    return _undelivered(message, parents_as)


def _undelivered(message: Message, parents_as: str) -> MessageUndelivered:
    if message.send_to:
        reason = f"no role is named {', '.join(message.send_to)}"
    else:
        reason = f"no role watches {message.cause_by}"
    return MessageUndelivered(message, reason, parents_as=parents_as)
