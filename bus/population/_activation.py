"""Who acts in a round, and what a round of a population adds up to.

Activation: the agents with mail act; with ``active`` set, a seeded sample of that share
of them (at least one), drawn from the run's seed, the population's name and the round, so
a replay or a resume draws the same agents. The rest sleep and cost nothing.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any

HISTOGRAM_BINS = 10


def acting(
    mailed: Sequence[int], active: float | None, *, seed: int, name: str, round: int
) -> Sequence[int]:
    """The agents of ``mailed`` (ascending) that act this round, ascending."""
    if active is None or not mailed:
        return mailed
    k = max(1, round_half_up(active * len(mailed)))
    if k >= len(mailed):
        return mailed
    rng = random.Random(f"{seed}:{name}:round {round}")
    return sorted([mailed[j] for j in rng.sample(range(len(mailed)), k)])


def round_half_up(x: float) -> int:
    return math.floor(x + 0.5)


class RoundTally:
    """The sums of one round of a population's answers: counts, and the mean and the
    distribution (ten bins over ``low..high``) of one numeric field.

    Tallies of parts of a round (the shards of a population, each on its own worker) add
    up exactly with :meth:`merge`: counts, bins, least and greatest add as they are, and
    the sum is kept exact (Shewchuk's non-overlapping partials, as :func:`math.fsum`), so
    the mean of the merged tally is the mean of the whole round, whatever the split or the
    order the answers came in. :meth:`state` and :meth:`of_state` carry one over a wire."""

    __slots__ = (
        "acted",
        "bins",
        "failed",
        "high",
        "low",
        "max",
        "min",
        "partials",
        "valued",
        "woke",
    )

    def __init__(self, woke: int, low: float, high: float):
        self.woke, self.acted, self.failed, self.valued = woke, 0, 0, 0
        self.low, self.high = low, high
        self.partials: list[float] = []  # the exact sum of the values, as fsum keeps it
        self.min, self.max = math.inf, -math.inf
        self.bins = [0] * HISTOGRAM_BINS

    @property
    def total(self) -> float:
        """The sum of the values, correctly rounded."""
        return math.fsum(self.partials)

    def add(self, value: float | None, *, fitted: bool = True) -> None:
        """One agent's answer: ``fitted`` false when it did not fit the output schema;
        ``value`` its numeric field (``None``: it has none)."""
        if not fitted:
            self.failed += 1
            return
        self.acted += 1
        if value is None or not math.isfinite(value):  # an infinity has no mean: not summed
            return
        self.valued += 1
        _exact_add(self.partials, value)
        self.min = min(self.min, value)
        self.max = max(self.max, value)
        span = self.high - self.low
        j = int((value - self.low) / span * HISTOGRAM_BINS) if span > 0 else 0
        self.bins[min(max(j, 0), HISTOGRAM_BINS - 1)] += 1

    def merge(self, other: RoundTally) -> None:
        """Adds ``other`` (another part of the same round, with the same bins) to this one."""
        if (other.low, other.high) != (self.low, self.high):
            raise ValueError(
                f"cannot merge a tally over {other.low}..{other.high} into one over "
                f"{self.low}..{self.high}: the parts of a round share their bins"
            )
        self.woke += other.woke
        self.acted += other.acted
        self.failed += other.failed
        self.valued += other.valued
        for x in other.partials:
            _exact_add(self.partials, x)
        self.min = min(self.min, other.min)
        self.max = max(self.max, other.max)
        self.bins = [a + b for a, b in zip(self.bins, other.bins, strict=True)]

    def state(self) -> dict[str, Any]:
        """Everything the tally holds, as JSON-able values (:meth:`of_state` reads it)."""
        valued = self.valued > 0
        return {
            "woke": self.woke,
            "acted": self.acted,
            "failed": self.failed,
            "valued": self.valued,
            "partials": list(self.partials),
            "min": self.min if valued else None,
            "max": self.max if valued else None,
            "low": self.low,
            "high": self.high,
            "bins": list(self.bins),
        }

    @classmethod
    def of_state(cls, state: dict[str, Any]) -> RoundTally:
        tally = cls(int(state["woke"]), float(state["low"]), float(state["high"]))
        tally.acted, tally.failed = int(state["acted"]), int(state["failed"])
        tally.valued = int(state["valued"])
        tally.partials = [float(x) for x in state["partials"]]
        if tally.valued:
            tally.min, tally.max = float(state["min"]), float(state["max"])
        tally.bins = [int(n) for n in state["bins"]]
        return tally

    def as_dict(self, round: int) -> dict[str, Any]:
        mean = self.total / self.valued if self.valued else None
        return {
            "round": round,
            "woke": self.woke,
            "acted": self.acted,
            "failed": self.failed,
            "mean": None if mean is None else round_to(mean),
            "min": round_to(self.min) if self.valued else None,
            "max": round_to(self.max) if self.valued else None,
            "bins": {"low": self.low, "high": self.high, "counts": list(self.bins)},
        }


def _exact_add(partials: list[float], x: float) -> None:
    """Adds ``x`` to the exact sum that ``partials`` holds as non-overlapping floats
    (Shewchuk's algorithm, the recipe behind :func:`math.fsum`)."""
    i = 0
    for y in partials:
        if abs(x) < abs(y):
            x, y = y, x
        hi = x + y
        lo = y - (hi - x)
        if lo:
            partials[i] = lo
            i += 1
        x = hi
    partials[i:] = [x]


def round_to(x: float) -> float:
    return round(x, 4)
