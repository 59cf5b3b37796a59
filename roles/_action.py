"""Actions: what a role does in response to messages.

An action's ``name`` is the subscription key of everything it produces: a role that
watches ``WriteCode`` receives the messages published with ``cause_by="WriteCode"``.
"""

from __future__ import annotations

import json
import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, overload

import msgspec
from pydantic import BaseModel

from sopbus.bus import ChatMessage, ConfigError, Message, Turn
from sopbus.bus.llm import DEFAULT_MAX_TOOL_STEPS, TOOL_CHOICES, ToolChoice

from ._llm import LLMSettings, ask_model
from ._prompt import fill, render_output, task_text
from ._registry import Registry
from ._registry import registry as default_registry

if TYPE_CHECKING:
    from sopbus.bus.scenario import ActionSpec

    from ._memory import Memory
    from ._view import RoleView

M = TypeVar("M", bound=BaseModel)


class ActionResult(msgspec.Struct, frozen=True, kw_only=True):
    """What an action produced; the role publishes it as a message with ``cause_by`` set to
    the action's name and ``parents`` set to the news that triggered it.

    ``content`` is for people (and for the next model's prompt); ``payload`` is the
    structured output as JSON-able data; ``send_to`` names recipients (empty: the role's
    default ``send_to``, and if that is empty too, whoever watches the action).
    ``publish=False`` keeps the result to the role (nothing is sent).
    """

    content: str = ""
    payload: Any = None
    send_to: tuple[str, ...] = ()
    publish: bool = True


@dataclass(frozen=True, slots=True)
class ActionContext:
    """What an action gets to work with: the role running it, the turn (model access,
    artifacts, events), the messages that triggered this step, the messages the role has
    already published in this step, and the resolved LLM settings for this action."""

    role: RoleView
    turn: Turn
    news: tuple[Message, ...]
    earlier: tuple[Message, ...] = ()
    llm: LLMSettings = LLMSettings()

    @property
    def memory(self) -> Memory:
        return self.role.memory


class Action:
    """Base class of actions. Declare one by subclassing::

        class ReviewCode(Action):
            instruction = "Review the code in the messages. List concrete problems."
            class Output(BaseModel):
                approved: bool
                problems: list[str]

    ``name`` defaults to the class name. ``Output`` is a pydantic model (``None``: free
    text). The default :meth:`run` asks the model once, repairing an invalid answer at most
    ``max_repairs`` times. Override :meth:`run` for work without a model (running tests)
    or with several calls (``self.ask`` inside a trio nursery).

    The class statement registers the action into ``sopbus.roles.registry``; pass
    ``registry=...`` to register elsewhere or ``register=False`` for an abstract base.
    Instances may override ``llm``, ``max_repairs`` and ``artifact``: ``WriteCode(max_repairs=3)``.

    ``artifact`` (optional) is where the role keeps each result of this action, a path under
    the run's ``artifacts/`` with placeholders ``{role}``, ``{round}`` and ``{action}``
    (``"replies/{round}_{role}.md"``): a ``.json`` path gets the payload as JSON, any
    other the content. The same file name each time keeps only the latest (the final) one.
    An action that writes more than that calls ``ctx.turn.write_artifact(path, text)``.
    """

    name: str = "Action"
    instruction: str = ""
    Output: type[BaseModel] | None = None
    llm: LLMSettings = LLMSettings()
    default_max_tokens: int | None = None
    """This action's ``max_tokens`` where nothing else sets one: the weakest layer, under the
    scenario's ``[llm].max_tokens`` (which replaces it when given) and any ``llm`` setting.
    For actions whose answers run long (a whole source file); ``llm = LLMSettings(max_tokens=...)``
    instead is a setting the scenario's ``[llm].max_tokens`` does not replace."""
    max_repairs: int = 2
    artifact: str | None = None
    history_limit: int = 10
    """How many earlier messages from memory (of watched or own actions) the prompt shows."""
    tools: tuple[str, ...] = ()
    """The tools the model may call (``"git.git_log"``, ``"git.*"``, ``"py.word_count"``):
    every ask of this action runs the tool loop (docs/tools.md)."""
    max_tool_steps: int = DEFAULT_MAX_TOOL_STEPS
    """How many answers' tool calls one ask runs before the model must answer."""
    tool_choice: ToolChoice | None = None
    """The API's ``tool_choice`` for this action's tools: ``"required"`` makes the model call
    a tool until the first results are back (then it may answer), ``"none"`` forbids calls,
    ``"auto"`` sends it as is; ``None`` sends nothing (the server's default)."""

    def __init_subclass__(
        cls, *, registry: Registry | None = None, register: bool = True, **kwargs: Any
    ) -> None:
        super().__init_subclass__(**kwargs)
        if "name" not in cls.__dict__:
            cls.name = cls.__name__
        _check_declaration(cls)
        if register:
            (registry or default_registry).add_action(cls)

    spec: ActionSpec | None = None
    """The ``[actions.<name>]`` table this action was declared from (a scenario file's, or
    ``Action(name, instruction, ...)``'s); ``None`` for a Python class."""

    def __new__(
        cls, name: str | None = None, instruction: str | None = None, **settings: Any
    ) -> Any:
        if cls is not Action:
            if (name is not None or instruction is not None) and cls.__init__ is Action.__init__:
                raise TypeError(
                    f"{cls.__qualname__}(...) takes no name or instruction: its class declares "
                    f"them; Action(name, instruction, output=...) declares a new action"
                )
            return super().__new__(cls)  # a subclass's own __init__ takes its own arguments
        assert _declared is not None, "sopbus.roles._declare sets it when the package loads"
        return super().__new__(_declared(name, instruction, settings))

    def __init__(
        self,
        name: str | None = None,
        instruction: str | None = None,
        *,
        llm: LLMSettings | Mapping[str, Any] | None = None,
        max_repairs: int | None = None,
        artifact: str | None = None,
        **table: Any,
    ) -> None:
        """``Action(name, instruction, output={...}, ...)`` declares an action as a scenario
        file's ``[actions.<name>]`` table does, with the same keys (``output`` maps field names
        to type specs such as ``"list[str]"``; ``llm``, ``max_repairs``, ``artifact``,
        ``tools``, ``max_tool_steps``, ``tool_choice``) and the same checks, and gives an
        instance of the class that table declares. An instance of a subclass may override
        ``llm``, ``max_repairs`` and ``artifact``."""
        if name is not None or instruction is not None:
            return  # __new__ declared the class with every setting
        if table:
            raise TypeError(
                f"{type(self).__qualname__}() got unexpected keywords "
                f"{', '.join(sorted(table))}: an instance may set llm, max_repairs, artifact"
            )
        if llm is not None and not isinstance(llm, LLMSettings):
            raise TypeError(f"{type(self).__qualname__}(llm=...) takes an LLMSettings, got {llm!r}")
        if artifact is not None:
            self.artifact = check_artifact(artifact, f"{type(self).__qualname__}(artifact=...)")
        if llm is not None:
            self.llm = llm.over(type(self).llm)
        if max_repairs is not None:
            if max_repairs < 0:
                raise ValueError(f"max_repairs must be 0 or more, got {max_repairs}")
            self.max_repairs = max_repairs

    async def run(self, ctx: ActionContext) -> ActionResult:
        """Ask the model with :meth:`prompt`, validate against ``Output``, return the result."""
        if self.Output is None:
            return self.result(await self.ask(ctx, self.prompt(ctx), output=None))
        return self.result(await self.ask(ctx, self.prompt(ctx), output=self.Output))

    def prompt(self, ctx: ActionContext) -> tuple[ChatMessage, ...]:
        """The role as system text; the context messages and the instruction as the user turn."""
        task = task_text(
            action=self.name, instruction=self.instruction_for(ctx), context=self.context(ctx)
        )
        return (ChatMessage("system", ctx.role.system_text()), ChatMessage("user", task))

    def instruction_for(self, ctx: ActionContext) -> str:
        """``instruction`` with ``$role``, ``$profile``, ``$goal`` and ``$action`` filled in."""
        role = ctx.role
        values = {
            "role": role.name,
            "profile": role.profile,
            "goal": role.goal,
            "action": self.name,
        }
        return fill(self.instruction, values)

    def context(self, ctx: ActionContext) -> tuple[Message, ...]:
        """The messages the prompt shows: the last ``history_limit`` remembered messages of
        the actions the role watches or takes, then this step's news, then what the role
        published earlier in this step."""
        return ctx.role.recall(ctx.news, ctx.earlier, limit=self.history_limit)

    @overload
    async def ask(
        self,
        ctx: ActionContext,
        messages: tuple[ChatMessage, ...],
        *,
        output: type[M],
        subject: str = "",
    ) -> M: ...
    @overload
    async def ask(
        self,
        ctx: ActionContext,
        messages: tuple[ChatMessage, ...],
        *,
        output: None,
        subject: str = "",
    ) -> str: ...
    async def ask(
        self,
        ctx: ActionContext,
        messages: tuple[ChatMessage, ...],
        *,
        output: type[M] | None,
        subject: str = "",
    ) -> M | str:
        """One validated model call (with repairs) in this action's name. Safe to call
        several times concurrently from an overridden :meth:`run`; ``subject`` (the file,
        section or item this call is for) tells such calls apart in the ledger."""
        return await ask_model(
            ctx.turn,
            messages,
            output=output,
            llm=ctx.llm,
            action=self.name,
            role=ctx.role.name,
            max_repairs=self.max_repairs,
            subject=subject,
            tools=self.tools,
            max_tool_steps=self.max_tool_steps,
            tool_choice=self.tool_choice,
        )

    def result(self, output: BaseModel | str) -> ActionResult:
        """The result for an output: text as it is; a model rendered by :meth:`render`
        with its JSON dump as the payload."""
        if isinstance(output, str):
            return ActionResult(content=output)
        return ActionResult(content=self.render(output), payload=output.model_dump(mode="json"))

    def render(self, output: BaseModel) -> str:
        """The readable text of a structured output (Markdown, one section per field)."""
        return render_output(output)

    def keep(self, result: ActionResult, ctx: ActionContext) -> None:
        """Writes ``result`` to this action's ``artifact`` file, if it names one."""
        if self.artifact is None or (not result.content and result.payload is None):
            return
        path = self.artifact.format(role=ctx.role.name, round=ctx.turn.round, action=self.name)
        if path.endswith(".json"):
            data = (
                json.dumps(
                    result.payload if result.payload is not None else result.content,
                    indent=2,
                    ensure_ascii=False,
                )
                + "\n"
            )
        else:
            data = result.content if result.content.endswith("\n") else result.content + "\n"
        ctx.turn.write_artifact(path, data)

    def __repr__(self) -> str:
        return f"<Action {self.name}>"


Declare = Callable[[object, object, Mapping[str, Any]], type[Action]]
_declared: Declare | None = None


def declare_with(declare: Declare) -> None:
    """How ``Action(name, instruction, ...)`` builds its class: ``declare(name, instruction,
    keywords)``. Set by :mod:`sopbus.roles._declare` when the package loads, since that module
    builds on this one, which may not import it (the layers of ``pyproject.toml``)."""
    global _declared
    _declared = declare


ARTIFACT_FIELDS = ("role", "round", "action")


def check_artifact(template: object, where: str) -> str:
    """``template`` if it is a usable artifact path (relative, no ``..``, placeholders
    only from :data:`ARTIFACT_FIELDS`); else a :class:`~sopbus.bus.ConfigError` at ``where``."""
    if not isinstance(template, str) or not template.strip():
        raise ConfigError(
            f'expected a file path at {where}, such as "replies/{{round}}_{{role}}.md"; '
            f"got {template!r}"
        )
    try:
        fields = [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]
    except ValueError as exc:
        raise ConfigError(
            f"bad artifact path {template!r} at {where}: {exc} (write {{{{ and }}}} "
            f"for a literal brace)"
        ) from None
    unknown = [f for f in fields if f.split(":")[0] not in ARTIFACT_FIELDS]
    if unknown:
        raise ConfigError(
            f"unknown placeholder {{{unknown[0]}}} in {template!r} at {where}: use "
            f"{', '.join(f'{{{f}}}' for f in ARTIFACT_FIELDS)}"
        )
    sample = template.format(role="r", round=1, action="a")
    if sample.startswith(("/", "\\")) or ".." in sample.replace("\\", "/").split("/"):
        raise ConfigError(
            f"artifact path {template!r} at {where} leaves the run's artifacts/ "
            f"directory; write a relative path without '..'"
        )
    return template


def _check_declaration(cls: type[Action]) -> None:
    if not isinstance(cls.name, str) or not cls.name:
        raise TypeError(f"{cls.__qualname__}.name must be a non-empty string, got {cls.name!r}")
    out = cls.Output
    if out is not None and not (isinstance(out, type) and issubclass(out, BaseModel)):
        raise TypeError(
            f"{cls.__qualname__}.Output must be a pydantic BaseModel subclass or None, got {out!r}"
        )
    if not isinstance(cls.llm, LLMSettings):
        raise TypeError(f"{cls.__qualname__}.llm must be an LLMSettings, got {cls.llm!r}")
    if cls.artifact is not None:
        try:
            check_artifact(cls.artifact, f"{cls.__qualname__}.artifact")
        except ConfigError as exc:
            raise TypeError(str(exc)) from None
    tools = cls.tools
    if isinstance(tools, str) or not all(isinstance(t, str) for t in tools):
        raise TypeError(
            f'{cls.__qualname__}.tools must be a tuple of tool names ("git.git_log"), got {tools!r}'
        )
    cls.tools = tuple(tools)
    if not isinstance(cls.max_tool_steps, int) or cls.max_tool_steps < 1:
        raise TypeError(
            f"{cls.__qualname__}.max_tool_steps must be an int >= 1, got {cls.max_tool_steps!r}"
        )
    if cls.tool_choice is not None and cls.tool_choice not in TOOL_CHOICES:
        raise TypeError(
            f"{cls.__qualname__}.tool_choice must be one of {', '.join(TOOL_CHOICES)} or None, "
            f"got {cls.tool_choice!r}"
        )
    if not isinstance(cls.max_repairs, int) or cls.max_repairs < 0:
        raise TypeError(
            f"{cls.__qualname__}.max_repairs must be an int >= 0, got {cls.max_repairs!r}"
        )


class UserRequirement(Action):
    """The idea a run starts from. The run publishes it with ``cause_by="UserRequirement"``
    (from "Boss"), so roles can watch it. Taken as an action, it passes the text on."""

    async def run(self, ctx: ActionContext) -> ActionResult:
        return ActionResult(content="\n\n".join(m.content for m in ctx.news))
