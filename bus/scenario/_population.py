"""``[[populations]]``: one role declared once for many agents (docs/populations.md).

A population's agents are rows, not role objects: what is declared here is what every agent
shares (watches, actions, a profile template) and how each agent's own attributes are made
(drawn from a spec, seeded, or read from a file with one row an agent).
"""

from __future__ import annotations

import re
from typing import Annotated, Any

import msgspec

from ._graph import GraphSpec

MAX_POPULATION = 100_000_000
"""The largest count of one population: past it even the compact columns need more memory
than a machine this runs on has, and a typo (``count = 1e12``) is no plan."""
DEFAULT_CONCURRENCY = 4
"""Calls of one population in flight at once: a local llama.cpp server's parallel slots.
vLLM or a hosted API takes more (``concurrency = 64``)."""

PopulationCount = Annotated[int, msgspec.Meta(ge=1, le=MAX_POPULATION)]
Concurrency = Annotated[int, msgspec.Meta(ge=1, le=10_000)]
Shards = Annotated[int, msgspec.Meta(ge=1, le=1024)]
DEFAULT_FEED = 10
"""The posts an agent of a population with a follower graph reads in a turn: its feed's
``k`` newest (OASIS's recommendation lists are of that order)."""
FeedSize = Annotated[int, msgspec.Meta(ge=1, le=1_000)]
AttributeSpec = str | tuple[str | int | float, ...]
"""``"int 18..80"``, ``"float 0..1"``, or a list of choices (``["saver", "gambler"]``)."""

_RANGE = re.compile(r"^\s*(int|float)\s+(-?[0-9.]+)\s*\.\.\s*(-?[0-9.]+)\s*$")
_FIELD = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


class PopulationSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One ``[[populations]]`` entry. Agents are named ``{name}-0`` ... ``{name}-{count-1}``.

    ``profile`` is filled per agent from its attributes (``{persona}``, ``{age}``, and
    ``{agent}`` for its name). ``attributes`` maps names to specs (:data:`AttributeSpec`);
    ``attributes_file`` (CSV, JSONL or Parquet, relative to the scenario) gives one row an
    agent instead, its columns the attributes. ``active`` is the share of the agents with
    mail that act in a round (a seeded sample; ``None``: all of them). ``concurrency``
    bounds the population's calls in flight. ``output`` names the numeric field of the
    action's output whose mean and distribution the run's summary keeps per round
    (default: the first numeric field). ``shards`` splits the agents into that many
    ranges, each played by a ``sopbus worker`` over NATS (docs/nats.md); 1 (the default)
    plays them all in the run's process.

    ``graph`` (a generator or a ``file``, as the team's ``[graph]``) says whom each agent
    follows: a watched message one of the agents sends then reaches its followers only, as
    a post in their feeds, and ``feed`` is how many of the newest posts an agent reads.
    """

    name: str
    count: PopulationCount
    watch: tuple[str, ...] = ()
    actions: tuple[str, ...] = ()
    profile: str = ""
    attributes: dict[str, AttributeSpec] = {}
    attributes_file: str | None = None
    active: float | None = None
    concurrency: Concurrency = DEFAULT_CONCURRENCY
    output: str | None = None
    shards: Shards = 1
    graph: GraphSpec | None = None
    feed: FeedSize = DEFAULT_FEED


class Range(msgspec.Struct, frozen=True):
    """A parsed ``"int A..B"`` / ``"float A..B"`` spec (bounds inclusive)."""

    kind: str
    low: float
    high: float


def parse_attribute(spec: AttributeSpec) -> Range | tuple[Any, ...]:
    """The spec as a :class:`Range` or a tuple of choices; ``ValueError`` saying the fix."""
    if isinstance(spec, str):
        found = _RANGE.match(spec)
        if found is None:
            raise ValueError(
                f'{spec!r} is not a spec: write "int A..B", "float A..B" or a list of choices'
            )
        kind, low, high = found.group(1), float(found.group(2)), float(found.group(3))
        if kind == "int" and (low != int(low) or high != int(high)):
            raise ValueError(f"{spec!r}: the bounds of an int range are whole numbers")
        if low > high:
            raise ValueError(f"{spec!r}: the low bound is above the high one; swap them")
        return Range(kind, low, high)
    if not spec:
        raise ValueError("an empty list of choices; give at least one")
    return tuple(spec)


def template_fields(template: str) -> list[str]:
    """The ``{field}`` names a profile template uses."""
    return _FIELD.findall(template)


def fill_profile(template: str, values: dict[str, str]) -> str:
    """``template`` with each ``{field}`` replaced by ``values[field]``; any other brace is
    kept as written (no attribute or index lookups: a profile is text, not a format call)."""
    return _FIELD.sub(lambda m: values.get(m.group(1), m.group(0)), template)


def population_problems(
    populations: tuple[PopulationSpec, ...],
) -> list[tuple[list[Any], str, str]]:
    """Each problem as (``$.path`` tokens, what, fix): the loader words them."""
    out: list[tuple[list[Any], str, str]] = []
    seen: set[str] = set()
    for i, pop in enumerate(populations):
        at = ["populations", i]
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", pop.name):
            out.append(
                ([*at, "name"], f"bad population name {pop.name!r}", "use letters, digits and _")
            )
        if pop.name in seen:
            out.append(([*at, "name"], f"a second population {pop.name!r}", "rename one"))
        seen.add(pop.name)
        if pop.active is not None and not 0.0 < pop.active <= 1.0:
            out.append(
                (
                    [*at, "active"],
                    f"active = {pop.active} is outside (0, 1]",
                    "give the share of agents that act per round, e.g. 0.01, or leave it "
                    "out (all agents with mail act)",
                )
            )
        if pop.attributes and pop.attributes_file:
            out.append(
                (
                    [*at, "attributes_file"],
                    "both attributes and attributes_file",
                    "give one of them",
                )
            )
        for key, spec in pop.attributes.items():
            try:
                parse_attribute(spec)
            except ValueError as exc:
                out.append(([*at, "attributes", key], str(exc), "see docs/populations.md"))
        if not pop.actions:
            out.append(([*at, "actions"], "no actions", 'name the action agents take: ["Guess"]'))
        out += _template_problems(pop, at)
        out += _graph_problems(pop, at)
    return out


def _graph_problems(pop: PopulationSpec, at: list[Any]) -> list[tuple[list[Any], str, str]]:
    """A population's ``graph`` names a generator or a file, and no ``members`` (its nodes
    are the agents); the generator's parameters are checked when the graph is built."""
    graph = pop.graph
    if graph is None:
        return []
    out: list[tuple[list[Any], str, str]] = []
    if (graph.generator is None) == (graph.file is None):
        out.append(
            (
                [*at, "graph"],
                "the graph names both a generator and a file"
                if graph.generator
                else "the graph names neither a generator nor a file",
                'give one: graph = { generator = "small_world", k = 10, p = 0.1 } or '
                'graph = { file = "follows.csv" }',
            )
        )
    if graph.members is not None:
        out.append(
            (
                [*at, "graph", "members"],
                "members in a population's graph",
                f"leave it out: the graph is over the agents {pop.name}-0 ... "
                f"{pop.name}-{pop.count - 1}",
            )
        )
    if not pop.watch:
        out.append(
            (
                [*at, "watch"],
                "a graph but no watched action",
                'name the action of a post: watch = ["Post"] (an agent\'s post reaches its '
                "followers)",
            )
        )
    return out


def _template_problems(pop: PopulationSpec, at: list[Any]) -> list[tuple[list[Any], str, str]]:
    if pop.attributes_file:  # its columns are known when the file is read
        return []
    known = {*pop.attributes, "agent"}
    unknown = [f for f in template_fields(pop.profile) if f not in known]
    if not unknown:
        return []
    return [
        (
            [*at, "profile"],
            f"the profile names {{{unknown[0]}}}, which is no attribute",
            f"declare it in attributes, or use one of {sorted(known)}",
        )
    ]
