"""Fail-closed: how a gated step turns anything unverifiable into a failed sample.

A gated step never guesses its way past a problem. A timeout, a checker's non-zero exit, an
answer that does not fit its schema, the budget, an answer from a model other than the one
configured, an invalid detector report or a receipt that does not verify each become a
:class:`SampleFailed`: the step writes a ``sample_failed`` event (sample, cause, detail) and
``<sample>/failed.json``, and the run ends ``failed`` with the cause in its summary. There
is no retry on another model and no skipped step; the budget keeps its own end reason
(``budget_exhausted``) with the cause in its detail.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Literal, TypeVar, get_args

import pydantic
import trio
from pydantic import BaseModel

from sopbus.bus import (
    BudgetExhausted,
    ChatMessage,
    Completion,
    LLMRequest,
    ProviderError,
    SopbusError,
)

from .._action import ActionContext
from .._llm import build_request, unfence
from .._prompt import describe_validation_error

M = TypeVar("M", bound=BaseModel)

Cause = Literal[
    "timeout",
    "nonzero_exit",
    "schema_violation",
    "budget",
    "model_mismatch",
    "invalid_detector_report",
    "provider_error",
    "receipt_invalid",
]
CAUSES: tuple[Cause, ...] = get_args(Cause)  # the Literal's values, in its order
FAILED_EVENT = "sample_failed"


class Closed(Exception):
    """Raised inside a gated step: this sample cannot go on (turned into :class:`SampleFailed`)."""

    def __init__(self, cause: Cause, detail: str):
        super().__init__(f"{cause}: {detail}")
        self.cause, self.detail = cause, detail


class SampleFailed(SopbusError):
    """A sample failed closed; the run ends ``failed`` with this message as its error."""

    def __init__(self, sample: str, cause: Cause, detail: str):
        super().__init__(f"sample {sample} failed closed (cause={cause}): {detail}")
        self.sample, self.cause, self.detail = sample, cause, detail


@asynccontextmanager
async def fail_closed(ctx: ActionContext, sample: str) -> AsyncIterator[None]:
    """Records a :class:`Closed` (or the budget running out) inside the block as the
    sample's failure, then ends the run (see the module docstring)."""
    try:
        yield
    except Closed as closed:
        _record(ctx, sample, closed.cause, closed.detail)
        raise SampleFailed(sample, closed.cause, closed.detail) from None
    except BudgetExhausted as exc:
        _record(ctx, sample, "budget", str(exc))
        raise BudgetExhausted(f"sample {sample} failed closed (cause=budget): {exc}") from exc


def _record(ctx: ActionContext, sample: str, cause: Cause, detail: str) -> None:
    ctx.turn.emit(FAILED_EVENT, sample=sample, cause=cause, detail=detail)
    record = {
        "sample": sample,
        "status": "failed",
        "cause": cause,
        "detail": detail,
        "role": ctx.role.name,
        "round": ctx.turn.round,
    }
    ctx.turn.write_artifact(
        f"{sample}/failed.json", json.dumps(record, indent=2, sort_keys=True) + "\n"
    )


async def ask_strict(
    ctx: ActionContext,
    messages: Sequence[ChatMessage],
    *,
    output: type[M],
    action: str,
    timeout_s: float,
    subject: str = "",
) -> M:
    """One call, no repairs: the answer of the configured model, fitting ``output``, within
    ``timeout_s``; anything else raises :class:`Closed` with its cause. ``subject`` (the
    sample) names the call in the ledger."""
    request = build_request(
        messages, output=output, llm=ctx.llm, action=action, role=ctx.role.name, subject=subject
    )
    completion = await _ask(ctx, request, timeout_s)
    if not same_model(completion.model, request.model):
        raise Closed(
            "model_mismatch",
            f"{action} asked for model {request.model!r} but the "
            f"answer came from {completion.model!r}; not used",
        )
    try:
        return output.model_validate_json(unfence(completion.text))
    except pydantic.ValidationError as exc:
        raise Closed(
            "schema_violation",
            f"{action}: the answer does not fit "
            f"{output.__name__}: {describe_validation_error(exc)}",
        ) from None


async def _ask(ctx: ActionContext, request: LLMRequest, timeout_s: float) -> Completion:
    try:
        with trio.fail_after(timeout_s):
            return await ctx.turn.ask(request)
    except trio.TooSlowError:
        raise Closed(
            "timeout",
            f"{request.action} got no answer within {timeout_s} s ([sop].stage_timeout_s)",
        ) from None
    except BudgetExhausted:
        raise  # a ProviderOverrun too: the run ends on the budget, not on a failed gate
    except ProviderError as exc:
        raise Closed("provider_error", f"{request.action}: {exc}") from None


_SNAPSHOT = re.compile(r"-\d{4}-\d{2}-\d{2}$")


def same_model(answered: str, asked: str) -> bool:
    """Whether an answer from ``answered`` is from the model ``asked`` for: the same name,
    or a dated snapshot of it (``gpt-4o-2024-08-06`` for ``gpt-4o``), as APIs report."""
    return answered == asked or _SNAPSHOT.sub("", answered) == asked
