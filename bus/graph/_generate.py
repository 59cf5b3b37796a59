"""Follower graphs from a seed: uniform random, small-world and preferential attachment.

Each generator is reproducible (``random.Random(seed)``, nothing else), directed (an edge
``a -> b``: ``a`` follows ``b``), without self-follows or repeated edges, and builds its
followees index directly in node order, so a million nodes cost a few seconds and no
per-edge Python object survives the build.
"""

from __future__ import annotations

import random
from array import array
from collections.abc import Callable
from typing import Any

from .._errors import ConfigError
from ._csr import FollowGraph, fixed_degree


def random_graph(n: int, degree: int, *, seed: int = 0) -> FollowGraph:
    """Each node follows ``degree`` distinct others, chosen uniformly: every out-degree is
    ``degree`` (so is the mean), in-degrees are binomial (about Poisson(``degree``))."""
    _check(n, degree, "degree", most=n - 1)
    rng = random.Random(seed)
    if degree == 0:
        return fixed_degree(n, 0, array("i"))
    # Draws over the n - 1 others (j >= i stands for j + 1), all at once: a node whose
    # draws repeat (rare unless degree is near n) is drawn again without replacement.
    drawn = rng.choices(range(n - 1), k=n * degree)
    out = array("i", bytes(4 * n * degree))
    for i in range(n):
        lo = i * degree
        picks = drawn[lo : lo + degree]
        if len(set(picks)) < degree:
            picks = rng.sample(range(n - 1), degree)
        out[lo : lo + degree] = array("i", [j + (j >= i) for j in picks])
    return fixed_degree(n, degree, out)


def small_world(n: int, k: int, p: float, *, seed: int = 0) -> FollowGraph:
    """Watts-Strogatz: on a ring, each node follows its ``k`` nearest neighbours (``k // 2``
    on each side; ``k`` even), then each of those edges is rewired with probability ``p``
    to a uniform node it does not follow yet (never itself). ``p = 0`` is the ring lattice,
    ``p = 1`` close to a random graph; in between: high clustering, short paths."""
    _check(n, k, "k", most=n - 1)
    if k % 2:
        raise ConfigError(f"small_world needs an even k (neighbours on both sides), got {k}")
    if not 0.0 <= p <= 1.0:
        raise ConfigError(f"small_world needs a rewiring probability p in [0, 1], got {p}")
    rng = random.Random(seed)
    half = k // 2
    ring = list(range(1, half + 1)) + [-d for d in range(1, half + 1)]
    out = array("i", bytes(4 * n * k))
    for i in range(n):
        mine = [(i + d) % n for d in ring]
        if p:
            _rewire(mine, i, n, p, rng)
        out[i * k : i * k + k] = array("i", mine)
    return fixed_degree(n, k, out)


def _rewire(mine: list[int], i: int, n: int, p: float, rng: random.Random) -> None:
    taken = set(mine)
    if len(taken) >= n - 1:  # it follows everyone already: no edge can move
        return
    for slot, old in enumerate(mine):
        if rng.random() < p:
            new = rng.randrange(n)
            while new == i or new in taken:
                new = rng.randrange(n)
            taken.discard(old)
            taken.add(new)
            mine[slot] = new


def preferential(n: int, m: int, *, seed: int = 0) -> FollowGraph:
    """Barabasi-Albert: nodes arrive one by one; each new node follows ``m`` distinct
    earlier nodes, chosen with probability proportional to their degree (in and out), so
    early, well-followed nodes gather followers (a power-law in-degree). The first ``m``
    nodes follow nobody; node ``m`` follows all of them (as networkx starts)."""
    _check(n, m, "m", most=n - 1)
    rng = random.Random(seed)
    if m == 0:
        return fixed_degree(n, 0, array("i"))
    # Every edge puts both its ends in `ends`: a uniform pick from it is a pick by degree.
    ends = array("i")
    off = array("q", [0] * (m + 1))
    out = array("i")
    targets = list(range(m))
    for new in range(m, n):
        out.extend(targets)
        off.append(len(out))
        ends.extend(targets)
        ends.extend([new] * m)
        chosen: set[int] = set()
        while len(chosen) < m:
            chosen.add(ends[int(rng.random() * len(ends))])
        targets = sorted(chosen)
    return FollowGraph(n, off, out)


def _check(n: int, degree: int, field: str, *, most: int) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ConfigError(f"a graph needs n >= 1 nodes, got {n!r}")
    if isinstance(degree, bool) or not isinstance(degree, int) or not 0 <= degree <= max(most, 0):
        raise ConfigError(
            f"{field} must be a whole number from 0 to {max(most, 0)} (the other nodes) "
            f"for {n} nodes, got {degree!r}"
        )


Generator = Callable[..., FollowGraph]

GENERATORS: dict[str, Generator] = {
    "random": random_graph,
    "small_world": small_world,
    "preferential": preferential,
}
"""The generators by the name a scenario's ``[graph] generator`` gives."""


PARAMETERS: dict[str, tuple[str, ...]] = {
    "random": ("degree",),
    "small_world": ("k", "p"),
    "preferential": ("m",),
}
"""What each generator takes besides ``n`` and ``seed``."""


def generate(name: str, n: int, *, seed: int = 0, **params: Any) -> FollowGraph:
    """The graph generator ``name`` builds over ``n`` nodes with ``params``
    (``random``: ``degree``; ``small_world``: ``k``, ``p``; ``preferential``: ``m``)."""
    from .._util import did_you_mean

    if name not in GENERATORS:
        raise ConfigError(
            f"unknown graph generator {name!r}; expected one of {', '.join(GENERATORS)}"
            f"{did_you_mean(name, GENERATORS)}"
        )
    wanted = PARAMETERS[name]
    if set(params) != set(wanted):
        missing = [p for p in wanted if p not in params]
        extra = [p for p in params if p not in wanted]
        raise ConfigError(
            f"graph generator {name!r} takes {', '.join(wanted)}"
            + (f"; missing {', '.join(missing)}" if missing else "")
            + (f"; unknown {', '.join(extra)}" if extra else "")
        )
    return GENERATORS[name](n, **params, seed=seed)
