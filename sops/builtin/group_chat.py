"""Group chat with a chosen next speaker (AutoGen's GroupChat, on the bus).

``[sop]`` options::

    strategy = "model"        # "round_robin" | "model" | "handoff"
    allow_repeat = false      # may the last speaker be chosen again? (model strategy)
    max_attempts = 3          # selector asks per choice before the fallback (model strategy)
    fallback = "round_robin"  # who speaks when the selector fails: "round_robin" or a name
    first_speaker = "Planner" # default: the first participant (the model picks, for "model")
    history = 20              # conversation messages each prompt shows

    [[sop.participants]]      # at least two, in speaking order
    name = "Planner"
    description = "Breaks the task into steps"   # what the selector reads

    [sop.termination]         # optional; combined with `mode`
    mode = "any"              # "any": the first that fires; "all": once each has fired
    max_messages = 8          # chat messages (Speak)
    text = "TERMINATE"        # a chat message containing this text
    max_tokens = 20000        # prompt + completion tokens of the whole run
    max_usd = 0.05            # spend of the whole run (a soft stop under [run].budget_usd)
    timeout_s = 300           # wall-clock seconds from the start of the run

The participants are ``ChatParticipant`` roles named as declared (override a model with
``[[roles]] name = "Planner" llm = {...}``); ``ChatManager`` chooses the speakers.
``max_tokens`` and ``max_usd`` read the gateway's totals: the run binds them with
``team.stop.bind_stats(gateway.stats)`` (see :mod:`sopbus.sops._termination`).

The verdict (when ``[sop.termination].text`` names a done token): a participant said it, so
the chat ended by agreement, not by a message, token, spend or time limit. Without a done
token the SOP states no verdict.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Literal

import msgspec

from sopbus.bus import ConfigError, RunRecord, Verdict
from sopbus.bus.scenario import ROLE_NAME_FIX, role_name_problem
from sopbus.roles.chat import (
    ROUND_ROBIN,
    SPEAK,
    ChatManager,
    ChatParticipant,
    NextSpeaker,
    Participant,
    Speak,
)

from .. import _sop
from .._judges import said_token
from .._sop import SopContext, Team
from .._termination import (
    AllOf,
    AnyOf,
    Condition,
    MaxMessages,
    SpendLimit,
    TextMention,
    Timeout,
    TokenLimit,
)


class ParticipantSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    name: str
    description: str = ""


class TerminationSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    mode: Literal["any", "all"] = "any"
    max_messages: int | None = None
    text: str | None = None
    max_tokens: int | None = None
    max_usd: Decimal | None = None
    timeout_s: float | None = None


class GroupChatOptions(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    participants: list[ParticipantSpec]
    strategy: Literal["round_robin", "model", "handoff"] = "round_robin"
    allow_repeat: bool = True
    max_attempts: int = 3
    fallback: str = ROUND_ROBIN
    first_speaker: str | None = None
    history: int = 20
    termination: TerminationSpec | None = None


def termination(spec: TerminationSpec, where: str = "$.sop.termination") -> AnyOf | AllOf:
    """The stop condition a ``[sop.termination]`` table describes."""
    parts: list[Condition] = []
    try:
        if spec.max_messages is not None:
            parts.append(MaxMessages(spec.max_messages, actions=(SPEAK,)))
        if spec.text is not None:
            parts.append(TextMention(spec.text, actions=(SPEAK,)))
        if spec.max_tokens is not None:
            parts.append(TokenLimit(spec.max_tokens))
        if spec.max_usd is not None:
            parts.append(SpendLimit(spec.max_usd))
        if spec.timeout_s is not None:
            parts.append(Timeout(spec.timeout_s))
    except ValueError as exc:
        raise ConfigError(f"{exc} - at `{where}`") from None
    if not parts:
        raise ConfigError(
            f"`{where}` names no condition: give at least one of max_messages, "
            f"text, max_tokens, max_usd, timeout_s"
        )
    return AnyOf(parts) if spec.mode == "any" else AllOf(parts)


def build(ctx: SopContext) -> Team:
    o = ctx.options_as(GroupChatOptions)
    _check(o, f"{ctx.scenario.path}: ")
    group = [Participant(p.name, p.description) for p in o.participants]
    manager = ChatManager(
        group=group,
        strategy=o.strategy,
        allow_repeat=o.allow_repeat,
        fallback=o.fallback,
        first_speaker=o.first_speaker,
        history=o.history,
        actions=[NextSpeaker(max_attempts=o.max_attempts)],
        llm_defaults=ctx.llm_defaults,
    )
    speakers = [
        ChatParticipant(
            name=p.name,
            profile=p.description,
            group=group,
            history=o.history,
            actions=[Speak(handoff=o.strategy == "handoff")],
            llm_defaults=ctx.llm_defaults,
        )
        for p in group
    ]
    stop = None
    if o.termination is not None:
        try:
            stop = termination(o.termination)
        except ConfigError as exc:
            raise ConfigError(f"{ctx.scenario.path}: {exc}") from None
    done = o.termination.text if o.termination is not None else None
    return Team(roles=[manager, *speakers], stop=stop, verdict=said_done(done) if done else None)


def said_done(text: str) -> Callable[[RunRecord], Verdict]:
    """The group chat's verdict: some participant said the done token ``text``."""
    return said_token(text, in_action=SPEAK, counting=SPEAK, noun="chat message(s)")


def _check(o: GroupChatOptions, file: str) -> None:
    names = [p.name for p in o.participants]
    if len(names) < 2:
        raise ConfigError(
            f"{file}a group chat needs at least two [[sop.participants]], got "
            f"{len(names)} - at `$.sop.participants`"
        )
    lowered = [n.strip().lower() for n in names]
    for i, name in enumerate(names):
        if not name.strip() or lowered.index(lowered[i]) != i or name == ChatManager.name:
            raise ConfigError(
                f"{file}participant name {name!r} is empty, repeated (names are "
                f"matched in any case) or {ChatManager.name!r} - at "
                f"`$.sop.participants[{i}].name`"
            )
    for i, name in enumerate(names):
        if problem := role_name_problem(name):
            raise ConfigError(
                f"{file}{problem} - at `$.sop.participants[{i}].name`: {ROLE_NAME_FIX}"
            )
    if o.fallback != ROUND_ROBIN and o.fallback not in names:
        raise ConfigError(
            f'{file}fallback {o.fallback!r} is neither "round_robin" nor a '
            f"participant ({', '.join(names)}) - at `$.sop.fallback`"
        )
    if o.first_speaker is not None and o.first_speaker not in names:
        raise ConfigError(
            f"{file}first_speaker {o.first_speaker!r} is not a participant "
            f"({', '.join(names)}) - at `$.sop.first_speaker`"
        )
    for key in ("max_attempts", "history"):
        if getattr(o, key) < 1:
            raise ConfigError(f"{file}`$.sop.{key}` must be 1 or more, got {getattr(o, key)}")


SOP = _sop.SOP(
    name="group_chat",
    description="Group chat: a manager gives the floor by round robin, by a model's "
    "choice (with retries and a fallback) or by the speaker's handoff",
    build=build,
)
