"""The detector gate's checks: the checking program in the sandbox, then (optionally) a
model check, each of whose reports must validate before it counts.

The program (:mod:`sopbus.roles.gated._check`, or the command ``[sop].checker`` names) runs in
:func:`sopbus.bus.run_sandboxed` with ``input.json`` beside it and prints the report on stdout. A
timeout, a non-zero exit or a report that does not validate fails the sample closed. The
report must be about this draft (its SHA-256) and this sample, and ``passed`` must say
exactly "no errors".

The model check asks the configured model for contradictions between the draft and the
facts. A finding counts only if it quotes the draft verbatim and cites a fact of the store;
one that does not makes the whole report invalid (fail closed), because a gate that
accepted unverifiable findings would block on hope. Valid findings are hard errors
``MODEL-<fact id>``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pydantic
from pydantic import BaseModel, ConfigDict, Field

from sopbus.bus import ChatMessage, SandboxLimits, run_sandboxed

from .._action import ActionContext
from .._prompt import describe_validation_error
from ._guard import Closed, ask_strict
from ._store import Manifest, Store

CHECK_SCRIPT = Path(__file__).with_name("_check.py")
MODEL_CHECK = "ModelCheck"


@dataclass(frozen=True)
class GateOptions:
    """``checker``: the command that checks (``input.json`` is appended; default: the
    built-in program under the sandbox's ``python``). ``checker_timeout_s`` bounds it.
    ``model_check`` adds the model's check."""

    checker: tuple[str, ...] | None = None
    checker_timeout_s: float = 30.0
    model_check: bool = False


class Issue(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(pattern=r"^[A-Z]+(-[A-Za-z0-9:#_.\-]+)*$")
    rule: str
    message: str
    evidence: str = ""


class GateReport(BaseModel):
    """What a checking program must print (``gate-report/1``)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    schema_: Literal["gate-report/1"] = Field(alias="schema")
    sample: str
    draft_sha256: str
    passed: bool
    errors: list[Issue]
    warnings: list[Issue] = []


class Finding(BaseModel):
    fact_id: str
    quote: str = Field(min_length=1)
    problem: str


class ModelFindings(BaseModel):
    """The model check's answer: contradictions between the draft and the facts, each with
    a verbatim quote of the draft and the id of the fact it contradicts (none: empty list)."""

    findings: list[Finding] = Field(max_length=20)


async def detect(
    ctx: ActionContext,
    *,
    draft: str,
    sample: str,
    outline: dict[str, Any],
    store: Store,
    manifest: Manifest,
    options: GateOptions,
    timeout_s: float,
    action: str,
) -> dict[str, Any]:
    """The validated report on ``draft`` (a dict as the report file holds it)."""
    facts = [{"id": i.id, "text": i.text, "forbid": list(i.forbid)} for i in store.facts()]
    prose = [
        {"id": s.id, "text": store.items[s.id].text} for s in manifest.items if s.kind == "prose"
    ]
    data = {"sample": sample, "draft": draft, "outline": outline, "facts": facts, "prose": prose}
    report = validate_report(await _run_checker(data, options), sample=sample, draft=draft)
    if options.model_check:
        findings = await ask_strict(
            ctx,
            _model_prompt(ctx, draft, store),
            output=ModelFindings,
            action=MODEL_CHECK,
            timeout_s=timeout_s,
            subject=sample,
        )
        report = _with_findings(report, findings, draft, store)
    return report


async def _run_checker(data: dict[str, Any], options: GateOptions) -> str:
    argv = [*(options.checker or ("python", "check.py")), "input.json"]
    files: dict[str, str | bytes] = {"input.json": json.dumps(data)}
    if options.checker is None:
        files["check.py"] = CHECK_SCRIPT.read_bytes()
    result = await run_sandboxed(
        argv, files=files, limits=SandboxLimits(timeout_s=options.checker_timeout_s)
    )
    if result.timed_out:
        raise Closed(
            "timeout",
            f"the checker {' '.join(argv)} ran past "
            f"{options.checker_timeout_s} s ([sop].checker_timeout_s)",
        )
    if result.exit_code != 0:
        raise Closed(
            "nonzero_exit",
            f"the checker {' '.join(argv)} exited with "
            f"{result.exit_code}: {result.stderr.strip()[-300:]}",
        )
    return result.stdout


def validate_report(text: str, *, sample: str, draft: str) -> dict[str, Any]:
    """The checker's report, validated (schema and meaning), as a dict; else :class:`Closed`."""
    try:
        report = GateReport.model_validate_json(text)
    except pydantic.ValidationError as exc:
        raise Closed(
            "invalid_detector_report",
            f"the checker's report does not fit gate-report/1: {describe_validation_error(exc)}",
        ) from None
    digest = hashlib.sha256(draft.encode()).hexdigest()
    ids = [e.id for e in report.errors]
    wrong = (
        "it is about another sample"
        if report.sample != sample
        else "it is about another draft (SHA-256 differs)"
        if report.draft_sha256 != digest
        else "'passed' contradicts its errors"
        if report.passed != (not report.errors)
        else "an error id appears twice"
        if len(ids) != len(set(ids))
        else ""
    )
    if wrong:
        raise Closed("invalid_detector_report", f"the checker's report is invalid: {wrong}")
    return report.model_dump(by_alias=True)


def _model_prompt(ctx: ActionContext, draft: str, store: Store) -> tuple[ChatMessage, ...]:
    facts = "\n".join(f"[{i.id}] {i.text}" for i in store.facts())
    task = (
        "List every statement of the DRAFT that contradicts a FACT. For each, quote the "
        "draft word for word and give the fact's id. No contradiction: an empty list.\n\n"
        f"FACTS:\n{facts}\n\nDRAFT:\n{draft}"
    )
    return (ChatMessage("system", ctx.role.system_text()), ChatMessage("user", task))


def _with_findings(
    report: dict[str, Any], findings: ModelFindings, draft: str, store: Store
) -> dict[str, Any]:
    errors = list(report["errors"])
    for n, f in enumerate(findings.findings, 1):
        if f.fact_id not in store.items or store.items[f.fact_id].kind != "fact":
            raise Closed(
                "invalid_detector_report",
                f"model finding {n} cites {f.fact_id!r}, which is not a fact of the story store",
            )
        if f.quote not in draft:
            raise Closed(
                "invalid_detector_report",
                f"model finding {n} quotes {f.quote[:60]!r}, which is not in the draft",
            )
        errors.append(
            {"id": f"MODEL-{f.fact_id}", "rule": "model", "message": f.problem, "evidence": f.quote}
        )
    ids = [e["id"] for e in errors]
    if len(ids) != len(set(ids)):
        errors = list({e["id"]: e for e in errors}.values())  # one error per fact is enough
    return {**report, "errors": errors, "passed": not errors}
