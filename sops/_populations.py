"""From ``[[populations]]`` entries to :class:`sopbus.roles.Population` members.

Every name is checked as a role's are (watched and taken actions against the registry),
and the memory the agents need is estimated before a single one is built: a count the
machine cannot hold is refused with the estimate, not found out by the kernel.
"""

from __future__ import annotations

from pathlib import Path

from sopbus.bus import ConfigError, Scenario, did_you_mean
from sopbus.bus.population import AgentTable, drawn_table, estimate_bytes, table_from_file
from sopbus.bus.scenario import PopulationSpec, template_fields
from sopbus.roles import LLMSettings, Population, Registry, layered

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
    )


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
