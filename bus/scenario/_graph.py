"""``[graph]``: who follows whom, among a team's roles or a population's agents.

One spec for both: a team's ``[graph]`` table and a population's ``graph = {...}`` name a
seeded generator or a file the same way (``sopbus.bus.graph`` builds it).
"""

from __future__ import annotations

import msgspec


class GraphSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[graph]``: who follows whom among the team's roles, from a seeded ``generator``
    (``random`` with ``degree``, ``small_world`` with ``k`` and ``p``, ``preferential``
    with ``m``) or a ``file`` (CSV ``follower,followee`` or JSON lines, by role name).
    ``members`` are the roles it is over (default: every role, in the team's order). A
    role that follows another watches the actions that role takes, from it only."""

    generator: str | None = None
    file: str | None = None
    members: tuple[str, ...] | None = None
    degree: int | None = None
    k: int | None = None
    p: float | None = None
    m: int | None = None
    seed: int = 0
