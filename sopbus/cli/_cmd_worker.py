"""``sopbus worker --bus URL [--run RUN] [--roles A,B] [--jobs N] [--runs-dir DIR]``: work for
runs and sweeps coordinated over NATS.

A worker connects to the NATS server, finds the run (``--run``) or every run announced from
now on, builds the run's team from the scenario the coordinator stored (the same SOP, the
same settings, the files it names copied under ``--workdir``), claims the roles it may host
(``--roles``, else any), and takes their turns when the coordinator asks. The protocol is
in :mod:`sopbus.bus.nats._worker`. Ctrl-C or SIGTERM ends it cleanly: its claims are deleted, so
another worker can take its roles over at once.

Sweeps across machines: without ``--run``, the same worker also takes runs from the work
queue of every sweep started with ``sopbus sweep ... --bus URL``, ``--jobs`` at a time, and
keeps their run directories under ``--runs-dir`` (see :mod:`sopbus.sweep._queue`). Stopped,
it cancels those runs and gives their jobs back to the queue.
"""

from __future__ import annotations

import argparse
import os
import secrets
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._args import path_arg
from ._flags import BUS, JOBS, LEASE, RUNS_DIR, Flag, add

if TYPE_CHECKING:
    from sopbus.bus.nats import ScenarioPlan, WorkerTeam

NAME = "worker"
HELP = "host roles of runs (sopbus run --bus URL) and take sweep runs (sopbus sweep --bus URL) over NATS"


ROLES = Flag(
    "--roles", metavar="A,B", help="the roles this worker may host (comma-separated; default: any)"
)
ONE_RUN = Flag("--run", metavar="RUN", help="host roles of this run only, and exit when it ends")
WORKDIR = Flag(
    "--workdir",
    metavar="DIR",
    type=path_arg,
    default=path_arg(".sopbus-worker"),
    help="where runs' files and artifacts are mirrored (default: .sopbus-worker)",
)
SHARDS = Flag(
    "--shards",
    metavar="N",
    type=int,
    default=1,
    help="population shards this worker plays at once (default: 1, so workers share them)",
)
WORKER_ID = Flag(
    "--id",
    dest="worker_id",
    metavar="NAME",
    help="this worker's name in claims (default: host-pid-random)",
)


def configure(parser: argparse.ArgumentParser) -> None:
    bus = BUS.but(
        required=True,
        help="the NATS server of the runs (nats://HOST:PORT, 2.10+ with JetStream)",
    )
    lease = LEASE.but(default=10.0, help="how long a claim outlives a silent worker (default: 10)")
    jobs = JOBS.but(help="sweep runs taken from the work queues at once (default: the cores)")
    runs_dir = RUNS_DIR.but(help="where the directories of sweep runs go (default: runs)")
    add(parser, bus, ONE_RUN, ROLES, WORKDIR, lease, jobs, runs_dir, WORKER_ID, SHARDS)


def run(args: argparse.Namespace) -> int:
    import trio

    from sopbus._assemble import configure_logging, probe
    from sopbus.bus import ConfigError
    from sopbus.bus.nats import WorkerOptions

    configure_logging(quiet=False)
    trio.run(probe, args.bus)  # an unreachable server: exit 2 with what to do
    roles = frozenset(r.strip() for r in args.roles.split(",") if r.strip()) if args.roles else None
    worker_id = args.worker_id or f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(2)}"
    if args.shards < 1:
        raise ConfigError(
            f"--shards {args.shards}: a worker plays 1 shard or more; give --shards 1"
        )
    options = WorkerOptions(
        worker_id=worker_id,
        roles=roles,
        workdir=args.workdir.resolve(),
        lease_s=args.lease,
        shards=args.shards,
    )
    try:
        jobs = args.jobs or os.cpu_count() or 1
        trio.run(_serve, args.bus, args.run, options, jobs, Path(args.runs_dir))
    except BaseExceptionGroup as group:  # a user's mistake as itself, for its message and exit 2
        if len(group.exceptions) == 1 and isinstance(group.exceptions[0], ConfigError):
            raise group.exceptions[0] from None
        raise
    return 0


async def _serve(url: str, run_id: str | None, options: object, jobs: int, runs_dir: Path) -> None:
    import signal
    from functools import partial

    import trio

    from sopbus.bus.nats import WorkerOptions, open_link, serve
    from sopbus.sweep import serve_queue

    assert isinstance(options, WorkerOptions)
    # SIGTERM ends the worker as Ctrl-C does: its claims are released on the way out.
    with trio.open_signal_receiver(signal.SIGTERM) as signals:
        async with (
            open_link(url, name=f"sopbus worker {options.worker_id}") as link,
            trio.open_nursery() as nursery,
        ):

            async def on_term() -> None:
                async for _ in signals:
                    nursery.cancel_scope.cancel()

            async def work() -> None:
                await serve(link, build_team, options, run_id=run_id)
                nursery.cancel_scope.cancel()

            nursery.start_soon(on_term)
            nursery.start_soon(work)
            if run_id is None:  # a worker for one run does not take sweep runs
                nursery.start_soon(partial(serve_queue, link, jobs=jobs, runs_dir=runs_dir))


def build_team(plan: ScenarioPlan, workdir: Path) -> WorkerTeam:
    """The run's team, provider and prices, built from its plan as the coordinator built
    them: the files the scenario names are written under ``workdir`` and named there."""
    from sopbus._assemble import (
        check_named,
        checked_prices,
        in_workspace,
        make_provider,
        opened_tools,
        run_environ,
        run_secrets,
        with_people,
        with_whole_url,
        worker_shards,
    )
    from sopbus.bus import load_scenario
    from sopbus.bus.nats import WorkerTeam

    text = plan.text
    files = workdir / "files"
    for i, (original, data) in enumerate(sorted(plan.files.items())):
        local = files / f"{i}-{Path(original).name}"
        local.parent.mkdir(parents=True, exist_ok=True)
        local.write_bytes(data)
        text = text.replace(original, str(local))
    (workdir / "scenario.toml").write_text(text)
    scenario = load_scenario(workdir / "scenario.toml")
    from sopbus.sops import build_team as build

    team = build(scenario)
    check_named(scenario, team)
    prices = checked_prices(scenario, [*team.roles, *team.populations])
    shards = worker_shards(scenario, team.populations)  # the split populations' shards
    # A blanked base URL is made whole from the user's scenario file, if this machine has it.
    environ: Mapping[str, str] = run_environ()
    if plan.origin:
        environ = with_whole_url(environ, scenario, Path(plan.origin))
    provider = with_people(make_provider(scenario, environ), team.roles, None, required=False)
    return WorkerTeam(
        roles=[*team.roles, *shards],
        provider=provider,
        prices=prices,
        cap=scenario.run.budget_usd,
        max_attempts=scenario.llm.max_attempts,
        build_again=lambda: _members(build(scenario), scenario),
        shards={s.name: s.address for s in shards},
        secrets=run_secrets(scenario, environ),
        # MCP servers run in the workspace the SOP makes here, as the coordinator's do there.
        tools=lambda: opened_tools(
            in_workspace(scenario, team, workdir, live=True), team, live=True
        ),
    )


def _members(team: Any, scenario: Any) -> list[Any]:
    """A freshly built team's roles and shards (a shard's new host starts from these)."""
    from sopbus._assemble import worker_shards

    return [*team.roles, *worker_shards(scenario, team.populations)]
