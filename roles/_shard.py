"""A population's shard: one range of its agents, taken as a role on a ``sopbus worker``.

A population split into ``shards`` (docs/nats.md, "Population shards") keeps its member on
the run's coordinator; each shard is hosted like a remote role: it reads the population's
news (its own durable inbox on the run's stream, the population's address), plays the
round for its range of agents through the worker's gateway (every call reserved against the
run's one account), and answers one message, its round's tally as data, which the
population merges into the one message it publishes.
"""

from __future__ import annotations

from collections.abc import Sequence

from sopbus.bus import Message, Turn
from sopbus.bus.population import RoundTally

from ._population import Population

SHARD_TALLY = "ShardTally"
"""The ``cause_by`` of a shard's answer: its round's tally, never published on the bus."""


def shard_name(population: str, k: int) -> str:
    """Shard ``k``'s name as a worker claims it (``Player_shard0``)."""
    return f"{population}_shard{k}"


def shard_range(count: int, k: int, shards: int) -> range:
    """The agents of shard ``k`` of ``shards``: consecutive, sizes differing by one at most."""
    return range(k * count // shards, (k + 1) * count // shards)


class PopulationShard:
    """Shard ``k`` of ``shards`` of ``population``, a member a worker hosts."""

    def __init__(self, population: Population, k: int, shards: int):
        self.population = population.part_of(shard_range(population.size, k, shards))
        self.name = shard_name(population.name, k)
        self.address = population.name  # its news is the population's: to.Player, act.*

    @property
    def aliases(self) -> tuple[str, ...]:
        return ()

    @property
    def watch(self) -> frozenset[str]:
        return self.population.watch

    async def step(self, news: Sequence[Message], turn: Turn) -> Sequence[Message]:
        tally, stopped = await self.population.play(news, turn)
        return [
            Message(
                cause_by=SHARD_TALLY,
                sent_from=self.name,
                payload={"tally": None if tally is None else tally.state(), "stopped": stopped},
            )
        ]


def shard_tally(messages: Sequence[Message], shard: str) -> tuple[RoundTally | None, str | None]:
    """What shard ``shard``'s answer says: its tally (``None``: none of its agents acted)
    and the cap's refusal, if it stopped them."""
    found = [m for m in messages if m.cause_by == SHARD_TALLY and isinstance(m.payload, dict)]
    if len(found) != 1:
        raise ValueError(
            f"shard {shard} answered {len(messages)} message(s) and no single {SHARD_TALLY}: "
            f"is the worker running another version of sopbus?"
        )
    payload = found[0].payload
    state, stopped = payload.get("tally"), payload.get("stopped")
    return (None if state is None else RoundTally.of_state(state)), stopped or None


def population_shards(
    populations: Sequence[Population], counts: dict[str, int]
) -> list[PopulationShard]:
    """The shards of every population that ``counts`` splits (its name -> shards > 1)."""
    return [
        PopulationShard(p, k, counts[p.name])
        for p in populations
        if counts.get(p.name, 1) > 1
        for k in range(counts[p.name])
    ]
