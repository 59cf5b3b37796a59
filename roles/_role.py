"""Roles: who takes which actions in response to which messages.

A role satisfies :class:`sopbus.bus.Member`: the Environment delivers it the messages of the
actions it ``watch``-es (or addressed to it), and its ``step`` publishes what its actions
produce. How it picks actions is its ``react_mode``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, get_args

import msgspec
import pydantic

from sopbus.bus import HUMAN_MODEL, ConfigError, Message, Turn

from ._action import Action, ActionContext
from ._llm import LLMSettings, layered
from ._memory import Memory
from ._prompt import system_text
from ._react import DONE, choose_next, make_plan
from ._registry import Registry
from ._registry import registry as default_registry
from ._watch import Watch, merged

# A person's answers: fields, not a model's JSON mode in the prompt (see bus.llm._human).
_HUMAN = LLMSettings(model=HUMAN_MODEL, output_mode="json_schema")

ReactMode = Literal["by_order", "react", "plan_and_act"]
ActionRef = type[Action] | Action | str
"""How a role names an action: the class, an instance (with its own settings), or the name."""
WatchRef = ActionRef | Watch
"""What ``watch`` lists: an action (watched from anyone) or a :class:`Watch` (from named
senders only)."""
LLMLike = LLMSettings | Mapping[str, Any] | msgspec.Struct | None
"""LLM settings as given: the value, a mapping (``llm = {...}``) or a struct; ``None`` fields
mean "not given"."""


class Role:
    """Base class of roles. Declare one by subclassing::

        class Reviewer(Role):
            profile = "Code Reviewer"
            watch = (WriteCode,)
            actions = (ReviewCode,)

    and make members with ``Reviewer()`` or ``Reviewer(name="Rita", llm=LLMSettings(model="gpt-4o"))``
    (any class field can be overridden per instance). ``name`` defaults to the class name.

    On the class, ``watch`` and ``actions`` are declarations (Action classes, instances or
    names). On an instance they are resolved: ``watch`` is the frozenset of action names
    (as :class:`sopbus.bus.Member` requires) and ``actions`` the tuple of Action instances;
    ``watch_from`` maps the actions watched from named senders only (``Watch("Post",
    senders=["Alice"])`` in ``watch``) to those senders. Names are looked up in ``registry`` (default ``sopbus.roles.registry``); an unknown name is a
    :class:`sopbus.bus.ConfigError` with the closest names and the place (``where``) it was written.

    Without a subclass, ``Role("OrderDesk", watch=["UserRequirement"], actions=[record])``
    declares a role for a :class:`sopbus.Team`; as it may watch the actions of the team's
    other roles, its ``watch`` names are checked when the team is put together (at once when
    ``registry=`` is given).

    ``react_mode``: ``by_order`` runs every action in order; ``react`` lets the model pick
    the next action (or "done"), at most ``max_react_steps`` actions per step;
    ``plan_and_act`` asks the model for a plan of at most ``max_react_steps`` actions,
    then runs it. Each action sees what the earlier ones of the same step published.
    """

    name: str = "Role"
    profile: str = ""
    goal: str = ""
    constraints: str = ""
    aliases: tuple[str, ...] = ()
    # Any: the class holds a declaration (tuple of Action classes or names), an instance
    # the resolved value (frozenset[str] for ``watch``, tuple[Action, ...] for ``actions``).
    watch: Any = ()
    actions: Any = ()
    react_mode: ReactMode = "by_order"
    max_react_steps: int = 5
    send_to: tuple[str, ...] = ()
    llm: LLMSettings = LLMSettings()
    llm_defaults: LLMSettings = LLMSettings()
    #: Answered by a person instead of a model (``--human-input`` or the terminal): every
    #: call of the role's actions goes to model ``human``, priced $0, recorded like any answer.
    human: bool = False
    """The run's defaults (scenario ``[llm]``): the weakest layer under action and role settings."""

    def __init_subclass__(
        cls, *, registry: Registry | None = None, register: bool = True, **kwargs: Any
    ) -> None:
        super().__init_subclass__(**kwargs)
        if "name" not in cls.__dict__:
            cls.name = cls.__name__
        if register:
            (registry or default_registry).add_role(cls)

    def __init__(
        self,
        name: str | None = None,
        *,
        profile: str | None = None,
        goal: str | None = None,
        constraints: str | None = None,
        aliases: Iterable[str] | None = None,
        watch: Iterable[WatchRef] | None = None,
        actions: Iterable[ActionRef] | None = None,
        react_mode: str | None = None,
        max_react_steps: int | None = None,
        send_to: Iterable[str] | None = None,
        llm: LLMLike = None,
        llm_defaults: LLMLike = None,
        human: bool | None = None,
        registry: Registry | None = None,
        where: str | None = None,
    ) -> None:
        cls = type(self)
        at = where or cls.__qualname__.rpartition("<locals>.")[2]

        def given(value: Any, field: str) -> Any:  # the instance's value, else the class's
            return getattr(cls, field) if value is None else value

        self.registry = registry or default_registry
        self.name = _text(given(name, "name"), f"{at}.name", required=True)
        self.profile = _text(given(profile, "profile"), f"{at}.profile")
        self.goal = _text(given(goal, "goal"), f"{at}.goal")
        self.constraints = _text(given(constraints, "constraints"), f"{at}.constraints")
        self.aliases = _names(given(aliases, "aliases"), f"{at}.aliases")
        self.send_to = _names(given(send_to, "send_to"), f"{at}.send_to")
        self._actions = self._resolve_actions(given(actions, "actions"), f"{at}.actions")
        self.actions = self._actions
        # A role of the base class given no registry is a declaration for a team
        # (Role("Desk", watch=[...], actions=[...])): it may watch actions of the team's
        # other roles, which no registry knows yet, so the team checks its names.
        checked = registry is not None or cls is not Role
        watched = given(watch, "watch")
        self.watch_entries = self._resolve_watch(watched, f"{at}.watch", checked=checked)
        self.watch_order = tuple(_entry_name(e) for e in self.watch_entries)
        self.watch = frozenset(self.watch_order)
        self.watch_from = {
            e.name: frozenset(e.senders) for e in self.watch_entries if isinstance(e, Watch)
        }
        self.react_mode = _react_mode(given(react_mode, "react_mode"), f"{at}.react_mode")
        self.max_react_steps = _positive(
            given(max_react_steps, "max_react_steps"), f"{at}.max_react_steps"
        )
        if self.react_mode == "react" and any(a.name == DONE for a in self._actions):
            raise ConfigError(
                f"{at}.actions: an action named {DONE!r} cannot be told apart "
                f"from the end of a react step; rename it"
            )
        self.llm = settings(llm, f"{at}.llm").over(cls.llm)
        self.llm_defaults = settings(llm_defaults, f"{at}.llm_defaults").over(cls.llm_defaults)
        self.human = bool(given(human, "human"))
        self.memory = Memory()

    # -- bus.Member ------------------------------------------------------------------------

    async def step(self, news: Sequence[Message], turn: Turn) -> Sequence[Message]:
        """Remember ``news``, react by ``react_mode``, return what to publish (each message
        with ``parents`` = the ids of ``news``). Nothing new: nothing published."""
        fresh = tuple(news)
        if not fresh:
            return ()
        self.memory.extend(fresh)
        if self.react_mode == "react":
            return await self._react(fresh, turn)
        if self.react_mode == "plan_and_act":
            plan = await make_plan(self, fresh, turn)
            return await self._run_in_order(plan, fresh, turn)
        return await self._run_in_order(self._actions, fresh, turn)

    # -- what actions and the reaction modes use -------------------------------------------

    def system_text(self) -> str:
        """The role as system prompt: name, profile, goal, constraints."""
        return system_text(
            name=self.name, profile=self.profile, goal=self.goal, constraints=self.constraints
        )

    def context(
        self,
        action: Action | None,
        news: tuple[Message, ...],
        turn: Turn,
        earlier: tuple[Message, ...] = (),
    ) -> ActionContext:
        """The context an action runs in, with :meth:`llm_for` the action as its settings."""
        if action is not None:
            turn.doing_now(action.name)
        llm = self.llm_for(action)
        return ActionContext(role=self, turn=turn, news=news, earlier=earlier, llm=llm)

    def llm_for(self, action: Action | None) -> LLMSettings:
        """The LLM settings of ``action``'s calls: its ``default_max_tokens``, the run's
        defaults, the action's settings, then this role's, each over the ones before
        (``action=None``: the role's own calls, e.g. planning)."""
        if action is None:
            return layered(self.llm_defaults, self._own_llm)
        return layered(_default_of(action), self.llm_defaults, action.llm, self._own_llm)

    @property
    def _own_llm(self) -> LLMSettings:
        """The role's settings; a person's role asks model ``human`` whatever else is set."""
        return _HUMAN.over(self.llm) if self.human else self.llm

    def recall(
        self, news: tuple[Message, ...], earlier: tuple[Message, ...], limit: int
    ) -> tuple[Message, ...]:
        """Context for a prompt: the last ``limit`` remembered messages of watched or own
        actions (not counting ``news`` and ``earlier``), then ``news``, then ``earlier``."""
        shown = {id(m) for m in (*news, *earlier)}
        relevant = self.watch | {a.name for a in self.actions}
        history = [m for m in self.memory if m.cause_by in relevant and id(m) not in shown]
        return (*(history[-limit:] if limit > 0 else ()), *news, *earlier)

    def models(self) -> set[str | None]:
        """Every model this role's calls can use (its own and each action's), so that a
        run can check their prices before it makes any call."""
        own = layered(self.llm_defaults, self._own_llm).model
        return {
            own,
            *(layered(self.llm_defaults, a.llm, self._own_llm).model for a in self._actions),
        }

    def watches(self, action: str, sender: str) -> bool:
        """Whether a broadcast of ``action`` from ``sender`` is for this role (by ``watch``
        and ``watch_from``; the Environment's index says the same, for all roles at once)."""
        return action in self.watch and sender in self.watch_from.get(action, (sender,))

    def action_named(self, name: str) -> Action:
        for action in self._actions:
            if action.name == name:
                return action
        raise KeyError(f"role {self.name!r} has no action {name!r}")

    def fields(self) -> dict[str, Any]:
        """The resolved declaration, as keyword arguments that rebuild this role."""
        return {
            "name": self.name,
            "profile": self.profile,
            "goal": self.goal,
            "constraints": self.constraints,
            "aliases": self.aliases,
            "watch": self.watch_entries,
            "actions": self.actions,
            "react_mode": self.react_mode,
            "max_react_steps": self.max_react_steps,
            "send_to": self.send_to,
            "llm": self.llm,
            "llm_defaults": self.llm_defaults,
            "human": self.human,
        }

    # -- reacting --------------------------------------------------------------------------

    async def _run_in_order(
        self, plan: Sequence[Action], news: tuple[Message, ...], turn: Turn
    ) -> list[Message]:
        published: list[Message] = []
        for action in plan:
            message = await self._act(action, news, tuple(published), turn)
            if message is not None:
                published.append(message)
        return published

    async def _react(self, news: tuple[Message, ...], turn: Turn) -> list[Message]:
        published: list[Message] = []
        taken: list[str] = []
        for _ in range(self.max_react_steps):
            action = await choose_next(self, news, tuple(published), taken, turn)
            if action is None:
                break
            taken.append(action.name)
            message = await self._act(action, news, tuple(published), turn)
            if message is not None:
                published.append(message)
        return published

    async def _act(
        self, action: Action, news: tuple[Message, ...], earlier: tuple[Message, ...], turn: Turn
    ) -> Message | None:
        ctx = self.context(action, news, turn, earlier)
        turn.last_cut = False
        result = await action.run(ctx)
        action.keep(result, ctx)
        if not result.publish:
            return None
        message = Message(
            cause_by=action.name,
            sent_from=self.name,
            send_to=result.send_to or self.send_to,
            content=result.content,
            payload=result.payload,
            parents=tuple(dict.fromkeys(m.id for m in news if m.id)),
            cut=turn.last_cut,  # the action's last answer was cut at max_tokens
        )
        self.memory.add(message)
        return message

    # -- resolving declarations ------------------------------------------------------------

    def _resolve_actions(self, refs: object, where: str) -> tuple[Action, ...]:
        resolved: list[Action] = []
        for i, ref in enumerate(_sequence(refs, where)):
            action = _action_instance(ref, self.registry, f"{where}[{i}]")
            if any(a.name == action.name for a in resolved):
                raise ConfigError(
                    f"action {action.name!r} is listed twice at {where}[{i}]; list each action once"
                )
            resolved.append(action)
        return tuple(resolved)

    def _resolve_watch(self, refs: object, where: str, *, checked: bool) -> tuple[str | Watch, ...]:
        """The entries of ``watch`` by name, merged per action (see :class:`Watch`)."""
        reg = self.registry if checked else None
        entries: list[tuple[str, tuple[str, ...] | None]] = []
        for i, ref in enumerate(_sequence(refs, where)):
            if isinstance(ref, Watch):
                at = f"{where}[{i}]"
                senders = _names(ref.senders, f"{at}.senders")
                entries.append((_action_name(ref.action, reg, f"{at}.action"), senders))
            else:
                entries.append((_action_name(ref, reg, f"{where}[{i}]"), None))
        return merged(entries)

    def __repr__(self) -> str:
        following = f" watch_from={ {a: sorted(s) for a, s in self.watch_from.items()} }"
        return (
            f"<{type(self).__name__} {self.name!r}: watch={sorted(self.watch)}"
            f"{following if self.watch_from else ''} "
            f"actions={[a.name for a in self.actions]} react_mode={self.react_mode}>"
        )


def _entry_name(entry: str | Watch) -> str:
    return entry if isinstance(entry, str) else entry.name


def _sequence(value: object, where: str) -> tuple[object, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise ConfigError(
            f"expected a list of action names at {where}, got {value!r}; "
            f"write [{value!r}] for a single one"
        )
    return tuple(value)


def _action_instance(ref: object, registry: Registry, where: str) -> Action:
    if isinstance(ref, Action):
        return ref
    if isinstance(ref, type) and issubclass(ref, Action):
        return ref()
    if isinstance(ref, str):
        return registry.action(ref, where=where)()
    raise ConfigError(f"expected an action name at {where}, got {ref!r}")


def _action_name(ref: object, registry: Registry | None, where: str) -> str:
    if isinstance(ref, Action) or (isinstance(ref, type) and issubclass(ref, Action)):
        return ref.name
    if isinstance(ref, str):
        if registry is None:  # checked when the team is put together
            return _text(ref, where, required=True)
        return registry.action(ref, where=where).name
    raise ConfigError(f"expected an action name at {where}, got {ref!r}")


def _text(value: object, where: str, *, required: bool = False) -> str:
    if not isinstance(value, str) or (required and not value.strip()):
        wanted = "a non-empty string" if required else "a string"
        raise ConfigError(f"expected {wanted} at {where}, got {value!r}")
    return value


def _names(value: object, where: str) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise ConfigError(f"expected a list of names at {where}, got {value!r}")
    return tuple(_text(name, f"{where}[{i}]", required=True) for i, name in enumerate(value))


def _react_mode(value: object, where: str) -> ReactMode:
    modes: tuple[ReactMode, ...] = get_args(ReactMode)
    for mode in modes:
        if value == mode:
            return mode
    raise ConfigError(
        f"unknown react_mode {value!r} at {where}; expected one of {', '.join(modes)}"
    )


def _positive(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"expected a whole number >= 1 at {where}, got {value!r}")
    return value


def _default_of(action: Action) -> LLMSettings:
    """The weakest layer of an action's settings: its own default ``max_tokens``, if any."""
    return LLMSettings(max_tokens=action.default_max_tokens)


def settings(value: LLMLike, where: str) -> LLMSettings:
    """LLM settings from a value, a mapping or a struct (a scenario's ``llm = {...}``;
    ``None`` fields are "not given"), with mistakes reported as :class:`sopbus.bus.ConfigError`
    at ``where``."""
    if value is None:
        return LLMSettings()
    if isinstance(value, LLMSettings):
        return value
    if isinstance(value, msgspec.Struct):
        # The scenario loader's structs, already checked; they also carry run-wide fields
        # (provider, timeouts) that are not per-call settings.
        value = {
            k: getattr(value, k) for k in LLMSettings.model_fields if k in value.__struct_fields__
        }
    try:
        # A None means "not given" (as in the loader's structs), so it is not an override.
        return LLMSettings.model_validate({k: v for k, v in dict(value).items() if v is not None})
    except (pydantic.ValidationError, TypeError, ValueError) as exc:
        raise ConfigError(_settings_error(exc, where)) from None


def _settings_error(exc: Exception, where: str) -> str:
    if not isinstance(exc, pydantic.ValidationError):
        return f"expected a table of LLM settings at {where}: {exc}"
    problems = "; ".join(
        f"{where}.{'.'.join(str(p) for p in e['loc'])}: {e['msg']} (got {e.get('input')!r})"
        for e in exc.errors(include_url=False)
    )
    return (
        f"{problems}. LLM settings are model (str), temperature (0 to 2), "
        f'max_tokens (> 0) and output_mode ("json_schema" or "prompt")'
    )
