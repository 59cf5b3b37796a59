"""``--bus nats://HOST:PORT`` for ``sopbus run`` and ``sopbus resume``: the team over NATS.

Without ``--bus`` nothing changes (:func:`coordinated` yields a :class:`Remote` that adds
nothing). With it, the run's coordinator (:mod:`sopbus.bus.nats._remote`) puts the run's messages
on its stream, stores the scenario for workers, waits up to ``--wait-workers`` seconds for
``sopbus worker`` processes to claim roles, and runs the claimed roles as proxies; the run
directory is written here, as always. A server that cannot be reached is a usage error
(exit 2), said before the run directory is made.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sopbus.bus import ConfigError

if TYPE_CHECKING:
    from sopbus.bus import Member
    from sopbus.bus.llm import CallLog, Gateway
    from sopbus.bus.money import AccountShare
    from sopbus.bus.nats import Coordinator
    from sopbus.bus.scenario import Scenario
    from sopbus.bus.store import Continuation, InFlight, RunStore

WAIT_S = 10.0


@dataclass(frozen=True)
class BusOptions:
    """Where the NATS server is, how long to wait for workers, which roles must be remote."""

    url: str
    wait_s: float = WAIT_S
    remote: frozenset[str] = frozenset()


async def probe(url: str) -> None:
    from sopbus.bus.nats import NatsUnavailable, open_link

    try:
        async with open_link(url, name="sopbus probe"):
            pass
    except NatsUnavailable as exc:
        raise ConfigError(str(exc)) from None


class Remote:
    """What a run over NATS adds to the plain run (nothing without ``--bus``)."""

    def __init__(
        self,
        coordinator: Coordinator | None = None,
        pool: AccountShare | None = None,
        continuation: Continuation | None = None,
    ):
        self.coordinator, self.continuation = coordinator, continuation
        self.pool = pool
        self.log = coordinator.log if coordinator is not None else None
        # Calls in flight when the coordinator died whose answers were on the stream: taken
        # in by members(), so the resume does not count them lost.
        self.adopted: tuple[InFlight, ...] = ()

    async def members(
        self,
        roles: list[Any],
        gateway: Gateway,
        journal: CallLog,
        populations: Sequence[Any] = (),
        shards: Mapping[str, int] | None = None,
    ) -> list[Member]:
        """The team as the Environment gets it: hosted roles as proxies (waits for claims);
        the populations that ``shards`` splits play their rounds on the workers."""
        if self.coordinator is None:
            return roles
        self.coordinator.books_into(gateway, journal)
        if self.continuation is not None and self.continuation.resume:
            from sopbus.bus.llm import read_calls

            self.adopted = await self.coordinator.adopt(
                read_calls(self.continuation.run_dir), self.continuation.lost
            )
            await self.coordinator.rebase(gateway.budget.spent)
        if shards:
            from ._shards import hosted_shards

            return await hosted_shards(self.coordinator, roles, populations, shards)
        return await self.coordinator.members(roles)


@asynccontextmanager
async def coordinated(
    bus: BusOptions | None,
    scenario: Scenario,
    as_run: str,
    store: RunStore,
    continuation: Continuation | None = None,
) -> AsyncIterator[Remote]:
    """The run over NATS for the block: ``as_run`` is the scenario as run (TOML), which the
    workers build the team from (a resume: ``continuation``)."""
    if bus is None:
        yield Remote()
        return
    from sopbus.bus.nats import coordinating, plan_of

    files = [*scenario.fixture_paths(), *filter(None, [scenario.cassette_path()])]
    plan = plan_of(as_run, files, scenario.run.seed, origin=str(scenario.path))
    async with coordinating(
        bus.url,
        store,
        plan,
        cap=scenario.run.budget_usd,
        wait_s=bus.wait_s,
        remote=bus.remote,
        epoch=continuation.resume if continuation else 0,
    ) as coordinator:
        yield Remote(coordinator, coordinator.pool, continuation)
