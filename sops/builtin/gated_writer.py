"""The gated writer: nothing reaches the reader unless it passed a verifiable gate.

``[sop]`` options (paths relative to the scenario file)::

    store = "data/gated_writer"                 # the story store (roles.gated._store)
    outlines = ["data/gated_writer/outline.toml"]  # confirmed chapter outlines: one sample each
    budget_chars = 6000       # evidence the planner may select per sample
    fact_share = 0.6          # of which facts (the rest: prose)
    max_requests = 3          # evidence requests the writer may make per sample (+30% budget)
    max_repairs = 2           # automatic repair rounds before a draft goes to the user
    stage_timeout_s = 120     # per model call
    checker = ["python", "my_check.py"]  # optional: another checking program (input.json appended)
    checker_timeout_s = 30
    model_check = false       # also ask the model for contradictions (findings must validate)

Roles: ``Planner``, ``Writer``, ``Gate``, ``Publisher`` (see :mod:`sopbus.roles.gated._writer`). The run
stops when every sample is delivered (with a receipt) or has gone to the user; a sample that
fails closed ends the run ``failed`` with its cause. The verdict: every sample passed the
gate and was delivered with its receipt.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import msgspec

from sopbus.bus import ConfigError, Message, RunRecord, StopCondition, Verdict
from sopbus.roles.gated import (
    CHECK,
    DELIVER,
    OUTLINE,
    ChapterGate,
    ChapterPublisher,
    ChapterWriter,
    EvidencePlanner,
    GateChapter,
    GatedSettings,
    GateOptions,
    PlanEvidence,
    WriteChapter,
    load_outline,
    load_store,
)

from .. import _sop
from .._sop import SopContext, Team

EDITOR = "Editor"


class GatedOptions(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    store: str
    outlines: list[str]
    budget_chars: int = 6000
    fact_share: float = 0.6
    max_requests: int = 3
    max_repairs: int = 2
    stage_timeout_s: float = 120.0
    checker: list[str] | None = None
    checker_timeout_s: float = 30.0
    model_check: bool = False


def build(ctx: SopContext) -> Team:
    o = ctx.options_as(GatedOptions)
    _check_limits(o, ctx)
    store = load_store(ctx.resolve(o.store))
    outlines = [load_outline(ctx.resolve(rel)) for rel in o.outlines]
    if not outlines or len({x.id for x in outlines}) != len(outlines):
        raise ConfigError(
            f"{ctx.scenario.path}: [sop].outlines must name at least one outline, "
            f"each with its own id"
        )
    settings = GatedSettings(
        store=store,
        budget_chars=o.budget_chars,
        fact_share=o.fact_share,
        max_requests=o.max_requests,
        max_repairs=o.max_repairs,
        stage_timeout_s=o.stage_timeout_s,
        gate=GateOptions(
            checker=tuple(o.checker) if o.checker else None,
            checker_timeout_s=o.checker_timeout_s,
            model_check=o.model_check,
        ),
    )
    d = ctx.llm_defaults
    team = [
        EvidencePlanner(name="Planner", actions=[PlanEvidence(settings)], llm_defaults=d),
        ChapterWriter(name="Writer", actions=[WriteChapter(settings)], llm_defaults=d),
        ChapterGate(name="Gate", actions=[GateChapter(settings)], llm_defaults=d),
        ChapterPublisher(name="Publisher", llm_defaults=d),
    ]
    seed = [
        Message(
            cause_by=OUTLINE,
            sent_from=EDITOR,
            content=x.render(),
            payload={"outline": msgspec.to_builtins(x)},
        )
        for x in outlines
    ]
    samples = {x.id for x in outlines}
    return Team(
        roles=list(team), seed=seed, stop=all_resolved(samples), verdict=gate_passed(samples)
    )


def gate_passed(samples: set[str]) -> Callable[[RunRecord], Verdict]:
    """The gated writer's verdict: every sample passed the gate and was delivered."""

    def judge(record: RunRecord) -> Verdict:
        delivered = {
            m.payload["sample"]
            for m in record.of(DELIVER)
            if isinstance(m.payload, dict) and m.payload.get("status") == "delivered"
        }
        missing = sorted(samples - delivered)
        if not missing:
            return Verdict(
                passed=True,
                reason=f"every sample passed the gate and was delivered "
                f"with a receipt ({', '.join(sorted(samples))})",
            )
        return Verdict(
            passed=False,
            reason=f"not delivered through the gate: {', '.join(missing)} "
            f"(the run ended: {record.end_reason})",
        )

    return judge


def all_resolved(samples: set[str]) -> StopCondition:
    """Stops when every sample is delivered or has gone to the user."""
    outcome: dict[str, str] = {}

    def stop(published: Sequence[Message], round: int) -> str | None:
        for m in published:
            p = m.payload if isinstance(m.payload, dict) else {}
            if m.cause_by == DELIVER and p.get("status") == "delivered":
                outcome[p["sample"]] = f"{p['sample']} delivered with receipt {p['receipt']}"
            elif m.cause_by == CHECK and p.get("verdict") == "needs_user":
                outcome[p["sample"]] = (
                    f"{p['sample']} went to the user without a receipt: {', '.join(p['errors'])}"
                )
        if samples <= outcome.keys():
            return "; ".join(outcome[s] for s in sorted(samples))
        return None

    return stop


def _check_limits(o: GatedOptions, ctx: SopContext) -> None:
    problems = [
        f"{name} must be > 0, got {value}"
        for name, value in (
            ("budget_chars", o.budget_chars),
            ("stage_timeout_s", o.stage_timeout_s),
            ("checker_timeout_s", o.checker_timeout_s),
        )
        if not value > 0
    ]
    problems += [
        f"{name} must be 0 or more, got {value}"
        for name, value in (("max_requests", o.max_requests), ("max_repairs", o.max_repairs))
        if value < 0
    ]
    if not 0 <= o.fact_share <= 1:
        problems.append(f"fact_share must be between 0 and 1, got {o.fact_share}")
    if problems:
        raise ConfigError(f"{ctx.scenario.path}: [sop]: {'; '.join(problems)}")


SOP = _sop.SOP(
    name="gated_writer",
    description="Gated writer: evidence within a budget, a writer without tools, a "
    "detector gate with bounded repairs, fail-closed receipts",
    build=build,
)
