"""``sopbus worker --bus URL [--jobs N] [--runs-dir DIR]``: execute sweep runs queued on NATS.

Takes the runs of every sweep started with ``sopbus sweep ... --bus URL`` from their work
queues, ``--jobs`` at a time, until stopped (Ctrl-C or SIGTERM: the runs going are
cancelled and their jobs given back to the queue). Run directories go to ``--runs-dir``
on this machine. See :mod:`bus.cli.sweep._queue`.
"""

from __future__ import annotations

import argparse

from ._args import path_arg, positive_int

NAME = "worker"
HELP = "execute runs of sweeps queued on a NATS server (sopbus sweep --bus URL)"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bus", metavar="URL", required=True,
                        help="the NATS server (with JetStream) the sweeps queue their runs on")
    parser.add_argument("--jobs", metavar="N", type=positive_int,
                        help="runs at a time (default: the cores)")
    parser.add_argument("--runs-dir", metavar="DIR", type=path_arg, default=path_arg("runs"),
                        help="where the run directories go (default: runs)")


def run(args: argparse.Namespace) -> int:
    import os

    import trio

    from bus import ConfigError
    from bus.nats import NatsUnavailable

    try:
        trio.run(_serve, args.bus, args.jobs or os.cpu_count() or 1, args.runs_dir)
    except NatsUnavailable as exc:
        raise ConfigError(str(exc)) from None
    return 0


async def _serve(url: str, jobs: int, runs_dir: object) -> None:
    import signal
    from pathlib import Path

    import trio

    from bus.cli._assemble import _configure_logging
    from bus.nats import open_link

    from .sweep._queue import serve_queue

    _configure_logging(quiet=False)
    stop = trio.Event()
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with open_link(url, name="sopbus worker") as link, trio.open_nursery() as nursery:
            async def on_signal() -> None:
                async for _ in signals:
                    stop.set()
                    return

            nursery.start_soon(on_signal)
            await serve_queue(link, jobs=jobs, runs_dir=Path(str(runs_dir)), stop=stop)
            nursery.cancel_scope.cancel()
