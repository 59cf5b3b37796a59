"""The gated writer's roles: planner, writer, detector gate and publisher.

Flow of one sample (a confirmed chapter outline, ``ConfirmOutline``)::

    Planner --PlanEvidence--> Writer --WriteChapter--> Gate --GateChapter--> Publisher
       ^                         |  ^                    |
       +--- evidence requests ---+  +-- failed report ---+  (at most 2 repairs, then the user)

- ``Planner`` selects evidence within the character budget and writes
  ``<sample>/manifest-<rev>.json``; it serves the writer's evidence requests (at most 3 per
  sample, at most 30% more characters).
- ``Writer`` has no tools and sees only the writer context: the outline, the manifest's
  evidence, the output contract and, when repairing, its last draft and the detector's
  report. It answers with a draft or with evidence requests.
- ``Gate`` runs the checking program in the sandbox (and, if configured, a model check
  whose findings must quote the draft and cite a known fact), writes
  ``<sample>/report-<n>.json`` first, and only for a passed report appends a receipt
  (hashes of draft, manifest and report) to the receipt chain. A draft that fails after
  the last repair goes to the user (``<sample>/to_user.md``) with the report, without receipt.
- ``Publisher`` accepts a passed draft only if the receipt chain verifies and the files are
  unchanged; then it writes ``<sample>/chapter.md``.

Every step fails closed (:mod:`sopbus.roles.gated._guard`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import msgspec
from pydantic import BaseModel, Field, model_validator

from sopbus.bus import ChatMessage, Message, ReceiptError, Turn, issue_receipt, require_receipt

from .._action import Action, ActionContext, ActionResult
from .._role import Role
from ._detect import GateOptions, detect
from ._guard import Closed, ask_strict, fail_closed
from ._store import Manifest, Outline, Store, extend, manifest_bytes, plan

OUTLINE = "ConfirmOutline"
PLAN = "PlanEvidence"
DRAFT = "WriteChapter"
CHECK = "GateChapter"
DELIVER = "DeliverChapter"
USER = "User"


@dataclass(frozen=True)
class GatedSettings:
    """What the gated roles share: the story store and the limits of the procedure."""

    store: Store
    budget_chars: int = 6000
    fact_share: float = 0.6
    max_requests: int = 3
    max_repairs: int = 2
    stage_timeout_s: float = 120.0
    gate: GateOptions = field(default_factory=GateOptions)


def _manifest(turn: Turn, rel: str) -> Manifest:
    if turn.artifacts_dir is None:
        raise RuntimeError("the gated writer needs a run store (artifacts/) to keep its evidence")
    return msgspec.json.decode((turn.artifacts_dir / rel).read_bytes(), type=Manifest)


def _artifacts(turn: Turn) -> Path:
    if turn.artifacts_dir is None:
        raise RuntimeError("the gated writer needs a run store (artifacts/) for its files")
    return turn.artifacts_dir


def _answered(ctx: ActionContext) -> tuple[Message, dict[str, Any]]:
    """The message this turn answers, with its payload as a table (empty when it has none)."""
    message = ctx.news[0]
    return message, message.payload if isinstance(message.payload, dict) else {}


class PerMessage(Role, register=False):
    """A role that runs its actions once per message of its news, so that each sample's
    reply answers exactly the message it is about (``parents``)."""

    async def step(self, news: Sequence[Message], turn: Turn) -> Sequence[Message]:
        fresh = tuple(news)
        self.memory.extend(fresh)
        out: list[Message] = []
        for message in fresh:
            for action in self.actions:
                reply = await self._act(action, (message,), tuple(out), turn)
                if reply is not None:
                    out.append(reply)
        return out


class ConfirmOutline(Action):
    """The confirmed chapter outline a sample starts from (published by the editor)."""

    async def run(self, ctx: ActionContext) -> ActionResult:
        return ActionResult(content="\n\n".join(m.content for m in ctx.news))


# -- planner ------------------------------------------------------------------------------


class PlanEvidence(Action):
    """Selects evidence (a program: see :func:`sopbus.roles.gated._store.plan`) and serves the
    writer's evidence requests; writes the manifest of each revision."""

    def __init__(self, settings: GatedSettings):
        super().__init__()
        self.settings = settings
        self._latest: dict[str, tuple[Manifest, dict[str, Any]]] = {}

    async def run(self, ctx: ActionContext) -> ActionResult:
        message, payload = _answered(ctx)
        s = self.settings
        if message.cause_by == OUTLINE:
            outline_raw = payload["outline"]
            outline = msgspec.convert(outline_raw, Outline)
            manifest = plan(s.store, outline, budget_chars=s.budget_chars, fact_share=s.fact_share)
        elif message.cause_by == DRAFT and payload.get("type") == "requests":
            manifest, outline_raw = self._latest[payload["sample"]]
            manifest = extend(s.store, manifest, payload["requests"])
        else:
            return ActionResult(publish=False)
        self._latest[manifest.sample] = (manifest, outline_raw)
        rel = f"{manifest.sample}/manifest-{manifest.revision}.json"
        ctx.turn.write_artifact(rel, manifest_bytes(manifest))
        return ActionResult(
            content=f"evidence for {manifest.sample}: {len(manifest.items)} items, "
            f"{manifest.used_chars} of {manifest.budget_chars} characters "
            f"(+{manifest.extra_chars_used} requested) in {rel}",
            payload={
                "sample": manifest.sample,
                "manifest": rel,
                "revision": manifest.revision,
                "outline": outline_raw,
                "items": [i.id for i in manifest.items],
            },
        )


class EvidencePlanner(PerMessage):
    profile = "Retrieval planner"
    goal = "Give the writer the evidence the chapter needs, within the budget"
    watch = (ConfirmOutline, "WriteChapter")


# -- writer -------------------------------------------------------------------------------


class EvidenceRequest(BaseModel):
    kind: Literal["fact", "prose"]
    query: str = Field(min_length=3, max_length=200)


class WriterAnswer(BaseModel):
    """Either the chapter (``draft``) or up to three evidence requests, not both."""

    draft: str = ""
    evidence_requests: list[EvidenceRequest] = Field(default_factory=list, max_length=3)

    @model_validator(mode="after")
    def _one_of(self) -> WriterAnswer:
        if bool(self.draft.strip()) == bool(self.evidence_requests):
            raise ValueError("answer with a draft or with evidence_requests, exactly one of them")
        return self


@dataclass
class _Sample:
    outline: dict[str, Any]
    manifest: str
    attempt: int = 0
    requests: int = 0
    last_draft: str = ""
    report: dict[str, Any] | None = None


class WriteChapter(Action):
    """Writes the chapter from the writer context only, or asks for evidence."""

    instruction = (
        "Write the chapter as continuous prose. Use the FACTS exactly as given; "
        "write like the PROSE (voice, rhythm, hooks) without copying it. Keep every "
        "hard event, in order; put the hooks in the last paragraph. If evidence you "
        "need is missing, answer with evidence_requests instead of a draft."
    )

    def __init__(self, settings: GatedSettings):
        super().__init__(max_repairs=0)
        self.settings = settings
        self._samples: dict[str, _Sample] = {}

    async def run(self, ctx: ActionContext) -> ActionResult:
        message, payload = _answered(ctx)
        sample_id = payload.get("sample", "")
        if message.cause_by == PLAN:
            state = self._samples.setdefault(
                sample_id, _Sample(payload["outline"], payload["manifest"])
            )
            state.manifest = payload["manifest"]
        elif message.cause_by == CHECK and payload.get("verdict") == "failed":
            state = self._samples[sample_id]
            state.report = json.loads((_artifacts(ctx.turn) / payload["report"]).read_text())
        else:
            return ActionResult(publish=False)
        async with fail_closed(ctx, sample_id):
            return await self._write(ctx, sample_id, state)

    async def _write(self, ctx: ActionContext, sample: str, state: _Sample) -> ActionResult:
        s = self.settings
        answer = await ask_strict(
            ctx,
            self.writer_context(ctx, state),
            output=WriterAnswer,
            action=self.name,
            timeout_s=s.stage_timeout_s,
            subject=sample,
        )
        if answer.evidence_requests:
            asked = len(answer.evidence_requests)
            if state.requests + asked > s.max_requests:
                raise Closed(
                    "schema_violation",
                    f"the writer asked for {asked} more evidence "
                    f"requests; {s.max_requests - state.requests} "
                    f"left of {s.max_requests} for {sample}",
                )
            state.requests += asked
            requests = [r.model_dump() for r in answer.evidence_requests]
            return ActionResult(
                content=f"{sample}: evidence requests: "
                + "; ".join(f"{r['kind']}: {r['query']}" for r in requests),
                payload={"sample": sample, "type": "requests", "requests": requests},
            )
        state.attempt += 1
        state.last_draft = answer.draft
        rel = f"{sample}/draft-{state.attempt}.md"
        ctx.turn.write_artifact(rel, answer.draft)
        return ActionResult(
            content=answer.draft,
            payload={
                "sample": sample,
                "type": "draft",
                "attempt": state.attempt,
                "draft": rel,
                "manifest": state.manifest,
                "outline": state.outline,
            },
        )

    def writer_context(self, ctx: ActionContext, state: _Sample) -> tuple[ChatMessage, ...]:
        """Everything the writer sees: no run history, no other role's messages."""
        outline = msgspec.convert(state.outline, Outline)
        manifest = _manifest(ctx.turn, state.manifest)
        items = [self.settings.store.items[i.id] for i in manifest.items]
        parts = [outline.render()]
        for kind, label in (
            ("fact", "FACTS (write these correctly)"),
            ("prose", "PROSE (write alike: voice, rhythm, hooks; do not copy)"),
        ):
            chosen = [f"[{i.id}] {i.text}" for i in items if i.kind == kind]
            parts.append(f"{label}:\n" + ("\n".join(chosen) or "(none)"))
        c = outline.contract
        parts.append(
            f"OUTPUT CONTRACT: {c.min_chars} to {c.max_chars} characters of prose; "
            f"no headings, lists or notes."
        )
        left = self.settings.max_requests - state.requests
        parts.append(f"Evidence requests left: {left}" + ("" if left else " (write the draft)"))
        if state.report is not None:
            errors = "\n".join(
                f"- {e['id']}: {e['message']} ({e.get('evidence', '')})"
                for e in state.report["errors"]
            )
            parts.append(
                f"YOUR LAST DRAFT:\n{state.last_draft}\n\nTHE DETECTOR BLOCKED IT:\n"
                f"{errors}\nRevise the draft so that each of these is fixed."
            )
        parts.append(self.instruction)
        return (
            ChatMessage("system", ctx.role.system_text()),
            ChatMessage("user", "\n\n".join(parts)),
        )


class ChapterWriter(PerMessage):
    profile = "Novelist"
    goal = "Write the chapter the outline confirms, true to the facts and in the book's voice"
    watch = (PlanEvidence, "GateChapter")


# -- detector gate ------------------------------------------------------------------------


class GateChapter(Action):
    """The gate: see :func:`sopbus.roles.gated._detect.detect` for the checks."""

    def __init__(self, settings: GatedSettings):
        super().__init__(max_repairs=0)
        self.settings = settings

    async def run(self, ctx: ActionContext) -> ActionResult:
        message, payload = _answered(ctx)
        if message.cause_by != DRAFT or payload.get("type") != "draft":
            return ActionResult(publish=False)
        async with fail_closed(ctx, payload["sample"]):
            return await self._gate(ctx, payload)

    async def _gate(self, ctx: ActionContext, p: dict[str, Any]) -> ActionResult:
        s = self.settings
        artifacts = _artifacts(ctx.turn)
        sample, attempt = p["sample"], p["attempt"]
        draft = (artifacts / p["draft"]).read_text()
        manifest = _manifest(ctx.turn, p["manifest"])
        report = await detect(
            ctx,
            draft=draft,
            sample=sample,
            outline=p["outline"],
            store=s.store,
            manifest=manifest,
            options=s.gate,
            timeout_s=s.stage_timeout_s,
            action=self.name,
        )
        rel = f"{sample}/report-{attempt}.json"
        ctx.turn.write_artifact(rel, json.dumps(report, indent=2, sort_keys=True) + "\n")  # first
        errors = [e["id"] for e in report["errors"]]
        base = {
            "sample": sample,
            "attempt": attempt,
            "draft": p["draft"],
            "manifest": p["manifest"],
            "report": rel,
            "errors": errors,
        }
        if report["passed"]:
            receipt, digest = issue_receipt(
                artifacts,
                sample=sample,
                gate=ctx.role.name,
                round=ctx.turn.round,
                subjects={"draft": p["draft"], "manifest": p["manifest"], "report": rel},
            )
            ctx.turn.emit("receipt_issued", sample=sample, receipt=digest, seq=receipt.seq)
            return ActionResult(
                content=f"{sample}: draft {attempt} passed the gate; receipt {digest}",
                payload={**base, "verdict": "passed", "receipt": digest},
            )
        if attempt <= s.max_repairs:
            return ActionResult(
                content=f"{sample}: draft {attempt} blocked: {', '.join(errors)}",
                payload={**base, "verdict": "failed"},
            )
        ctx.turn.write_artifact(f"{sample}/to_user.md", _to_user(sample, draft, report, attempt))
        return ActionResult(
            content=f"{sample}: draft {attempt} still fails the gate after {s.max_repairs} repairs "
            f"({', '.join(errors)}); it goes to the user with the detector's report",
            payload={**base, "verdict": "needs_user"},
            send_to=(USER,),
        )


def _to_user(sample: str, draft: str, report: dict[str, Any], attempt: int) -> str:
    errors = "\n".join(
        f"- **{e['id']}** ({e['rule']}): {e['message']}"
        + (f" - `{e['evidence']}`" if e.get("evidence") else "")
        for e in report["errors"]
    )
    return (
        f"# {sample}: needs your decision\n\nDraft {attempt} did not pass the gate; it has "
        f"no receipt.\n\n## Detector report\n\n{errors}\n\n## Draft\n\n{draft}\n"
    )


class ChapterGate(PerMessage):
    profile = "Continuity detector"
    goal = "Block drafts with verifiable errors; pass the rest with a receipt"
    watch = (WriteChapter,)


# -- publisher ----------------------------------------------------------------------------


class DeliverChapter(Action):
    """Accepts a passed draft only with a receipt whose chain verifies."""

    async def run(self, ctx: ActionContext) -> ActionResult:
        message, p = _answered(ctx)
        if message.cause_by != CHECK or p.get("verdict") != "passed":
            return ActionResult(publish=False)
        async with fail_closed(ctx, p["sample"]):
            return self._deliver(ctx, p)

    def _deliver(self, ctx: ActionContext, p: dict[str, Any]) -> ActionResult:
        artifacts = _artifacts(ctx.turn)
        try:
            receipt = require_receipt(artifacts, p["receipt"])
        except ReceiptError as exc:
            raise Closed("receipt_invalid", str(exc)) from None
        if receipt.sample != p["sample"] or receipt.subjects["draft"].path != p["draft"]:
            raise Closed(
                "receipt_invalid",
                f"receipt {p['receipt']} is for {receipt.sample} "
                f"{receipt.subjects['draft'].path}, not {p['sample']} {p['draft']}",
            )
        rel = f"{p['sample']}/chapter.md"
        ctx.turn.write_artifact(rel, (artifacts / p["draft"]).read_bytes())
        return ActionResult(
            content=f"{p['sample']} delivered ({rel}, receipt {p['receipt']})",
            payload={
                "sample": p["sample"],
                "status": "delivered",
                "chapter": rel,
                "receipt": p["receipt"],
            },
        )


class ChapterPublisher(PerMessage):
    profile = "Publisher"
    goal = "Deliver only what passed the gate with a verifiable receipt"
    watch = (GateChapter,)
    actions = (DeliverChapter,)
