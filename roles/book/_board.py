"""The blackboard of the book writer: per heading, the slots the workers read and write.

Every write to the board is a bus message whose ``cause_by`` names the slot written
(``"Board.content"``) and whose payload says where and what::

    Message(cause_by="Board.content", sent_from="Writer",
            payload={"heading": "Chapter 2", "value": "It was dawn on ..."})

so a worker subscribes to board changes like any role watches an action (``watch =
["Board.evaluation"]``). A user's edit is the same kind of message (a scenario's
``[[inject]]``); without ``value`` in the payload, the message's ``content`` is the value.

Why a write log and not a shared dict: in a round, every worker's turn runs concurrently
and trio does not promise an order between them, so a worker that read a dict other turns
were writing would see a different board from run to run. Here a worker reads the board
*as it was when the round began* (every write of earlier rounds) plus the writes in its
own news, folded in publish order: the same board whatever order the turns ran in. The
run loop publishes a round's messages after all its turns, so nothing is lost by that.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import msgspec

from sopbus.bus import Message, SopbusError

from .._action import Action, ActionContext, ActionResult

PREFIX = "Board."

INT_SLOTS = ("word_count", "word_count_requirement", "revision_count")
LIST_SLOTS = ("subheadings", "material_needs")
TEXT_SLOTS = ("content", "evaluation", "strategy", "material", "requirement")
SLOTS = (
    "subheadings",
    "content",
    "evaluation",
    "strategy",
    "word_count",
    "word_count_requirement",
    "material",
    "requirement",
    "material_needs",
    "revision_count",
)
"""The slots of a heading, in the order the issue lists them."""

SEPARATOR = " / "
"""Between a heading and its subheading in a board key: ``"Chapter 3 / The Cave"``."""


def slot_action(slot: str) -> str:
    """The ``cause_by`` of a write to ``slot``: ``"Board.<slot>"``."""
    if slot not in SLOTS:
        raise ValueError(f"unknown board slot {slot!r}; slots are {', '.join(SLOTS)}")
    return PREFIX + slot


def slot_of(cause_by: str) -> str | None:
    """The slot a message writes, or ``None`` when it is not a board write."""
    slot = cause_by[len(PREFIX) :] if cause_by.startswith(PREFIX) else None
    return slot if slot in SLOTS else None


class Heading(msgspec.Struct, frozen=True, kw_only=True):
    """One heading's slots. Text slots are empty strings when not written."""

    subheadings: tuple[str, ...] = ()
    content: str = ""
    evaluation: str = ""
    strategy: str = ""
    word_count: int = 0
    word_count_requirement: int = 0
    material: str = ""
    requirement: str = ""
    material_needs: tuple[str, ...] = ()
    revision_count: int = 0


EMPTY = Heading()


class Write(msgspec.Struct, frozen=True, kw_only=True):
    """One write in the log. ``(round, rank, seq)`` is its place in publish order: a round's
    injected messages (rank 0) are published before its roles' (rank = place in the team),
    each role's in the order it returned them. ``message_id`` is set for writes that came
    as published messages (user edits), so they are taken once and found in news."""

    round: int
    rank: int
    seq: int
    heading: str
    slot: str
    value: Any
    message_id: str = ""

    @property
    def order(self) -> tuple[int, int, int]:
        return (self.round, self.rank, self.seq)


class BoardError(SopbusError, ValueError):
    """A board write that cannot be read: no heading, or a value of the wrong kind."""


def write_message(heading: str, slot: str, value: Any, *, sender: str, note: str = "") -> Message:
    """The message that writes ``value`` into ``slot`` of ``heading``."""
    value = coerce(slot, value)
    shown = (
        value
        if isinstance(value, str)
        else "\n".join(map(str, value))
        if isinstance(value, tuple)
        else str(value)
    )
    content = f"[{heading}] {slot}: {shown}" if not note else f"[{heading}] {slot}: {note}"
    return Message(
        cause_by=slot_action(slot),
        sent_from=sender,
        content=content,
        payload={"heading": heading, "value": list(value) if isinstance(value, tuple) else value},
    )


def read_write(message: Message) -> tuple[str, str, Any]:
    """``(heading, slot, value)`` of a board-write message; :class:`BoardError` if it is
    not one that can be applied."""
    slot = slot_of(message.cause_by)
    if slot is None:
        raise BoardError(
            f"{message.cause_by!r} is not a board slot; slots are "
            f"{', '.join(PREFIX + s for s in SLOTS)}"
        )
    payload = message.payload if isinstance(message.payload, dict) else {}
    heading = payload.get("heading")
    if not isinstance(heading, str) or not heading.strip():
        raise BoardError(
            f"a write to {slot} needs payload.heading (the heading it is for), "
            f"got payload {message.payload!r}"
        )
    value = payload["value"] if "value" in payload else message.content
    return heading.strip(), slot, coerce(slot, value)


def coerce(slot: str, value: Any) -> Any:
    """``value`` as the slot holds it: an int for counts, a tuple of lines for lists, text."""
    if slot in INT_SLOTS:
        try:
            number = (
                int(str(value).strip().replace(",", "")) if not isinstance(value, int) else value
            )
        except ValueError:
            raise BoardError(f"{slot} takes a whole number, got {value!r}") from None
        if number < 0:
            raise BoardError(f"{slot} cannot be negative, got {number}")
        return number
    if slot in LIST_SLOTS:
        items = value.splitlines() if isinstance(value, str) else value
        if not isinstance(items, (list, tuple)):
            raise BoardError(f"{slot} takes a list of lines, got {value!r}")
        return tuple(str(item).strip() for item in items if str(item).strip())
    if not isinstance(value, str):
        raise BoardError(f"{slot} takes text, got {value!r}")
    return value


def child_key(parent: str, title: str) -> str:
    return f"{parent}{SEPARATOR}{title}"


class BoardView:
    """The board at one moment: every heading's slots, the headings in the order they were
    first written, and which heading is whose subheading."""

    def __init__(self, writes: Iterable[Write]):
        self.headings: dict[str, Heading] = {}
        for write in sorted(writes, key=lambda w: w.order):
            entry = self.headings.get(write.heading, EMPTY)
            self.headings[write.heading] = msgspec.structs.replace(
                entry, **{write.slot: write.value}
            )

    def __getitem__(self, heading: str) -> Heading:
        return self.headings.get(heading, EMPTY)

    def __contains__(self, heading: object) -> bool:
        return heading in self.headings

    def children(self, heading: str) -> tuple[str, ...]:
        return tuple(child_key(heading, title) for title in self[heading].subheadings)

    def parent(self, heading: str) -> str | None:
        for candidate, _entry in self.headings.items():
            if heading in self.children(candidate) and candidate != heading:
                return candidate
        return None

    def depth(self, heading: str) -> int:
        """0 for a top-level heading, 1 for its subheadings, ..."""
        depth, seen, node = 0, {heading}, self.parent(heading)
        while node is not None and node not in seen:
            depth, node = depth + 1, self.parent(node)
            seen.add(node or "")
        return depth

    def subtree(self, heading: str) -> list[str]:
        """``heading`` and all its subheadings, at any depth, parents first."""
        seen: set[str] = set()

        def visit(node: str) -> Iterator[str]:
            if node not in seen:
                seen.add(node)
                yield node
                for child in self.children(node):
                    yield from visit(child)

        return list(visit(heading))

    def top_level(self) -> list[str]:
        nested = {c for h in self.headings for c in self.children(h)}
        return [h for h in self.headings if h not in nested]

    def walk(self) -> Iterator[tuple[str, int]]:
        """Every heading with its depth, parents before their subheadings, in outline order."""
        seen: set[str] = set()

        def visit(heading: str, depth: int) -> Iterator[tuple[str, int]]:
            if heading in seen:
                return
            seen.add(heading)
            yield heading, depth
            for child in self.children(heading):
                yield from visit(child, depth + 1)

        for heading in self.top_level():
            yield from visit(heading, 0)


class Board:
    """The shared write log of one run (see the module docstring for why a log).

    ``writers`` are the names whose messages are recorded by the writer itself
    (:meth:`record_own`) when its turn ends; every other board write (a user's edit) is
    recorded by whichever member receives it first (:meth:`absorb`).
    """

    def __init__(self, *, title: str, brief: str = "") -> None:
        self.title = title
        self.brief = brief
        self.writers: set[str] = set()
        self.rejected: list[tuple[str, str]] = []  # (message id, why) of unreadable edits
        self._writes: list[Write] = []
        self._absorbed: set[str] = set()

    def seed(self, messages: Sequence[Message]) -> None:
        """Records the board's first writes (published in round 0 by the SOP)."""
        self._record(messages, round=0, rank=0)

    def record_own(self, messages: Sequence[Message], *, round: int, rank: int) -> None:
        """Records what a writer returns from its turn in ``round`` (``rank``: its place in
        the team, so same-round writes keep publish order)."""
        self._record(messages, round=round, rank=rank)

    def absorb(self, news: Iterable[Message]) -> list[Message]:
        """Records the board writes in ``news`` that no writer recorded (users' edits),
        once each; returns the messages that could not be read (recorded in ``rejected``)."""
        bad = []
        for message in news:
            if message.sent_from in self.writers or slot_of(message.cause_by) is None:
                continue
            if message.id and message.id in self._absorbed:
                continue
            self._absorbed.add(message.id)
            try:
                heading, slot, value = read_write(message)
            except BoardError as exc:
                self.rejected.append((message.id, str(exc)))
                bad.append(message)
                continue
            self._writes.append(
                Write(
                    round=message.round,
                    rank=0,
                    seq=_id_number(message.id),
                    heading=heading,
                    slot=slot,
                    value=value,
                    message_id=message.id,
                )
            )
        return bad

    def view(self, before_round: int | None = None, news: Iterable[Message] = ()) -> BoardView:
        """The board as of the start of ``before_round`` plus the writes in ``news`` (a
        member's view during its turn); ``None``: everything recorded so far."""
        if before_round is None:
            return BoardView(self._writes)
        ids = {m.id for m in news if m.id}
        return BoardView(
            w
            for w in self._writes
            if w.round < before_round or (w.message_id and w.message_id in ids)
        )

    def __len__(self) -> int:
        return len(self._writes)

    def _record(self, messages: Sequence[Message], *, round: int, rank: int) -> None:
        for seq, message in enumerate(messages):
            if slot_of(message.cause_by) is None:
                continue
            heading, slot, value = read_write(message)
            self._writes.append(
                Write(round=round, rank=rank, seq=seq, heading=heading, slot=slot, value=value)
            )


def _id_number(message_id: str) -> int:
    digits = message_id.lstrip("m")
    return int(digits) if digits.isdigit() else 0


# -- the slots as actions: what workers watch and publish ---------------------------------


class BoardSlot(Action, register=False):
    """A write to one board slot. Workers publish these (the bus routes them by slot);
    taken as a plain action, it writes the model's text into the slot of the heading the
    news names, so a scenario-declared role can write the board too."""

    slot: str = ""

    async def run(self, ctx: ActionContext) -> ActionResult:
        headings = [read_write(m)[0] for m in ctx.news if slot_of(m.cause_by) is not None]
        if not headings:
            return ActionResult(publish=False)
        text = await self.ask(ctx, self.prompt(ctx), output=None)
        message = write_message(headings[-1], self.slot, text, sender=ctx.role.name)
        return ActionResult(content=message.content, payload=message.payload)


def _slot_class(slot: str) -> type[BoardSlot]:
    doc = f"A write to the board's {slot.replace('_', ' ')} slot of a heading."
    cls = type(
        f"Board_{slot}",
        (BoardSlot,),
        {
            "name": slot_action(slot),
            "slot": slot,
            "__doc__": doc,
            "instruction": f"Write the {slot.replace('_', ' ')} of the heading named in the messages above.",
        },
    )
    return cls


SLOT_ACTIONS: dict[str, type[BoardSlot]] = {slot: _slot_class(slot) for slot in SLOTS}
"""One registered action per slot, named ``Board.<slot>``."""
