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
    distribution (ten bins over ``low..high``) of one numeric field."""

    __slots__ = ("acted", "bins", "failed", "high", "low", "max", "min", "total", "valued", "woke")

    def __init__(self, woke: int, low: float, high: float):
        self.woke, self.acted, self.failed, self.valued = woke, 0, 0, 0
        self.low, self.high = low, high
        self.total = 0.0
        self.min, self.max = math.inf, -math.inf
        self.bins = [0] * HISTOGRAM_BINS

    def add(self, value: float | None, *, fitted: bool = True) -> None:
        """One agent's answer: ``fitted`` false when it did not fit the output schema;
        ``value`` its numeric field (``None``: it has none)."""
        if not fitted:
            self.failed += 1
            return
        self.acted += 1
        if value is None:
            return
        self.valued += 1
        self.total += value
        self.min = min(self.min, value)
        self.max = max(self.max, value)
        span = self.high - self.low
        j = int((value - self.low) / span * HISTOGRAM_BINS) if span > 0 else 0
        self.bins[min(max(j, 0), HISTOGRAM_BINS - 1)] += 1

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


def round_to(x: float) -> float:
    return round(x, 4)
