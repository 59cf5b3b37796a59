"""The ``--bus``, ``--wait-workers`` and ``--remote`` flags of ``sopbus run`` and ``sopbus
resume`` (:data:`._flags.BUS_FLAGS`), read into :class:`sopbus._assemble._bus.BusOptions`."""

from __future__ import annotations

import argparse

from sopbus._assemble import WAIT_S, BusOptions
from sopbus.bus import ConfigError


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
