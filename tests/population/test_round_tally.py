"""A round's tally split into parts (the shards of a population) and merged again is the
tally of the whole round: counts, bins, least, greatest and the sum exactly, whatever the
split, the order the answers came in, or the trip over a wire."""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Sequence

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sopbus.bus.population import HISTOGRAM_BINS, RoundTally

LOW, HIGH = 0.0, 100.0

answer = st.one_of(
    st.none(),  # an answer without the field
    st.just("unfit"),  # an answer that did not fit the schema
    st.floats(-1e6, 1e6, allow_nan=False),
    st.integers(0, 100).map(float),
)


def tallied(answers: Sequence[float | str | None]) -> RoundTally:
    tally = RoundTally(len(answers), LOW, HIGH)
    for a in answers:
        if a == "unfit":
            tally.add(None, fitted=False)
        else:
            assert not isinstance(a, str)
            tally.add(a)
    return tally


def everything(tally: RoundTally) -> tuple[object, ...]:
    return (tally.as_dict(1), tally.total, tally.valued, tally.min, tally.max)


@given(st.lists(answer, max_size=60), st.lists(st.integers(0, 60), max_size=5), st.randoms())
def test_merged_parts_are_the_whole(
    answers: list[float | str | None], cuts: list[int], rng: random.Random
) -> None:
    bounds = sorted({min(c, len(answers)) for c in cuts} | {0, len(answers)})
    parts = [tallied(answers[a:b]) for a, b in itertools.pairwise(bounds)]
    rng.shuffle(parts)
    merged = RoundTally(0, LOW, HIGH)
    for part in parts:
        merged.merge(RoundTally.of_state(msgspec.json.decode(msgspec.json.encode(part.state()))))
    whole = tallied(answers)
    assert everything(merged) == everything(whole)
    assert sum(merged.bins) == whole.valued


@given(st.lists(st.floats(-1e300, 1e300, allow_nan=False), max_size=40), st.randoms())
def test_the_sum_is_exact_in_any_order(values: list[float], rng: random.Random) -> None:
    shuffled = list(values)
    rng.shuffle(shuffled)
    assert tallied(shuffled).total == math.fsum(values) == tallied(list(values)).total


def test_a_merge_of_other_bins_is_refused() -> None:
    with pytest.raises(ValueError, match="share their bins"):
        RoundTally(1, 0, 100).merge(RoundTally(1, 0, 10))


def test_an_empty_part_changes_nothing() -> None:
    tally = tallied([3.0, 97.0, None])
    tally.merge(RoundTally(0, LOW, HIGH))
    assert tally.as_dict(2)["mean"] == 50.0 and tally.bins[0] == 1
    assert tally.bins[HISTOGRAM_BINS - 1] == 1 and tally.acted == 3
