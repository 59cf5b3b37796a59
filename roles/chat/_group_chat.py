"""Group chat on the bus: participants who speak when given the floor, and a manager who
chooses the next speaker.

Every participant watches ``Speak`` (so each one's memory holds the whole conversation) but
talks only when a ``NextSpeaker`` message names it. The ``ChatManager`` watches ``Speak``
too and, after each message, publishes ``NextSpeaker`` addressed to the one it chose:

- ``round_robin``: the next in declared order; no model.
- ``model``: the model reads the participants' descriptions and the conversation and names
  the next speaker. The reply must name exactly one participant (and not the last speaker
  when repeats are off); otherwise it is sent back with the problem, at most
  ``max_attempts`` asks in all, then the declared ``fallback`` speaks (and a
  ``speaker_fallback`` event says why): never a silent livelock. Each ask is a call in
  the name of ``SelectSpeaker``, so it is priced and in the ledger under that name.
- ``handoff``: the speaker names the next one in the ``handoff`` field of its structured
  reply; no name keeps the floor with the speaker (unless repeats are off). A name of
  nobody in the group, or keeping the floor with repeats off, gives it to the ``fallback``
  speaker, and a ``speaker_fallback`` event says why.

A message therefore takes two rounds (the speech, then the choice); ``[run].max_rounds``
and the SOP's termination conditions bound the chat.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

import msgspec
from pydantic import BaseModel, Field

from sopbus.bus import ChatMessage, Message, Turn

from .._action import Action, ActionContext, ActionResult
from .._llm import build_request
from .._prompt import render_message
from .._role import Role

Strategy = Literal["round_robin", "model", "handoff"]
SPEAK, NEXT, TASK = "Speak", "NextSpeaker", "UserRequirement"
RESULT_FILE, CHAT_FILE = "result.md", "chat.md"
"""The chat's final message and its whole transcript, under the run's ``artifacts/``."""
SELECT = "SelectSpeaker"  # the ledger's name for the model selector's calls
ROUND_ROBIN: Final = "round_robin"


@dataclass(frozen=True)
class Participant:
    name: str
    description: str


class HandoffReply(BaseModel):
    """A participant's message when speakers hand over (``handoff`` strategy)."""

    message: str = Field(description="your message to the group")
    handoff: str | None = Field(
        default=None,
        description=("the name of the participant who should speak next; null to keep the floor"),
    )


def transcript(memory: Iterable[Message], limit: int) -> list[Message]:
    """The task and the chat messages, the newest ``limit`` of them."""
    said = [m for m in memory if m.cause_by in (TASK, SPEAK)]
    return said[-limit:]


def roster(participants: Sequence[Participant]) -> str:
    return "\n".join(f"- {p.name}: {p.description}" for p in participants)


# -- speaking ------------------------------------------------------------------------------


class Speak(Action):
    """A participant's next message; with ``handoff=True`` a :class:`HandoffReply`."""

    def __init__(self, *, handoff: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.handoff = handoff
        self.Output = HandoffReply if handoff else None

    def prompt(self, ctx: ActionContext) -> tuple[ChatMessage, ...]:
        role = ctx.role
        assert isinstance(role, ChatParticipant)
        others = [p for p in role.group if p.name != role.name]
        system = f"{role.system_text()}\nYou take part in a group chat with:\n{roster(others)}"
        if self.handoff:
            system += (
                "\nWhen someone else should continue, put their name in `handoff`; "
                "leave it null to keep the floor."
            )
        said = "\n\n".join(render_message(m) for m in transcript(role.memory, role.history))
        ask = f"## Conversation\n{said}\n\n## Your turn\nYou are {role.name}. Write your next message."
        return (ChatMessage("system", system), ChatMessage("user", ask))

    def result(self, output: BaseModel | str) -> ActionResult:
        if isinstance(output, HandoffReply):
            return ActionResult(content=output.message, payload=output.model_dump(mode="json"))
        return super().result(output)


class ChatParticipant(Role):
    """Speaks when a ``NextSpeaker`` message gives it the floor; otherwise only listens."""

    # NextSpeaker is always addressed to one participant, so watching it routes nothing
    # extra; it makes the watch graph (sopbus validate) show who gives the floor.
    watch = (TASK, SPEAK, NEXT)
    actions = (Speak,)

    def __init__(
        self, *, group: Sequence[Participant] = (), history: int = 20, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.group, self.history = tuple(group), history

    def fields(self) -> dict[str, Any]:
        return {**super().fields(), "group": self.group, "history": self.history}

    async def step(self, news: Sequence[Message], turn: Turn) -> Sequence[Message]:
        fresh = tuple(news)
        self.memory.extend(fresh)
        if not any(m.cause_by == NEXT for m in fresh):
            return ()
        said = await self._run_in_order(self._actions, fresh, turn)
        if said:
            # The chat's result is its last message (AutoGen's too): each speaker rewrites
            # result.md and chat.md, so at the end they hold the final word and the whole chat.
            turn.write_artifact(RESULT_FILE, said[-1].content.rstrip() + "\n")
            spoken = [m for m in self.memory if m.cause_by in (TASK, SPEAK)]
            turn.write_artifact(CHAT_FILE, "\n\n".join(render_message(m) for m in spoken) + "\n")
        return said


# -- choosing the next speaker ------------------------------------------------------------


class Choice(msgspec.Struct, frozen=True):
    speaker: str
    attempts: int = 0
    fallback: bool = False
    why: str = ""


def named(text: str, names: Sequence[str]) -> list[str]:
    """The participants ``text`` names (whole words, any case), in declared order."""
    return [n for n in names if re.search(rf"(?<!\w){re.escape(n)}(?!\w)", text, re.IGNORECASE)]


def selection_problem(
    found: list[str], candidates: Sequence[str], last: str | None, allow_repeat: bool
) -> str | None:
    """Why a selector reply cannot be used, or None (exactly one name, not a banned repeat)."""
    if not found:
        return "named none of the participants"
    if len(found) > 1:
        return f"named several participants ({', '.join(found)})"
    if not allow_repeat and found[0] == last:
        return f"chose {last}, who has just spoken; nobody speaks twice in a row"
    return None


class NextSpeaker(Action):
    """The manager's action: its messages give the floor. With the ``model`` strategy it
    asks the model (see the module docstring); those calls are made, priced and ledgered
    as ``SelectSpeaker``. Its ``run`` is not used: the manager calls :meth:`choose`."""

    call_name = SELECT

    def __init__(self, *, max_attempts: int = 3, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if max_attempts < 1:
            raise ValueError(f"max_attempts must be 1 or more, got {max_attempts}")
        self.max_attempts = max_attempts

    async def choose(self, ctx: ActionContext, manager: ChatManager) -> Choice:
        last = manager.last_speaker
        names = [p.name for p in manager.group]
        candidates = [n for n in names if manager.allow_repeat or n != last]
        messages = self.selection_prompt(manager, candidates)
        request = build_request(
            messages, output=None, llm=ctx.llm, action=self.call_name, role=manager.name
        )
        problem = ""
        for attempt in range(1, self.max_attempts + 1):
            reply = (await ctx.turn.ask(request, attempt=attempt)).text
            problem = (
                selection_problem(named(reply, names), candidates, last, manager.allow_repeat) or ""
            )
            if not problem:
                return Choice(named(reply, names)[0], attempts=attempt)
            ctx.turn.emit("speaker_rejected", attempt=attempt, reply=reply, problem=problem)
            retry = (
                ChatMessage("assistant", reply),
                ChatMessage(
                    "user",
                    (
                        f"Your answer {problem}. Answer with exactly one name from: "
                        f"{', '.join(candidates)}."
                    ),
                ),
            )
            request = msgspec.structs.replace(request, messages=messages + retry)
        return Choice(
            manager.fallback_speaker(), attempts=self.max_attempts, fallback=True, why=problem
        )

    def selection_prompt(
        self, manager: ChatManager, candidates: Sequence[str]
    ) -> tuple[ChatMessage, ...]:
        said = "\n\n".join(render_message(m) for m in transcript(manager.memory, manager.history))
        rule = (
            f" {manager.last_speaker} has just spoken and may not speak twice in a row."
            if manager.last_speaker and not manager.allow_repeat
            else ""
        )
        system = (
            f"You choose who speaks next in a group chat. The participants:\n"
            f"{roster(manager.group)}"
        )
        ask = (
            f"## Conversation\n{said}\n\n## Your task\nRead the conversation and choose who "
            f"speaks next.{rule} Answer with only the name, one of: {', '.join(candidates)}."
        )
        return (ChatMessage("system", system), ChatMessage("user", ask))


class ChatManager(Role):
    """Chooses the next speaker after each message and gives it the floor."""

    name = "ChatManager"
    profile = "Group chat manager"
    watch = (TASK, SPEAK)
    actions = (NextSpeaker,)

    def __init__(
        self,
        *,
        group: Sequence[Participant] = (),
        strategy: Strategy = ROUND_ROBIN,
        allow_repeat: bool = True,
        fallback: str = ROUND_ROBIN,
        first_speaker: str | None = None,
        history: int = 20,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.group, self.strategy, self.allow_repeat = tuple(group), strategy, allow_repeat
        self.fallback, self.first_speaker, self.history = fallback, first_speaker, history
        self.last_speaker: str | None = None

    def fields(self) -> dict[str, Any]:
        return {
            **super().fields(),
            "group": self.group,
            "strategy": self.strategy,
            "allow_repeat": self.allow_repeat,
            "fallback": self.fallback,
            "first_speaker": self.first_speaker,
            "history": self.history,
        }

    async def step(self, news: Sequence[Message], turn: Turn) -> Sequence[Message]:
        fresh = tuple(news)
        self.memory.extend(fresh)
        spoken = [m for m in fresh if m.cause_by == SPEAK]
        if spoken:
            self.last_speaker = spoken[-1].sent_from
        elif not any(m.cause_by == TASK for m in fresh):
            return ()
        choice = await self._choose(spoken[-1] if spoken else None, fresh, turn)
        if choice.fallback:
            turn.emit(
                "speaker_fallback",
                speaker=choice.speaker,
                attempts=choice.attempts,
                problem=choice.why,
            )
        message = Message(
            cause_by=NEXT,
            sent_from=self.name,
            send_to=(choice.speaker,),
            content=f"{choice.speaker}, it is your turn.",
            payload={
                "speaker": choice.speaker,
                "strategy": self.strategy,
                **msgspec.structs.asdict(choice),
            },
            parents=tuple(m.id for m in fresh if m.id),
        )
        self.memory.add(message)
        return [message]

    async def _choose(
        self, spoken: Message | None, news: tuple[Message, ...], turn: Turn
    ) -> Choice:
        if spoken is None and (self.strategy != "model" or self.first_speaker):
            return Choice(self.first_speaker or self.group[0].name)
        if self.strategy == "round_robin":
            return Choice(self.after(self.last_speaker))
        if self.strategy == "handoff":
            return self.handed_to(spoken)
        action = self.actions[0]
        assert isinstance(action, NextSpeaker)
        return await action.choose(self.context(action, news, turn), self)

    def after(self, name: str | None) -> str:
        names = [p.name for p in self.group]
        return names[(names.index(name) + 1) % len(names)] if name in names else names[0]

    def handed_to(self, spoken: Message | None) -> Choice:
        """The participant the speaker's ``handoff`` field names (any case); no name keeps
        the floor. A name of nobody in the group, or keeping the floor where
        ``allow_repeat = false``, goes to the ``fallback`` speaker, with the reason (a
        ``speaker_fallback`` event), never silently."""
        assert spoken is not None
        wanted = spoken.payload.get("handoff") if isinstance(spoken.payload, dict) else None
        wanted = wanted.strip() if isinstance(wanted, str) else ""
        names = [p.name for p in self.group]
        chosen = next((n for n in names if n.lower() == wanted.lower()), None) if wanted else None
        if wanted and chosen is None:
            why = f"{spoken.sent_from} handed off to {wanted!r}, who is not in the group ({', '.join(names)})"
            return Choice(self.fallback_speaker(), fallback=True, why=why)
        chosen = chosen or spoken.sent_from
        if chosen == spoken.sent_from and not self.allow_repeat:
            why = f"{spoken.sent_from} kept the floor, and allow_repeat = false"
            return Choice(self.fallback_speaker(), fallback=True, why=why)
        return Choice(chosen)

    def fallback_speaker(self) -> str:
        return self.after(self.last_speaker) if self.fallback == ROUND_ROBIN else self.fallback
