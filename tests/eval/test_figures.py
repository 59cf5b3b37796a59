"""The figures: pass@k against a brute-force count over every k-subset of the samples,
the Wilson interval against known values, the score/cost front."""

from __future__ import annotations

import itertools
import math
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sopbus.eval import TaskResult, pass_at_k, wilson
from sopbus.eval._figures import front, scenario_figures


def brute_pass_at_k(n: int, c: int, k: int) -> float:
    """The share of the k-subsets of n samples (c of them correct) holding a correct one."""
    samples = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    return sum(any(samples[i] for i in s) for s in subsets) / len(subsets)


@given(
    st.integers(1, 9).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(1, n)))
)
def test_pass_at_k_is_the_subset_count(case: tuple[int, int, int]) -> None:
    n, c, k = case
    assert pass_at_k(n, c, k) == pytest.approx(brute_pass_at_k(n, c, k), abs=1e-12)


def test_wilson_matches_known_intervals() -> None:
    low, high = wilson(8, 10)
    assert (round(low, 4), round(high, 4)) == (0.4902, 0.9433)
    assert wilson(0, 10)[0] == 0.0
    assert wilson(10, 10)[1] == pytest.approx(1.0)
    assert wilson(0, 0) == (0.0, 1.0)


def _r(task: str, epoch: int, kind: str, usd: str = "0.01") -> TaskResult:
    return TaskResult(
        scenario="s", task_id=task, epoch=epoch, kind=kind,  # type: ignore[arg-type]
        passed=kind == "passed", usd=Decimal(usd), prompt_tokens=10, completion_tokens=5,
    )  # fmt: skip


def test_unreached_tasks_are_counted_not_scored() -> None:
    results = [_r("a", 0, "passed"), _r("b", 0, "wrong"), _r("c", 0, "not_run", "0")]
    figures = scenario_figures(results, tasks=3, epochs=1)
    assert (figures["covered"], figures["tasks"]) == (2, 3)
    assert figures["pass_at_1"] == 0.5
    assert figures["kinds"]["not_run"] == 1 and figures["kinds"]["wrong"] == 1
    assert figures["usd_per_solved"] == Decimal("0.02")
    assert figures["usd_per_task"] == Decimal("0.01")
    assert figures["tokens_per_task"] == 15


def test_pass_at_k_over_epochs() -> None:
    results = [_r("a", 0, "passed"), _r("a", 1, "wrong"), _r("b", 0, "wrong"), _r("b", 1, "wrong")]
    figures = scenario_figures(results, tasks=2, epochs=2)
    assert figures["pass_at_1"] == pytest.approx(0.25)
    assert figures["pass_at_2"] == pytest.approx(0.5)
    assert math.isclose(figures["pass_at_1_high"], wilson(1, 2)[1])


def test_the_front_of_score_against_cost() -> None:
    rows = [
        {"scenario": "cheap", "pass_at_1": 0.5, "usd_per_task": Decimal("0.01")},
        {"scenario": "good", "pass_at_1": 0.9, "usd_per_task": Decimal("0.10")},
        {"scenario": "worse", "pass_at_1": 0.4, "usd_per_task": Decimal("0.05")},
    ]
    assert front(rows) == {"cheap", "good"}
