"""Sender subscriptions of a scenario's roles: ``watch`` entries with ``from``, a role's
``follows``, and the team's ``[graph]``.

A role that follows another watches every action that role takes, from it only, so a post
reaches exactly its author's followers. Every sender is checked to be a role of the team
(or a sender the file itself names: the idea's ``Boss``, an ``[[inject]]``'s
``sent_from``), so a typo is exit 2 with the place, not a follower who hears nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sopbus.bus import ConfigError, Scenario, did_you_mean
from sopbus.bus.graph import PARAMETERS, FollowGraph, generate, read_graph
from sopbus.bus.scenario import GraphSpec, WatchSpec
from sopbus.roles import Role, Watch, role_with_overrides


def as_watch_entries(entries: Sequence[str | WatchSpec]) -> list[str | Watch]:
    """A file's ``watch`` entries as a Role takes them."""
    return [e if isinstance(e, str) else Watch(e.action, e.senders) for e in entries]


def check_senders(roles: Sequence[Role], scenario: Scenario, idea_sender: str) -> None:
    """Every ``from`` and ``follows`` name of the file's ``[[roles]]`` is a known sender."""
    known = _known_senders(roles, scenario, idea_sender)
    for i, spec in enumerate(scenario.roles):
        for j, entry in enumerate(spec.watch or ()):
            if isinstance(entry, WatchSpec):
                for k, name in enumerate(entry.senders):
                    _check(name, known, scenario, spec.name, f"$.roles[{i}].watch[{j}].from[{k}]")
        for k, name in enumerate(spec.follows or ()):
            _check(name, known, scenario, spec.name, f"$.roles[{i}].follows[{k}]")


def apply_follows(roles: list[Role], follows: dict[str, list[str]]) -> None:
    """Each role of ``follows`` (name -> whom it follows) watches, from each of them only,
    the actions they take; in place."""
    actions = {r.name: [a.name for a in r.actions] for r in roles}
    for j, role in enumerate(roles):
        followed = follows.get(role.name)
        if not followed:
            continue
        extra = [Watch(a, [f]) for f in followed for a in actions[f]]
        roles[j] = role_with_overrides(role, watch=[*role.watch_entries, *extra])


def graph_follows(roles: Sequence[Role], scenario: Scenario) -> dict[str, list[str]]:
    """Whom each role follows by the file's ``[graph]`` (none without one)."""
    spec = scenario.graph
    if spec is None:
        return {}
    everyone = [r.name for r in roles]
    names = list(spec.members) if spec.members is not None else everyone
    for k, name in enumerate(names):
        _check(name, everyone, scenario, "", f"$.graph.members[{k}]")
    assert spec is not None
    try:
        graph = follow_graph(spec, scenario, names)
    except ConfigError as exc:
        raise ConfigError(f"{scenario.path}: [graph] - at `$.graph`: {exc}") from None
    return {names[a]: [names[b] for b in graph.followees_of(a)] for a in range(graph.n)}


def follow_graph(
    spec: GraphSpec, scenario: Scenario, names: Sequence[str] | Mapping[str, int]
) -> FollowGraph:
    """The graph ``spec`` names over ``names`` (node ``i`` is ``names[i]``, or a mapping
    name -> node): the team's ``[graph]`` or a population's ``graph``."""
    if (spec.generator is None) == (spec.file is None):
        raise ConfigError(
            'give either generator = "random" | "small_world" | "preferential" or '
            'file = "follows.csv" (one of the two)'
        )
    if spec.file is not None:
        return read_graph(scenario.resolve(spec.file), names)
    assert spec.generator is not None
    # Every parameter given goes through: the generator says which it does not take.
    given = {p: getattr(spec, p) for p in _PARAMETERS if getattr(spec, p) is not None}
    return generate(spec.generator, len(names), seed=spec.seed, **given)


_PARAMETERS = sorted({p for params in PARAMETERS.values() for p in params})


def _known_senders(roles: Sequence[Role], scenario: Scenario, idea_sender: str) -> list[str]:
    known = [r.name for r in roles]
    if scenario.idea:
        known.append(idea_sender)
    known += [i.sent_from for i in scenario.inject]
    return list(dict.fromkeys(known))


def _check(name: str, known: Sequence[str], scenario: Scenario, role: str, at: str) -> None:
    if name in known:
        return
    who = f"role {role!r} names" if role else "[graph] names"
    raise ConfigError(
        f"{scenario.path}: {who} {name!r} as a sender, which is no role of the team - at "
        f"`{at}`: the roles are {', '.join(known)}{did_you_mean(name, known)}"
    )
