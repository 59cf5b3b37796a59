"""From a loaded scenario to a team: the SOP's roles, the file's own roles and actions.

Order of work: the built-in roles and actions are registered; the scenario gets its own
copy of the registry, into which its ``[actions.X]`` are declared; the SOP (if any) builds
its team; each ``[[roles]]`` entry then either overrides the SOP's role of that name (only
the fields it gives) or declares a new role. Every name is checked here, so a typo is a
:class:`sopbus.bus.ConfigError` with its ``$.path`` and the closest names, before any call.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sopbus.bus import ConfigError, Injection, Message, RoleSpec, Scenario, did_you_mean
from sopbus.bus.scenario import ROLE_NAME_FIX, role_name_problem
from sopbus.roles import (
    LLMSettings,
    Registry,
    Role,
    action_from_spec,
    agent_name,
    declare_remote_action,
    declare_role,
    registry,
    role_with_overrides,
)

from ._classes import python_class, with_action_classes
from ._follow import apply_follows, as_watch_entries, check_senders, graph_follows
from ._import import raised_at
from ._populations import build_populations
from ._sop import SOP, SopContext, Team, get_sop

IDEA_ACTION = "UserRequirement"
IDEA_SENDER = "Boss"

_ROLE_FIELDS = (
    "profile",
    "goal",
    "constraints",
    "aliases",
    "watch",
    "actions",
    "send_to",
    "react_mode",
    "max_react_steps",
    "llm",
    "human",
)


def build_team(scenario: Scenario) -> Team:
    """The team a scenario describes, every name checked."""
    import sopbus.roles.builtin  # noqa: F401  (registers the built-in roles and actions)

    sop = get_sop(scenario.sop, path=scenario.path) if scenario.sop else None
    reg = registry.copy()
    _declare_actions(scenario, reg)
    defaults = llm_defaults(scenario)
    team = _built(sop, SopContext(scenario, reg, defaults)) if sop else Team(roles=[])
    if sop is not None and sop.verdict is not None:
        team.verdict = sop.verdict
    for i, spec in enumerate(with_action_classes(scenario, reg)):
        _apply_role(team, spec, f"$.roles[{i}]", reg, defaults, scenario)
    taken = {a for r in team.roles for a in (r.name, *r.aliases)}
    team.populations += build_populations(scenario, reg, defaults, taken)
    if not team.roles and not team.populations:
        raise ConfigError(
            f"{scenario.path}: the team is empty: name an SOP at $.scenario.sop "
            f"or declare roles in [[roles]]"
        )
    team.tools = {**reg.tools, **team.tools}
    _check_names(team, scenario)
    _check_addresses(team, scenario)
    _follow(team, scenario)
    _add_messages(team, scenario)
    return team


def _declare_actions(scenario: Scenario, reg: Registry) -> None:
    """The file's ``[actions.X]`` declared into ``reg``, the scenario's copy of the registry."""
    for name, action in scenario.actions.items():
        if name in reg.actions:  # a file's action never silently replaces a built-in one
            raise ConfigError(
                f"{scenario.path}: [actions.{name}] - at `$.actions.{name}`: an action "
                f"named {name} already exists ({_origin(reg.actions[name])}); "
                f"rename the table, e.g. [actions.My{name}], and the names that refer to it"
            )
        try:
            action_from_spec(name, action, registry=reg)
        except ConfigError as exc:
            raise ConfigError(f"{scenario.path}: {exc}") from None


def _add_messages(team: Team, scenario: Scenario) -> None:
    """The idea as the first message (unless the SOP seeded its own) and the file's
    ``[[inject]]`` messages, onto ``team``."""
    if not team.seed and scenario.idea:
        team.seed.append(
            Message(cause_by=IDEA_ACTION, sent_from=IDEA_SENDER, content=scenario.idea)
        )
    team.injections.extend(
        Injection(
            round=i.round,
            message=Message(
                cause_by=i.cause_by,
                sent_from=i.sent_from,
                send_to=i.send_to,
                content=i.content,
                payload=i.payload,
            ),
        )
        for i in scenario.inject
    )


def _check_names(team: Team, scenario: Scenario) -> None:
    """The names an SOP gave its roles (its ``[sop]`` options, a user's ``build``) follow the
    rule the file's ``[[roles]]`` follow, checked when it was loaded."""
    for role in team.roles:
        for name in (role.name, *role.aliases):
            if problem := role_name_problem(name):
                raise ConfigError(
                    f"{scenario.path}: {problem}, in the team the SOP {scenario.sop!r} "
                    f"built - at `$.scenario.sop`: check the names its [sop] options or its "
                    f"build() give; {ROLE_NAME_FIX}"
                )


def _check_addresses(team: Team, scenario: Scenario) -> None:
    """Every name in a role's ``send_to`` or an ``[[inject]]``'s ``send_to`` is a role of
    the team (by name or alias): a typo would otherwise leave every message it addresses
    undelivered, and the run would look idle instead of wrong."""
    known = [a for r in team.roles for a in (r.name, *r.aliases)]
    known += [p.name for p in team.populations]
    agents = [p.agent_index for p in team.populations]
    declared = {spec.name: i for i, spec in enumerate(scenario.roles)}
    places = [
        (
            f"$.roles[{declared[r.name]}].send_to"
            if r.name in declared
            else f"send_to of role {r.name!r} (built by SOP {scenario.sop})",
            r.send_to,
        )
        for r in team.roles
    ]
    places += [(f"$.inject[{k}].send_to", item.send_to) for k, item in enumerate(scenario.inject)]
    for where, names in places:
        for j, name in enumerate(names):
            if name not in known and not any(index(name) is not None for index in agents):
                at = f"{where}[{j}]" if where.startswith("$") else where
                raise ConfigError(
                    f"{scenario.path}: send_to names {name!r}, which is no role of "
                    f"the team - at `{at}`: the roles are "
                    f"{', '.join(known)}{did_you_mean(name, known)}"
                )


def _follow(team: Team, scenario: Scenario) -> None:
    """The file's ``from`` and ``follows`` names checked, then ``follows`` and ``[graph]``
    turned into sender subscriptions of the roles (see sops/_follow.py)."""
    check_senders(team.roles, scenario, IDEA_SENDER)
    follows = graph_follows(team.roles, scenario)
    for spec in scenario.roles:
        if spec.follows:
            follows[spec.name] = list(dict.fromkeys([*follows.get(spec.name, ()), *spec.follows]))
    apply_follows(team.roles, follows)


def _origin(action: type) -> str:
    declared = getattr(action, "_declared_at", None)
    return (
        f"declared at {declared}"
        if declared
        else f"built in: {action.__module__}.{action.__qualname__}"
    )


def llm_defaults(scenario: Scenario) -> LLMSettings:
    llm = scenario.llm
    return LLMSettings(
        model=llm.model,
        temperature=llm.temperature,
        max_tokens=llm.max_tokens,
        output_mode=llm.output_mode,
        extra_body=llm.extra_body,
    )


def _built(sop: SOP, ctx: SopContext) -> Team:
    """``sop.build(ctx)``; a user's ``build`` that fails is their file's error, reported with
    the line it failed at rather than as a traceback of ours."""
    try:
        return sop.build(ctx)
    except ConfigError:
        raise
    except (Exception, SystemExit) as exc:
        raise ConfigError(
            f"{ctx.scenario.path}: the build() of SOP {sop.name!r} (named at $.scenario.sop) "
            f"failed: {raised_at(exc)}; fix the SOP's build function"
        ) from None


def _apply_role(
    team: Team, spec: RoleSpec, where: str, reg: Registry, defaults: LLMSettings, scenario: Scenario
) -> None:
    given = {f: getattr(spec, f) for f in _ROLE_FIELDS if getattr(spec, f) is not None}
    if "watch" in given:
        given["watch"] = as_watch_entries(given["watch"])
    try:
        if spec.agent is not None:
            _declare_remote(spec, where, reg, scenario)
        for j, role in enumerate(team.roles):
            if role.name == spec.name and spec.cls is not None:
                raise ConfigError(
                    f"role {spec.name!r} at {where} is the SOP's, which made it already: "
                    f"`class` is for a new role; rename the entry or leave `class` out"
                )
            if role.name == spec.name:
                team.roles[j] = role_with_overrides(role, registry=reg, where=where, **given)
                return
        if spec.cls is not None:
            role = _of_class(spec, given, where, reg, scenario)
        else:
            role = declare_role(spec.name, **given, registry=reg, where=where)
        team.roles.append(
            role_with_overrides(role, registry=reg, where=where, llm_defaults=defaults)
        )
    except ConfigError as exc:
        raise ConfigError(f"{scenario.path}: {exc}") from None


def _declare_remote(spec: RoleSpec, where: str, reg: Registry, scenario: Scenario) -> None:
    """The actions of a role answered by an A2A agent, each one sending to it."""
    name = agent_name(spec.agent or "", scenario.a2a, where)
    if name in scenario.mcp:
        raise ConfigError(
            f"{where}.agent: [a2a.{name}] and [mcp.{name}] share the name {name!r}, which "
            f"names their tools; rename one of the tables"
        )
    if not spec.actions:
        raise ConfigError(
            f"{where}.actions: a role answered by an A2A agent needs an action name, its "
            f'answers\' cause_by (actions = ["Translate"])'
        )
    for k, action in enumerate(spec.actions):
        declare_remote_action(action, name, registry=reg, where=f"{where}.actions[{k}]")


def _of_class(
    spec: RoleSpec, given: dict[str, Any], where: str, reg: Registry, scenario: Scenario
) -> Role:
    """A new role of the Python class the entry names, its other fields laid over the
    class's; whatever the class's own code raises is the user's error, with its line."""
    assert spec.cls is not None
    cls = python_class(spec.cls, Role, scenario, f"{where}.class")
    try:
        return cls(name=spec.name, **given, registry=reg, where=where)
    except ConfigError:
        raise
    except Exception as exc:
        raise ConfigError(
            f"{spec.cls} at {where}.class failed to make role {spec.name!r}: {raised_at(exc)}"
        ) from None


# -- the watch graph ------------------------------------------------------------------------


@dataclass
class WatchGraph:
    """Who watches what and who publishes what: the team as the bus will route it."""

    watches: dict[str, list[str]] = field(default_factory=dict)  # role -> actions it watches
    publishes: dict[str, list[str]] = field(default_factory=dict)  # role -> actions it can publish
    addresses: dict[str, list[str]] = field(default_factory=dict)  # role -> roles it names
    # role -> action -> the senders it watches that action from (sender subscriptions)
    senders: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    seeds: list[str] = field(default_factory=list)  # actions of the first messages

    def edges(self) -> list[tuple[str, str, str]]:
        """(from role, to role, action) for every route by cause_by or by name."""
        out = []
        for src, actions in self.publishes.items():
            for action in actions:
                for dst, watched in self.watches.items():
                    if dst != src and action in watched and not self.addresses.get(src):
                        if src in self.senders.get(dst, {}).get(action, [src]):
                            out.append((src, dst, action))
            for dst in self.addresses.get(src, []):
                for action in actions:
                    out.append((src, dst, action))
        return out


def watch_graph(team: Team) -> WatchGraph:
    g = WatchGraph(
        seeds=sorted(
            {m.cause_by for m in team.seed} | {i.message.cause_by for i in team.injections}
        )
    )
    names = {a: r.name for r in team.roles for a in (r.name, *r.aliases)}
    for r in team.roles:
        g.watches[r.name] = list(r.watch_order)
        g.publishes[r.name] = [a.name for a in r.actions]
        g.addresses[r.name] = [names[a] for a in r.send_to if a in names]
        g.senders[r.name] = {a: sorted(s) for a, s in r.watch_from.items()}
    for p in team.populations:  # one node for all its agents, as on the bus
        g.watches[p.name] = sorted(p.watch)
        g.publishes[p.name] = [p.action.name]
        g.addresses[p.name] = []
    return g


def team_warnings(team: Team) -> list[str]:
    """Actions nobody watches, roles nobody can reach, and cycles only the round limit bounds."""
    g = watch_graph(team)
    watched = {a for acts in g.watches.values() for a in acts}
    warnings = []
    for role, actions in g.publishes.items():
        for action in actions:
            if action not in watched and not g.addresses.get(role):
                warnings.append(
                    f"action {action} (published by {role}) is watched by nobody; "
                    f"its messages will be recorded as undelivered"
                )
    reached = _reachable(g)
    for role in g.watches:
        if role not in reached:
            warnings.append(
                f"role {role} can never be reached: nothing it watches "
                f"({', '.join(g.watches[role]) or 'nothing'}) is published or seeded, "
                f"and nobody addresses it"
            )
    for cycle in _cycles(g):
        if any(role in team.bounds for role in cycle):
            continue  # a role on it stops the cycle itself (it says how in Team.bounds)
        warnings.append(
            f"cycle {' -> '.join(cycle)} is bounded only by [run].max_rounds and the "
            f"budget (roles may bound it themselves, e.g. a test-round limit)"
        )
    return warnings


def _reachable(g: WatchGraph) -> set[str]:
    frontier = [r for r, acts in g.watches.items() if set(acts) & set(g.seeds)]
    seen = set(frontier)
    edges = g.edges()
    while frontier:
        src = frontier.pop()
        for a, b, _ in edges:
            if a == src and b not in seen:
                seen.add(b)
                frontier.append(b)
    return seen


def _cycles(g: WatchGraph) -> Iterable[list[str]]:
    """Each elementary cycle once, by a depth-first search from each role (teams are small)."""
    succ: dict[str, set[str]] = {}
    for a, b, _ in g.edges():
        succ.setdefault(a, set()).add(b)
    found: set[frozenset[str]] = set()
    out = []

    def walk(start: str, node: str, path: list[str]) -> None:
        for nxt in sorted(succ.get(node, ())):
            if nxt == start and frozenset(path) not in found:
                found.add(frozenset(path))
                out.append([*path, start])
            elif nxt not in path and nxt > start:
                walk(start, nxt, [*path, nxt])

    for start in sorted(succ):
        walk(start, start, [start])
    return out
