"""CAMEL role-play: a task specifier, an AI user who instructs and an AI assistant who solves.

The human gives a one-line task. ``TaskSpecifier`` makes it specific (hot temperature, a
word limit). ``AIUser`` then gives one instruction at a time (``Instruction: ... Input: ...``)
and ``AIAssistant`` answers each (``Solution: ...`` ending with ``Next request.``). Each of
the two is held in its part by an inception prompt *and* by a role guard: a reply in which
the user answers or the assistant instructs is sent back with the reason, at most
``max_repairs`` times, after which the run fails with :class:`RoleFlipError` rather than
go on with swapped parts (CAMEL's best-known failure). The termination token and the turn
limit are the SOP's stop condition (``sopbus.sops.builtin.camel_roleplay``), so the engine enforces them.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from sopbus.bus import ChatMessage, Message, ModelOutputError, Turn

from .._action import Action, ActionContext, ActionResult
from .._llm import LLMSettings, build_request
from .._role import Role

TASK_DONE = "<CAMEL_TASK_DONE>"
SOLUTION_FILE = "solution.md"
"""The role-play's result under the run's ``artifacts/``: every instruction and solution."""
"""What the AI user says, alone, when it judges the task complete."""

SPECIFY, INSTRUCT, SOLVE = "SpecifyTask", "GiveInstruction", "GiveSolution"

_USER_INCEPTION = """\
You are {user_role}. You work with me, {assistant_role}, on this task:
{task}

You are the one who gives instructions and I am the one who carries them out. Keep these \
parts for the whole conversation: never carry out an instruction yourself, never write a \
solution, never let me instruct you.
Give me exactly one instruction per message, in this form:
Instruction: <what I should do next>
Input: <details I need for it, or None>
Nothing else goes in your message. When you judge the task complete, reply with only \
{done}."""

_ASSISTANT_INCEPTION = """\
You are {assistant_role}. You work for me, {user_role}, on this task:
{task}

I give the instructions and you carry them out with your expertise. Keep these parts for \
the whole conversation: never give me instructions, never ask me to do things, never \
switch parts with me. If you cannot carry out an instruction, say so and why.
Answer every instruction in this form:
Solution: <your concrete solution, with specifics, examples or lists where they help>
Next request.
Always begin with "Solution:" and always end with "Next request."."""

_SPECIFY = """\
Here is a task that {assistant_role} will help {user_role} to complete: {task}
Make it more specific: be creative and concrete (who, what, when, how much). Reply with \
the specified task in {word_limit} words or less, and nothing else."""

_KICKOFF = "Start now: give me the first instruction."

_LINE_START = r"(?im)^\s*[*_#>`\s]*"  # Markdown emphasis or quoting before a label


class RoleFlipError(ModelOutputError):
    """A CAMEL agent kept replying out of its part (the user solving, the assistant
    instructing) after every repair the SOP allows. The run fails with this reason."""


# -- the role guard ------------------------------------------------------------------------


def _has_label(text: str, label: str) -> bool:
    return re.search(_LINE_START + re.escape(label) + r"\s*:", text) is not None


def says_done(text: str) -> bool:
    """Whether the AI user's message ends the task: the token on a line of its own, as CAMEL
    asks for it. The token inside a line (a weak model copying the reply form's "(or only
    <CAMEL_TASK_DONE>)" after an instruction) does not end it."""
    return any(line.strip().strip("*_`").strip() == TASK_DONE for line in text.splitlines())


def check_user_turn(text: str) -> str | None:
    """Why the AI user's message is out of its part, or None when it is an instruction
    (or the termination token)."""
    if says_done(text):
        return None
    if _has_label(text, "Solution"):
        return "answered instead of instructing (its message contains 'Solution:')"
    if not re.match(_LINE_START + r"Instruction\s*:", text):
        return "did not give an instruction (its message does not start with 'Instruction:')"
    return None


def check_assistant_turn(text: str) -> str | None:
    """Why the AI assistant's message is out of its part, or None when it is a solution."""
    if _has_label(text, "Instruction"):
        return "instructed instead of solving (its message contains 'Instruction:')"
    if not re.match(_LINE_START + r"Solution\s*:", text):
        return "did not give a solution (its message does not start with 'Solution:')"
    if not text.rstrip().rstrip("*_`").rstrip().endswith("Next request."):
        return "did not end its solution with 'Next request.'"
    return None


def _feedback(problem: str, form: str) -> str:
    return (
        f"Your last message {problem}. Stay in your part. Reply again, in this form only:\n{form}"
    )


_USER_FORM = (
    "Instruction: <one instruction>\nInput: <details, or None>\n"
    f"(when the task is done, reply with {TASK_DONE} alone instead)"
)
_ASSISTANT_FORM = "Solution: <your solution>\nNext request."


# -- actions -------------------------------------------------------------------------------


class SpecifyTask(Action):
    """Turns the human's one-line task into a specific one within ``word_limit`` words.

    A longer answer is sent back once with its word count; if it is still long it is cut
    at the limit (and a ``task_trimmed`` event says so): a verbose task is not worth a
    failed run. With ``specify=False`` the task is passed on as given, without a call.
    """

    llm = LLMSettings(temperature=1.0)

    def __init__(self, *, word_limit: int = 50, specify: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if word_limit < 1:
            raise ValueError(f"word_limit must be 1 or more, got {word_limit}")
        self.word_limit = word_limit
        self.specify = specify

    async def run(self, ctx: ActionContext) -> ActionResult:
        task = "\n\n".join(m.content for m in ctx.news).strip()
        role = ctx.role
        assert isinstance(role, TaskSpecifier)
        text = await self._specified(ctx, task, role) if self.specify else task
        payload = {
            "task": task,
            "specified_task": text,
            "word_limit": self.word_limit,
            "user_role": role.user_role,
            "assistant_role": role.assistant_role,
        }
        return ActionResult(content=text, payload=payload)

    async def _specified(self, ctx: ActionContext, task: str, role: TaskSpecifier) -> str:
        prompt = _SPECIFY.format(
            assistant_role=role.assistant_role,
            user_role=role.user_role,
            task=task,
            word_limit=self.word_limit,
        )
        messages = (ChatMessage("system", "You make tasks specific."), ChatMessage("user", prompt))
        request = build_request(
            messages, output=None, llm=ctx.llm, action=self.name, role=role.name
        )
        text = (await ctx.turn.ask(request)).text.strip()
        if _words(text) > self.word_limit:
            again = (
                ChatMessage("assistant", text),
                ChatMessage(
                    "user",
                    (
                        f"That has {_words(text)} words; the limit is {self.word_limit}. "
                        f"Reply with the specified task in {self.word_limit} words or less."
                    ),
                ),
            )
            request = msgspec.structs.replace(request, messages=messages + again)
            text = (await ctx.turn.ask(request, attempt=2)).text.strip()
        if _words(text) > self.word_limit:
            ctx.turn.emit("task_trimmed", words=_words(text), word_limit=self.word_limit)
            text = " ".join(text.split()[: self.word_limit])
        return text


def _words(text: str) -> int:
    return len(text.split())


class _GuardedTurn(Action, ABC, register=False):
    """One conversational message, checked by the role guard (see the module docstring)."""

    form = ""

    @abstractmethod
    def check(self, text: str) -> str | None:
        """Why ``text`` is out of this part (the role guard's verdict), or None."""

    @abstractmethod
    def chat(self, role: CamelAgent) -> tuple[ChatMessage, ...]:
        """The conversation as this part sees it."""

    async def run(self, ctx: ActionContext) -> ActionResult:
        role = ctx.role
        assert isinstance(role, CamelAgent)
        text = await guarded_reply(
            ctx,
            self.chat(role),
            action=self.name,
            check=self.check,
            form=self.form,
            max_repairs=self.max_repairs,
            persona=role.profile,
        )
        return ActionResult(content=text, payload={"persona": role.profile})


async def guarded_reply(
    ctx: ActionContext,
    messages: tuple[ChatMessage, ...],
    *,
    action: str,
    check: Callable[[str], str | None],
    form: str,
    max_repairs: int,
    persona: str,
) -> str:
    """The model's reply that passes ``check``; each failed attempt is sent back with its
    problem (and logged as a ``role_guard`` event); raises :class:`RoleFlipError` after
    ``max_repairs`` repairs."""
    request = build_request(messages, output=None, llm=ctx.llm, action=action, role=ctx.role.name)
    problem = ""
    for attempt in range(1, max_repairs + 2):
        text = (await ctx.turn.ask(request, attempt=attempt)).text.strip()
        found = check(text)
        if found is None:
            return text
        problem = found
        ctx.turn.emit("role_guard", action=action, attempt=attempt, problem=problem, reply=text)
        retry = (ChatMessage("assistant", text), ChatMessage("user", _feedback(problem, form)))
        request = msgspec.structs.replace(request, messages=messages + retry)
    raise RoleFlipError(
        f"role guard: {ctx.role.name} ({persona}) {problem}, and still did after "
        f"{max_repairs} repair(s) (max_role_repairs={max_repairs}); the run stops rather than "
        f"go on with swapped parts. Raise [sop].max_role_repairs, use a model that follows "
        f"instructions better, or lower its temperature."
    )


class GiveInstruction(_GuardedTurn):
    """The AI user's next instruction (or the termination token)."""

    form = _USER_FORM

    def check(self, text: str) -> str | None:
        return check_user_turn(text)

    def chat(self, role: CamelAgent) -> tuple[ChatMessage, ...]:
        turns = [
            ChatMessage("assistant" if m.cause_by == INSTRUCT else "user", m.content)
            for m in role.transcript()
        ]
        return (ChatMessage("system", role.inception()), ChatMessage("user", _KICKOFF), *turns)


class GiveSolution(_GuardedTurn):
    """The AI assistant's solution to the latest instruction."""

    form = _ASSISTANT_FORM

    def check(self, text: str) -> str | None:
        return check_assistant_turn(text)

    def chat(self, role: CamelAgent) -> tuple[ChatMessage, ...]:
        turns = [
            ChatMessage("user" if m.cause_by == INSTRUCT else "assistant", m.content)
            for m in role.transcript()
        ]
        return (ChatMessage("system", role.inception()), *turns)

    async def run(self, ctx: ActionContext) -> ActionResult:
        result = await super().run(ctx)
        role = ctx.role
        assert isinstance(role, CamelAgent)
        # The role-play's result is the assistant's work, step by step: rewritten after each
        # solution, so at the end solution.md holds every instruction with its solution.
        steps = [m for m in role.memory if m.cause_by in (INSTRUCT, SOLVE)]
        parts = [f"# {role.task()}", ""]
        parts += [
            f"## {'Instruction' if m.cause_by == INSTRUCT else 'Solution'}\n\n{m.content}\n"
            for m in steps
        ]
        parts.append(f"## Solution\n\n{result.content}\n")
        ctx.turn.write_artifact(SOLUTION_FILE, "\n".join(parts))
        return result


# -- roles ---------------------------------------------------------------------------------


class _Personas(Role, register=False):
    """A role that knows both personas of the role-play (extra constructor fields)."""

    def __init__(
        self, *, user_role: str = "User", assistant_role: str = "Assistant", **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.user_role, self.assistant_role = user_role, assistant_role

    def fields(self) -> dict[str, Any]:
        return {
            **super().fields(),
            "user_role": self.user_role,
            "assistant_role": self.assistant_role,
        }


class TaskSpecifier(_Personas):
    """Makes the human's task specific; its own model settings (temperature 1.0)."""

    profile = "Task Specifier"
    goal = "Turn a vague task into a specific, creative one within a word limit"
    watch = ("UserRequirement",)
    actions = (SpecifyTask,)
    llm = LLMSettings(temperature=1.0)


class CamelAgent(_Personas, register=False):
    """One side of the role-play: acts on ``triggers``, prompts from the transcript."""

    triggers: frozenset[str] = frozenset()
    inception_text = ""

    def __init__(self, *, history: int = 40, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if history < 1:
            raise ValueError(f"history must be 1 or more messages, got {history}")
        self.history = history

    def fields(self) -> dict[str, Any]:
        return {**super().fields(), "history": self.history}

    async def step(self, news: Sequence[Message], turn: Turn) -> Sequence[Message]:
        fresh = tuple(news)
        self.memory.extend(fresh)
        if not any(m.cause_by in self.triggers for m in fresh):
            return ()  # e.g. the assistant reading the specified task: it waits for an instruction
        return await self._run_in_order(self._actions, fresh, turn)

    def task(self) -> str:
        spec = self.memory.latest(SPECIFY)
        return spec.content if spec is not None else ""

    def transcript(self) -> list[Message]:
        said = [m for m in self.memory if m.cause_by in (INSTRUCT, SOLVE)]
        return said[-self.history :]

    def inception(self) -> str:
        return self.inception_text.format(
            user_role=self.user_role,
            assistant_role=self.assistant_role,
            task=self.task(),
            done=TASK_DONE,
        )


class AIUser(CamelAgent):
    """The task planner: one instruction at a time, never a solution."""

    profile = "AI User"
    goal = "Guide the assistant through the task one instruction at a time"
    watch = (SPECIFY, SOLVE)
    actions = (GiveInstruction,)
    llm = LLMSettings(temperature=0.2)
    triggers = frozenset({SPECIFY, SOLVE})
    inception_text = _USER_INCEPTION


class AIAssistant(CamelAgent):
    """The executor: solves each instruction, never instructs."""

    profile = "AI Assistant"
    goal = "Carry out each instruction with a concrete solution"
    watch = (SPECIFY, INSTRUCT)
    actions = (GiveSolution,)
    llm = LLMSettings(temperature=0.2)
    triggers = frozenset({INSTRUCT})
    inception_text = _ASSISTANT_INCEPTION
