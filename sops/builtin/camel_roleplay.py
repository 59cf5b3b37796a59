"""CAMEL role-play: a task specifier, then an AI user instructing an AI assistant.

``[sop]`` options (all optional)::

    user_role = "Flower Shop Owner"       # the persona of the AI user (the planner)
    assistant_role = "Marketing Specialist"  # the persona of the AI assistant (the executor)
    word_limit = 50          # the specified task's length, in words
    specify_task = true      # false: the human's task is used as given, no specifier call
    turn_limit = 30          # exchanges (instruction + solution); the engine stops the run
    max_role_repairs = 2     # role-guard repairs per message before the run fails
    history = 40             # transcript messages each agent's prompt shows

The three roles are ``TaskSpecifier`` (temperature 1.0), ``AIUser`` and ``AIAssistant``
(temperature 0.2); a ``[[roles]]`` entry of the same name overrides their model settings
(``llm = { model = "...", temperature = 0.7 }``).

The run ends, from soft to hard: the role guard fails it (end reason ``error``, the reason
in the detail) when an agent stays out of its part after ``max_role_repairs``; the AI user's
``<CAMEL_TASK_DONE>`` ends it (``stop_condition``); the engine ends it after ``turn_limit``
exchanges (``stop_condition``) whatever the models say. Keep ``[run].max_rounds`` above
``2 * turn_limit + 1`` (one round per message), or the round limit ends it first.

The verdict: the AI user said ``<CAMEL_TASK_DONE>`` (a run ended by a limit has failed).
The final exchange is kept as ``artifacts/solution.md``.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from sopbus.bus import ConfigError, Message
from sopbus.roles.chat import (
    INSTRUCT,
    SOLVE,
    TASK_DONE,
    AIAssistant,
    AIUser,
    GiveInstruction,
    GiveSolution,
    SpecifyTask,
    TaskSpecifier,
    says_done,
)

from .. import _sop
from .._judges import said_token
from .._sop import SopContext, Team


class CamelOptions(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    user_role: str = "User"
    assistant_role: str = "Assistant"
    word_limit: int = 50
    specify_task: bool = True
    turn_limit: int = 30
    max_role_repairs: int = 2
    history: int = 40


class CamelStop:
    """The engine's side of the role-play: stops at the termination token in an AI user's
    message, or once ``turn_limit`` exchanges (solutions) have been published."""

    def __init__(self, turn_limit: int) -> None:
        self.turn_limit = turn_limit
        self.turns = 0

    def __call__(self, published: Sequence[Message], round: int) -> str | None:
        for message in published:
            if message.cause_by == INSTRUCT and says_done(message.content):
                return f"the AI user said {TASK_DONE} after {self.turns} exchange(s): task done"
            if message.cause_by == SOLVE:
                self.turns += 1
                if self.turns >= self.turn_limit:
                    return (
                        f"turn limit reached: {self.turns} exchanges "
                        f"([sop].turn_limit = {self.turn_limit})"
                    )
        return None


def build(ctx: SopContext) -> Team:
    o = ctx.options_as(CamelOptions)
    _check(o, ctx)
    personas = {"user_role": o.user_role, "assistant_role": o.assistant_role}
    specifier = TaskSpecifier(
        actions=[SpecifyTask(word_limit=o.word_limit, specify=o.specify_task)],
        llm_defaults=ctx.llm_defaults,
        **personas,
    )
    user = AIUser(
        profile=o.user_role,
        actions=[GiveInstruction(max_repairs=o.max_role_repairs)],
        history=o.history,
        llm_defaults=ctx.llm_defaults,
        **personas,
    )
    assistant = AIAssistant(
        profile=o.assistant_role,
        actions=[GiveSolution(max_repairs=o.max_role_repairs)],
        history=o.history,
        llm_defaults=ctx.llm_defaults,
        **personas,
    )
    return Team(
        roles=[specifier, user, assistant],
        stop=CamelStop(o.turn_limit),
        verdict=task_done,
        bounds={user.name: f"the run stops after turn_limit = {o.turn_limit} exchanges"},
    )


task_done = said_token(
    TASK_DONE, in_action=INSTRUCT, counting=SOLVE, noun="solution(s)", at_least=1, says=says_done
)
"""CAMEL's verdict: the AI user said the done token (alone on a line) after at least one
solution; a user that says it at once, or copies the reply form, has not finished a task."""
"""CAMEL's verdict: the AI user ended the role-play with the done token."""


def _check(o: CamelOptions, ctx: SopContext) -> None:
    where = f"{ctx.scenario.path}: "
    for key in ("word_limit", "turn_limit", "history"):
        if getattr(o, key) < 1:
            raise ConfigError(f"{where}$.sop.{key} must be 1 or more, got {getattr(o, key)}")
    if o.max_role_repairs < 0:
        raise ConfigError(
            f"{where}$.sop.max_role_repairs must be 0 or more, got {o.max_role_repairs}"
        )
    if o.user_role.strip().lower() == o.assistant_role.strip().lower():
        raise ConfigError(
            f"{where}$.sop.user_role and $.sop.assistant_role are both "
            f"{o.user_role!r}; a role-play needs two different personas"
        )


SOP = _sop.SOP(
    name="camel_roleplay",
    description="CAMEL role-play: a task specifier, an AI user who instructs one step at "
    "a time and an AI assistant who solves, kept in their parts by a role guard",
    build=build,
)
