"""The ``--bus``, ``--wait-workers`` and ``--remote`` flags of ``sopbus run`` and ``sopbus
resume``, read into :class:`sopbus._assemble._bus.BusOptions`."""

from __future__ import annotations

import argparse

from sopbus._assemble import WAIT_S, BusOptions
from sopbus.bus import ConfigError


def add_bus_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bus",
        metavar="URL",
        help="run over NATS JetStream (nats://HOST:PORT, server 2.10+ with -js): "
        "roles claimed by `sopbus worker` processes run there",
    )
    parser.add_argument(
        "--wait-workers",
        metavar="SECONDS",
        type=float,
        default=WAIT_S,
        help=f"with --bus: how long to wait for workers to claim roles (default "
        f"{WAIT_S:g}; the wait ends early once claims stop coming)",
    )
    parser.add_argument(
        "--remote",
        metavar="ROLES",
        help="with --bus: roles that must run on workers (comma-separated); the "
        "run waits for their claims and fails if they do not come",
    )


def bus_options(args: argparse.Namespace) -> BusOptions | None:
    """The ``--bus`` options given, the server checked; ``None`` without ``--bus``."""
    url = getattr(args, "bus", None)
    if not url:
        if getattr(args, "remote", None):
            raise ConfigError("--remote needs --bus URL")
        return None
    remote = frozenset(
        r.strip() for r in (getattr(args, "remote", None) or "").split(",") if r.strip()
    )
    import trio

    from sopbus._assemble import probe

    trio.run(probe, url)
    return BusOptions(url=url, wait_s=float(getattr(args, "wait_workers", WAIT_S)), remote=remote)
