"""From ``[[populations]]`` entries to :class:`sopbus.roles.Population` members.

Every name is checked as a role's are (watched and taken actions against the registry),
and the memory the agents need is estimated before a single one is built: a count the
machine cannot hold is refused with the estimate, not found out by the kernel.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

from pydantic import BaseModel

from sopbus.bus import ConfigError, Scenario, did_you_mean
from sopbus.bus.graph import FollowGraph
from sopbus.bus.population import (
    CHOICES,
    AgentTable,
    Spread,
    drawn_table,
    estimate_bytes,
    table_from_file,
)
from sopbus.bus.scenario import PopulationSpec, template_fields
from sopbus.roles import LLMSettings, Population, Registry, layered

from ._follow import follow_graph

MEMORY_SHARE = 0.8
"""The share of the machine's available memory a run's populations may take."""


def build_populations(
    scenario: Scenario, reg: Registry, defaults: LLMSettings, taken: set[str]
) -> list[Population]:
    """The scenario's populations; ``taken`` holds the team's role names and aliases."""
    out = []
    for i, spec in enumerate(scenario.populations):
        where = f"{scenario.path}: $.populations[{i}]"
        if spec.name in taken:
            raise ConfigError(
                f"{where}.name: {spec.name!r} is also a role's name or alias; rename one"
            )
        check_memory(spec, where, available_bytes())
        out.append(_population(spec, where, scenario, reg, defaults))
    return out


def _population(
    spec: PopulationSpec, where: str, scenario: Scenario, reg: Registry, defaults: LLMSettings
) -> Population:
    for j, name in enumerate(spec.watch):
        if name not in reg.actions:
            raise ConfigError(
                f"{where}.watch[{j}]: no action {name!r}{did_you_mean(name, list(reg.actions))}; "
                f"watch an action the team takes"
            )
    for j, name in enumerate(spec.actions):
        if name not in reg.actions:
            raise ConfigError(
                f"{where}.actions[{j}]: no action {name!r}{did_you_mean(name, list(reg.actions))}; "
                f"declare it in [actions.{name}] or name a built-in one"
            )
    if len(spec.actions) > 1:
        raise ConfigError(
            f"{where}.actions: a population takes one action per turn; name one of "
            f"{list(spec.actions)}"
        )
    action = reg.actions[spec.actions[0]]()
    if action.tools:
        raise ConfigError(
            f"{where}.actions[0]: {action.name} names tools; a population's action takes "
            f"none (a tool loop per agent is not bounded by the population's concurrency)"
        )
    if spec.shards > spec.count:
        raise ConfigError(
            f"{where}.shards: {spec.shards} shards of {spec.count} agents leave a shard "
            f"without agents; set shards to {spec.count} or fewer"
        )
    if spec.shards > 1 and spec.graph is not None:
        raise ConfigError(
            f"{where}.shards: a population on a follower graph plays in one process (its "
            f"feeds are one structure); leave shards out, or the graph"
        )
    table = _table(spec, where, scenario)
    llm = layered(LLMSettings(max_tokens=action.default_max_tokens), defaults, action.llm)
    field = spec.output
    if field is not None and (action.Output is None or field not in action.Output.model_fields):
        known = list(action.Output.model_fields) if action.Output is not None else []
        raise ConfigError(
            f"{where}.output: {spec.actions[0]} has no output field {field!r}; name one of {known}"
        )
    return Population(
        table,
        action=action,
        watch=spec.watch,
        llm=llm,
        profile=spec.profile,
        active=spec.active,
        concurrency=spec.concurrency,
        seed=scenario.run.seed,
        field=field,
        spread=_spread(spec, where, scenario, table, action.Output),
    )


def _spread(
    spec: PopulationSpec,
    where: str,
    scenario: Scenario,
    table: AgentTable,
    output: type[BaseModel] | None,
) -> Spread | None:
    """The feeds of a population with a ``graph``; its action must say what an agent does
    with its feed (a ``choice`` of ignore, like, repost)."""
    if spec.graph is None:
        return None
    choices = _choices(output)
    if not choices or not set(choices) <= set(CHOICES):
        raise ConfigError(
            f"{where}.actions[0]: {spec.actions[0]} has no output field choice of "
            f"{' | '.join(CHOICES)} (got {choices or 'none'}); a population on a follower graph "
            f"takes an action that says what an agent does with its feed, e.g. React"
        )
    return Spread(_follow_graph(spec, where, scenario, table), spec.feed, table.index_of)


def _choices(output: type[BaseModel] | None) -> list[str]:
    if output is None or "choice" not in output.model_fields:
        return []
    prop = output.model_json_schema().get("properties", {}).get("choice", {})
    return [str(v) for v in prop.get("enum", ())]


def _follow_graph(
    spec: PopulationSpec, where: str, scenario: Scenario, table: AgentTable
) -> FollowGraph:
    graph = spec.graph
    assert graph is not None
    try:
        return follow_graph(graph, scenario, _Agents(table))
    except ConfigError as exc:
        place = "graph.file" if graph.file is not None and graph.generator is None else "graph"
        raise ConfigError(f"{where}.{place}: {exc}") from None


class _Agents(Mapping[str, int]):
    """A population's agent names as a graph file reads them (``Person-17``: 17), without
    a dict of a million names."""

    def __init__(self, table: AgentTable):
        self.table = table

    def __getitem__(self, name: str) -> int:
        i = self.table.index_of(name)
        if i is None:
            raise KeyError(name)
        return i

    def __iter__(self) -> Iterator[str]:
        return (self.table.agent(i) for i in range(self.table.count))

    def __len__(self) -> int:
        return self.table.count

    def did_you_mean(self, name: str) -> str:
        """The agent whose number ``name`` ends with (``Persn-17``: ``Person-17``), or the
        range of the names."""
        table = self.table
        number = name.rpartition("-")[2]
        if number.isdigit() and int(number) < table.count:
            return f"; did you mean `{table.agent(int(number))}`?"
        return f"; the agents are {table.agent(0)} ... {table.agent(table.count - 1)}"


def _table(spec: PopulationSpec, where: str, scenario: Scenario) -> AgentTable:
    if spec.attributes_file is None:
        return drawn_table(spec.name, spec.count, spec.attributes, scenario.run.seed, where=where)
    path = scenario.resolve(spec.attributes_file)
    table = table_from_file(spec.name, spec.count, path, where=where)
    known = {*table.columns, "agent"}
    for name in template_fields(spec.profile):
        if name not in known:
            raise ConfigError(
                f"{where}.profile: names {{{name}}}, which is no column of {path}; "
                f"its columns are {sorted(table.columns)}"
            )
    return table


def check_memory(spec: PopulationSpec, where: str, available: int | None) -> None:
    """Refuses a population whose agents need more than :data:`MEMORY_SHARE` of
    ``available`` bytes (``None``: unknown, not checked)."""
    need = estimate_bytes(spec.count, spec.attributes or {"row": "float 0..1"})
    if available is None or need <= available * MEMORY_SHARE:
        return
    fits = int(spec.count * available * MEMORY_SHARE / need)
    raise ConfigError(
        f"{where}.count: {spec.count:,} agents need about {need / 2**20:,.0f} MiB, more "
        f"than {MEMORY_SHARE:.0%} of the {available / 2**20:,.0f} MiB this machine has "
        f"free; lower count to at most {fits:,}, or run on a larger machine"
    )


def available_bytes(meminfo: Path = Path("/proc/meminfo")) -> int | None:
    """The memory the kernel says is available, or ``None`` where it does not say."""
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None
