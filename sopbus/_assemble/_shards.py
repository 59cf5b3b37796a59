"""A population's shards on ``sopbus worker`` processes (``[[populations]] shards = N`` with
``--bus``): which members the workers host, and the rounds the population plays on them.

The population stays one member of the coordinator's Environment: it gets the round's news
and publishes the round's one message. Each round it asks every shard (a remote role,
:class:`sopbus.bus.nats.Coordinator`) for its range of agents at once, and merges their
tallies; a shard that fails or loses its worker for good fails the run as a remote role
does (docs/nats.md, "Population shards").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import trio

from sopbus.bus import ConfigError, Message, Turn, exception_leaves
from sopbus.bus.population import RoundTally
from sopbus.bus.scenario import Scenario
from sopbus.roles import Population, PopulationShard, population_shards, shard_tally


def shard_counts(scenario: Scenario) -> dict[str, int]:
    """Population name -> its shards, for those split in more than one."""
    return {p.name: p.shards for p in scenario.populations if p.shards > 1}


def refuse_shards_in_one_process(scenario: Scenario) -> None:
    """Shards are played by workers: a new run of a split population needs ``--bus``."""
    for i, spec in enumerate(scenario.populations):
        if spec.shards > 1:
            raise ConfigError(
                f"{scenario.path}: $.populations[{i}].shards: {spec.shards} shards of "
                f"{spec.name} are played by `sopbus worker` processes over NATS; give "
                f"--bus nats://HOST:PORT (and start the workers), or leave shards out to "
                f"play every agent in this process"
            )


def worker_shards(scenario: Scenario, populations: Sequence[Population]) -> list[PopulationShard]:
    """The shards a worker may host, built from the team it built (the same seed: agent
    ``i`` of a shard is agent ``i`` of the run)."""
    return population_shards(populations, shard_counts(scenario))


class RemoteShards:
    """Plays a population's rounds on its shards' workers (:class:`sopbus.roles.Shards`)."""

    def __init__(self, coordinator: Any, proxies: Sequence[Any], bounds: tuple[float, float]):
        self.coordinator, self.proxies, self.bounds = coordinator, list(proxies), bounds

    async def play(self, news: Sequence[Message], turn: Turn) -> tuple[RoundTally, str | None]:
        answers: dict[str, Sequence[Message]] = {}

        async def ask(proxy: Any) -> None:
            answers[proxy.name] = await self.coordinator.ask(proxy, news, turn.round)

        try:
            async with trio.open_nursery() as nursery:
                for proxy in self.proxies:
                    nursery.start_soon(ask, proxy)
        except BaseExceptionGroup as group:  # the first shard's failure, as a role's would be
            raise next(exception_leaves(group)) from None
        merged, stopped = RoundTally(0, *self.bounds), None
        for proxy in self.proxies:  # in shard order, so the refusal said is the same each time
            tally, refused = shard_tally(answers[proxy.name], proxy.name)
            if tally is not None:
                merged.merge(tally)
            stopped = stopped or refused
        return merged, stopped


async def hosted_shards(
    coordinator: Any,
    roles: list[Any],
    populations: Sequence[Population],
    counts: Mapping[str, int],
) -> list[Any]:
    """Waits for the workers' claims on ``roles`` and every shard of the split populations;
    gives each such population its :class:`RemoteShards`; returns the roles as members."""
    shards = population_shards(populations, dict(counts))
    names = frozenset(s.name for s in shards)
    members = await coordinator.members(
        [*roles, *shards], required=names, addresses={s.name: s.address for s in shards}
    )
    proxies = {m.name: m for m in members if m.name in names}
    for population in populations:
        if population.name in counts:
            mine = [proxies[s.name] for s in shards if s.address == population.name]
            population.elsewhere = RemoteShards(coordinator, mine, population.bounds)
    return [m for m in members if m.name not in names]
