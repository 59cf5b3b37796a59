"""The watch graph of a team, for people: aligned text, or a Mermaid flowchart.

A *route* is one way a message travels: from the role (or the seed's sender, ``Boss``)
that publishes an action to a role that watches it, or that the publisher names in
``send_to``. An action that reaches nobody gets a route to ``None``: its messages will be
recorded as undelivered. The routes follow the contract in docs/design/routing.md: a role
never receives its own message, and a named recipient takes the place of the watchers.

Imported by ``sopbus validate`` after the team is built (it needs ``sopbus.sops``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from sopbus.bus import Message
    from sopbus.sops import Team


class Route(NamedTuple):
    """``src`` publishes ``action``; ``dst`` receives it (``None``: nobody does).
    ``how`` is ``"watch"`` (``dst`` watches the action), ``"name"`` (``src`` addresses
    ``dst``) or ``"seed"`` (a first or injected message)."""

    src: str
    dst: str | None
    action: str
    how: str


def routes(team: Team) -> list[Route]:
    """Every route of ``team``: the seeds' first, then each role's in declared order."""
    from sopbus.sops import watch_graph

    g = watch_graph(team)
    out = [route for m in _first_messages(team) for route in _seed_routes(m, team)]
    edges = g.edges()
    for src, actions in g.publishes.items():
        named = bool(g.addresses.get(src))
        for action in actions:
            found = [
                Route(a, b, act, "name" if named else "watch")
                for a, b, act in edges
                if a == src and act == action
            ]
            out += found or [Route(src, None, action, "name" if named else "watch")]
    return out


def _first_messages(team: Team) -> list[Message]:
    return [*team.seed, *(i.message for i in team.injections)]


def _seed_routes(message: Message, team: Team) -> list[Route]:
    if message.send_to:
        names = set(message.send_to)
        dsts = [r.name for r in team.roles if names & {r.name, *r.aliases}]
        how = "name"
    else:
        dsts = [r.name for r in team.roles if r.watches(message.cause_by, message.sent_from)]
        dsts += [p.name for p in team.populations if message.cause_by in p.watch]
        how = "seed"
    dsts = [d for d in dsts if d != message.sent_from]
    return [Route(message.sent_from, d, message.cause_by, how) for d in dsts] or [
        Route(message.sent_from, None, message.cause_by, how)
    ]


def graph_text(team: Team) -> list[tuple[str, str]]:
    """The watch graph as ``(label, text)`` lines, the labels aligned: each role with what
    it watches and publishes, then the routes. (The caller wraps ``text`` under its label.)"""
    from sopbus.sops import watch_graph

    g = watch_graph(team)
    profiles = {r.name: r.profile for r in team.roles}
    profiles |= {p.name: f"population of {p.size:,}" for p in team.populations}
    labels = {name: name + (f" ({profiles[name]})" if profiles[name] else "") for name in g.watches}
    width = max(map(len, labels.values()), default=0)
    lines = [("", "watch graph (who watches what, who publishes what):")]
    for name, label in labels.items():
        sends = f"; sends to {', '.join(g.addresses[name])}" if g.addresses.get(name) else ""
        lines.append(
            (
                f"  {label:<{width}}  ",
                f"watches {', '.join(g.watches[name]) or 'nothing'}; "
                f"publishes {', '.join(g.publishes[name]) or 'nothing'}{sends}",
            )
        )
    lines.append(("", "routes:"))
    for route in routes(team):
        dst = route.dst if route.dst is not None else "(nobody: undelivered)"
        note = {"seed": "  (first message)", "name": "  (by name)"}.get(route.how, "")
        lines.append(("  ", f"{route.src} --{route.action}--> {dst}{note}"))
    return lines


def mermaid(team: Team) -> str:
    """The routes of ``team`` as a Mermaid flowchart (``flowchart LR``). Roles are boxes
    labelled with name and profile, senders outside the team (``Boss``) are stadiums;
    ``-->`` is a route by watch, ``==>`` a route by name, ``-.->`` a route to nobody."""
    ids = {r.name: f"r{i}" for i, r in enumerate(team.roles)}
    lines = ["flowchart LR"]
    for r in team.roles:
        label = _label(r.name) + (f"<br/>{_label(r.profile)}" if r.profile else "")
        lines.append(f'    {ids[r.name]}["{label}"]')
    all_routes = routes(team)
    for src in dict.fromkeys(route.src for route in all_routes):
        if src not in ids:
            ids[src] = f"s{len(ids)}"
            lines.append(f'    {ids[src]}(["{_label(src)}"])')
    if any(route.dst is None for route in all_routes):
        lines.append('    nobody[/"undelivered"/]')
    for route in all_routes:
        arrow = "-.->" if route.dst is None else "==>" if route.how == "name" else "-->"
        dst = "nobody" if route.dst is None else ids[route.dst]
        lines.append(f'    {ids[route.src]} {arrow}|"{_label(route.action)}"| {dst}')
    return "\n".join(lines)


def _label(text: str) -> str:
    """``text`` safe inside a quoted Mermaid label (Mermaid's own entity codes)."""
    return (
        text.replace("#", "#35;").replace('"', "#quot;").replace("<", "#lt;").replace(">", "#gt;")
    )
