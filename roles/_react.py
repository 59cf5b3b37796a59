"""The model's part in the ``react`` and ``plan_and_act`` modes: picking the next action,
or making a plan, as small structured calls whose schema only admits the role's actions.

A pick or a plan that names an unknown action does not fit the schema, so it goes through
the same repair loop as any action's output and fails with :class:`sopbus.bus.ModelOutputError`
if the model keeps getting it wrong.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast

from pydantic import BaseModel, ConfigDict, Field, create_model

from sopbus.bus import ChatMessage, Message, Turn

from ._action import Action
from ._llm import ask_model
from ._prompt import task_text

if TYPE_CHECKING:
    from ._view import RoleView

THINK = "_think"
"""The action name a ``react`` pick is asked (and ledgered) under."""
PLAN = "_plan"
"""The action name a ``plan_and_act`` plan is asked (and ledgered) under."""
DONE = "done"
"""The pick that ends a ``react`` step before ``max_react_steps``."""
REPAIRS = 2
HISTORY = 10

T = TypeVar("T", bound=BaseModel)


class NextAction(BaseModel):
    """The answer of a ``react`` pick: one of the role's action names, or ``"done"``."""

    model_config = ConfigDict(extra="forbid")
    next: str


class Plan(BaseModel):
    """The answer of a ``plan_and_act`` plan: action names, in the order to run them."""

    model_config = ConfigDict(extra="forbid")
    steps: list[str]


async def choose_next(
    role: RoleView,
    news: tuple[Message, ...],
    earlier: tuple[Message, ...],
    taken: Sequence[str],
    turn: Turn,
) -> Action | None:
    """The action the model picks next, or ``None`` when it answers ``"done"``."""
    names = tuple(a.name for a in role.actions)
    if not names:
        return None
    so_far = ", ".join(taken) or "none yet"
    instruction = (
        f"Choose the next action to take on the messages above.\n{_menu(role)}\n"
        f"Actions already taken in this turn: {so_far}.\n"
        f'Answer "{DONE}" when nothing is left to do.'
    )
    picked = (await _ask(role, news, earlier, turn, instruction, THINK, _choice_model(names))).next
    turn.emit("react_choice", action=picked, taken=list(taken))
    return None if picked == DONE else role.action_named(picked)


async def make_plan(role: RoleView, news: tuple[Message, ...], turn: Turn) -> tuple[Action, ...]:
    """The actions the model plans to take on ``news``, in order (at most ``max_react_steps``)."""
    names = tuple(a.name for a in role.actions)
    if not names:
        return ()
    instruction = (
        f"Plan your work on the messages above: the actions to take now, in "
        f"order, at most {role.max_react_steps}. An action may appear more than "
        f"once.\n{_menu(role)}"
    )
    plan = await _ask(
        role, news, (), turn, instruction, PLAN, _plan_model(names, role.max_react_steps)
    )
    turn.emit("plan_made", steps=list(plan.steps))
    return tuple(role.action_named(step) for step in plan.steps)


async def _ask(
    role: RoleView,
    news: tuple[Message, ...],
    earlier: tuple[Message, ...],
    turn: Turn,
    instruction: str,
    label: str,
    output: type[T],
) -> T:
    context = role.recall(news, earlier, limit=HISTORY)
    messages = (
        ChatMessage("system", role.system_text()),
        ChatMessage("user", task_text(action=label, instruction=instruction, context=context)),
    )
    return await ask_model(
        turn,
        messages,
        output=output,
        llm=role.context(None, news, turn).llm,
        action=label,
        role=role.name,
        max_repairs=REPAIRS,
    )


def _menu(role: RoleView) -> str:
    lines = [f"- {a.name}" + (f": {d}" if (d := describe(a)) else "") for a in role.actions]
    return "Your actions:\n" + "\n".join(lines)


def describe(action: Action) -> str:
    """One line about an action: its instruction's first line, else its docstring's."""
    for text in (action.instruction, type(action).__doc__ or ""):
        for line in text.strip().splitlines():
            if line.strip():
                return line.strip()
    return ""


def _one_of(names: tuple[str, ...]) -> Any:
    # A Literal built at run time: the JSON schema becomes an enum of exactly these names.
    return cast(Any, Literal)[names]


@functools.lru_cache(maxsize=256)
def _choice_model(names: tuple[str, ...]) -> type[NextAction]:
    return create_model(
        "NextAction",
        __base__=NextAction,
        next=(_one_of((*names, DONE)), Field(description="the next action, or done")),
    )


@functools.lru_cache(maxsize=256)
def _plan_model(names: tuple[str, ...], max_steps: int) -> type[Plan]:
    steps = Field(max_length=max_steps, description="action names, in the order to run them")
    step_list: Any = cast(Any, list)[_one_of(names)]
    return create_model("Plan", __base__=Plan, steps=(step_list, steps))
