"""The bounded book doctor: answers a question about a long book by reading only what the
answer needs, within hard bounds, and proposes a plan it has checked.

How one consultation goes:

1. The model sees the question and the book's manifest (counts and states, no body text).
2. Each answer is one JSON object: a ``tool_call`` (one read-only tool, see
   ``sopbus.roles.book._tools``) or a ``final`` plan. At most ``max_steps`` answers are asked for
   and at most ``max_tool_calls`` tools are run; a tool call past that is refused (and the
   model told to finish), and the last step asks for the final plan.
3. Every request is at most ``max_request_chars`` characters (messages plus, in
   ``json_schema`` mode, the schema). When the transcript would pass that, the oldest tool
   exchanges are dropped: the system prompt, the manifest and the latest tool result are
   kept, and the latest result is cut if even that is too long. Each tool result is cut to
   ``max_result_chars`` before it goes into the transcript.
4. The final plan is validated (``sopbus.roles.book._plan.validate_plan``). An invalid plan gets
   exactly one correction call (beyond ``max_steps``, with the errors and no tools); if the
   corrected plan still fails, or no final plan came, the run fails closed: no plan is
   written, the role raises :class:`sopbus.bus.ModelOutputError` (the run ends as failed).
5. A valid plan is written to ``artifacts/plan.json`` and ``plan.md``, marked as proposed
   and not applied, and published as ``ProposePlan``.

The run log shows each step: ``doctor_step`` (request size, what was dropped or cut),
``tool_called``, ``tool_result``, ``tool_refused``, ``answer_rejected`` and
``plan_validated``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

import pydantic

from sopbus.bus import ChatMessage, ConfigError, LLMRequest, Message, ModelOutputError, Turn

from .._action import Action, UserRequirement
from .._llm import build_request, unfence
from .._prompt import describe_validation_error
from .._role import Role
from ._data import BookData
from ._plan import Decision, Plan, decision_problem, plan_document, plan_markdown, validate_plan
from ._tools import ToolError, call_tool, tool_list

STEP_RANGE, TOOL_RANGE, CHAR_RANGE = (3, 5), (3, 5), (24_000, 64_000)
MAX_QUESTION_CHARS = 4_000
MAX_ANSWER_KEPT = 2_000
"""How much of a model's own answer the transcript keeps (a call is short; the rest is noise)."""
CUT = "\n[... cut: {kept} of {total} characters shown]"


@dataclass(frozen=True)
class DoctorBounds:
    """The hard bounds of one consultation (see the module docstring)."""

    max_steps: int = 4
    max_tool_calls: int = 4
    max_request_chars: int = 32_000
    max_result_chars: int = 6_000
    max_new_chapters: int = 3

    def __post_init__(self) -> None:
        for name, (low, high) in (
            ("max_steps", STEP_RANGE),
            ("max_tool_calls", TOOL_RANGE),
            ("max_request_chars", CHAR_RANGE),
        ):
            value = getattr(self, name)
            if not low <= value <= high:
                raise ConfigError(f"{name} = {value} is out of bounds: it must be {low} to {high}")
        if not 500 <= self.max_result_chars <= self.max_request_chars // 3:
            raise ConfigError(
                f"max_result_chars = {self.max_result_chars} must be 500 to a third "
                f"of max_request_chars ({self.max_request_chars // 3})"
            )
        if self.max_new_chapters < 0:
            raise ConfigError(f"max_new_chapters = {self.max_new_chapters} must be 0 or more")


class ProposePlan(Action):
    """The doctor's published result: a checked plan, proposed and not applied. (Taken as a
    plain action it asks for a plan from the messages alone, with no tools and no checks.)"""

    instruction = "Propose a plan that answers the question in the messages above."
    Output = Plan


def cut_text(text: str, limit: int) -> tuple[str, bool]:
    """``text`` cut to at most ``limit`` characters, marker included."""
    if len(text) <= limit:
        return text, False
    marker = CUT.format(kept="{kept}", total=len(text))
    kept = max(limit - len(marker) - 8, 0)
    return text[:kept] + marker.format(kept=kept), True


def request_chars(request: LLMRequest) -> int:
    """The characters a request sends: its messages, and its schema in ``json_schema`` mode."""
    size = sum(len(m.content) for m in request.messages)
    if request.schema is not None and request.output_mode == "json_schema":
        size += len(json.dumps(request.schema, separators=(",", ":")))
    return size


@dataclass
class _Exchange:
    answer: str  # what the model said (kept short)
    reply: str  # the tool result or the feedback it got


@dataclass
class _Consultation:
    doctor: BookDoctor
    turn: Turn
    question: str
    steps: int = 0
    tool_calls: int = 0
    transcript: list[_Exchange] = field(default_factory=list)

    @property
    def bounds(self) -> DoctorBounds:
        return self.doctor.bounds

    async def run(self) -> Plan:
        plan = await self.explore()
        errors = self.validated(plan, attempt=1)
        if not errors:
            return plan
        plan = await self.correct(plan, errors)
        errors = self.validated(plan, attempt=2)
        if errors:
            self.fail("the corrected plan is still unsafe: " + "; ".join(errors))
        return plan

    async def explore(self) -> Plan:
        for step in range(1, self.bounds.max_steps + 1):
            self.steps = step
            text = await self.ask("Diagnose", last=step == self.bounds.max_steps)
            decision, problem = parse(text)
            if decision is None or problem:
                self.turn.emit("answer_rejected", step=step, problem=problem)
                self.remember(
                    text,
                    f"Invalid answer: {problem}\nAnswer with one JSON object as the protocol says.",
                )
            elif decision.type == "final" and decision.plan is not None:
                return decision.plan
            else:
                self.remember(text, self.use_tool(decision, step))
        self.fail(f"no final plan after {self.bounds.max_steps} steps (max_steps)")

    async def correct(self, plan: Plan, errors: list[str]) -> Plan:
        listed = "\n".join(f"- {e}" for e in errors)
        self.remember(
            json.dumps({"type": "final", "plan": plan.model_dump()}),
            f"The plan was rejected by the validator:\n{listed}\nAnswer once more with a "
            f'corrected {{"type": "final", "plan": ...}}. No tools now; this is the '
            f"only correction.",
        )
        text = await self.ask("CorrectPlan", last=True)
        decision, problem = parse(text)
        if decision is None or problem or decision.plan is None:
            self.fail(f"the correction was not a final plan: {problem or 'a tool_call'}")
        return decision.plan

    def use_tool(self, decision: Decision, step: int) -> str:
        tool = decision.tool or ""
        if self.tool_calls >= self.bounds.max_tool_calls:
            self.turn.emit("tool_refused", step=step, tool=tool, used=self.tool_calls)
            return (
                f"Refused: all {self.bounds.max_tool_calls} tool calls are used. Answer with "
                f'{{"type": "final", "plan": ...}} from what you have seen.'
            )
        self.tool_calls += 1
        args = decision.args.model_dump(exclude_none=True) if decision.args else {}
        self.turn.emit(
            "tool_called",
            step=step,
            call=self.tool_calls,
            tool=tool,
            args=args,
            reason=decision.reason,
        )
        try:
            result, ok = call_tool(self.doctor.book, tool, args), True
        except ToolError as exc:
            result, ok = f"error: {exc}", False
        text, cut = cut_text(result, self.bounds.max_result_chars)
        self.turn.emit(
            "tool_result",
            step=step,
            call=self.tool_calls,
            tool=tool,
            ok=ok,
            chars=len(result),
            kept=len(text),
            cut=cut,
        )
        return f"Result of {tool} (tool call {self.tool_calls} of {self.bounds.max_tool_calls}):\n{text}"

    def remember(self, answer: str, reply: str) -> None:
        self.transcript.append(_Exchange(cut_text(answer, MAX_ANSWER_KEPT)[0], reply))

    def validated(self, plan: Plan, *, attempt: int) -> list[str]:
        errors = validate_plan(
            plan, self.doctor.book, max_new_chapters=self.bounds.max_new_chapters
        )
        self.turn.emit("plan_validated", attempt=attempt, ok=not errors, errors=errors)
        return errors

    def fail(self, why: str) -> NoReturn:
        self.turn.emit("doctor_failed", why=why, steps=self.steps, tool_calls=self.tool_calls)
        raise ModelOutputError(
            f"book doctor failed closed: {why}. No plan was written; "
            f"ask a narrower question or use a stronger model"
        )

    # -- requests within the character cap ------------------------------------------------

    async def ask(self, action: str, *, last: bool) -> str:
        request, dropped, cut = self.fitted(action, last=last)
        self.turn.emit(
            "doctor_step",
            action=action,
            step=self.steps,
            chars=request_chars(request),
            cap=self.bounds.max_request_chars,
            dropped=dropped,
            cut=cut,
        )
        return (await self.turn.ask(request)).text

    def fitted(self, action: str, *, last: bool) -> tuple[LLMRequest, int, bool]:
        """The request with as much of the transcript as fits under the cap: oldest
        exchanges dropped first, then the latest reply cut."""
        keep, cap = list(self.transcript), self.bounds.max_request_chars
        dropped, cut = 0, False
        while True:
            request = self.request(action, keep, dropped, last)
            excess = request_chars(request) - cap
            if excess <= 0:
                return request, dropped, cut
            if len(keep) > 1:
                keep, dropped = keep[1:], dropped + 1
            elif keep and len(keep[0].reply) > 200:
                reply, _ = cut_text(keep[0].reply, max(len(keep[0].reply) - excess - 100, 100))
                keep, cut = [_Exchange(keep[0].answer, reply)], True
            else:
                raise ConfigError(
                    f"the book doctor's system prompt and manifest alone take "
                    f"{request_chars(request)} characters, over max_request_chars = "
                    f"{cap}; raise it (up to {CHAR_RANGE[1]})"
                )

    def request(
        self, action: str, keep: Sequence[_Exchange], dropped: int, last: bool
    ) -> LLMRequest:
        messages = [
            ChatMessage("system", self.doctor.protocol_text()),
            ChatMessage("user", self.doctor.manifest_text(self.question)),
        ]
        for exchange in keep:
            messages += [
                ChatMessage("assistant", exchange.answer),
                ChatMessage("user", exchange.reply),
            ]
        status = self.status(dropped, last)
        tail = messages[-1]
        messages[-1] = ChatMessage("user", f"{tail.content}\n\n{status}")
        return build_request(
            messages,
            output=Decision,
            action=action,
            role=self.doctor.name,
            llm=self.doctor.context(None, (), self.turn).llm,
        )

    def status(self, dropped: int, last: bool) -> str:
        b = self.bounds
        parts = [
            f"[Step {self.steps} of {b.max_steps}; tool calls used {self.tool_calls} of "
            f"{b.max_tool_calls}.]"
        ]
        if dropped:
            parts.append(
                f"[{dropped} earlier tool exchange(s) dropped to stay under "
                f"{b.max_request_chars:,} characters.]"
            )
        if last:
            parts.append('This is your last answer: reply with {"type": "final", "plan": ...}.')
        return " ".join(parts)


def parse(text: str) -> tuple[Decision | None, str | None]:
    """The model's answer as a decision, or the problem with it."""
    try:
        decision = Decision.model_validate_json(unfence(text))
    except pydantic.ValidationError as exc:
        return None, describe_validation_error(exc)[:1000]
    return decision, decision_problem(decision)


class BookDoctor(Role):
    """Answers the question it is sent (``UserRequirement``) about ``book`` within
    ``bounds`` and proposes a validated plan (see the module docstring)."""

    profile = "Book doctor"
    goal = (
        "answer a question about a long book by reading only what the answer needs, "
        "and propose a plan that is safe to confirm"
    )
    constraints = "never overwrite written chapters; the plan is a proposal, never applied"
    watch = (UserRequirement,)
    actions = (ProposePlan,)

    def __init__(
        self, *, book: BookData, bounds: DoctorBounds = DoctorBounds(), **fields: Any
    ) -> None:
        super().__init__(**fields)
        self.book, self.bounds = book, bounds

    def fields(self) -> dict[str, Any]:
        return {**super().fields(), "book": self.book, "bounds": self.bounds}

    async def step(self, news: Sequence[Message], turn: Turn) -> Sequence[Message]:
        asked = [m for m in news if m.content.strip()]
        if not asked:
            return ()
        self.memory.extend(news)
        question = "\n\n".join(m.content.strip() for m in asked)
        plan = await _Consultation(self, turn, question).run()
        doc = plan_document(plan, self.book, question)
        text = plan_markdown(doc)
        turn.write_artifact("plan.json", json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
        turn.write_artifact("plan.md", text)
        return [Message(cause_by=ProposePlan.name, sent_from=self.name, content=text, payload=doc)]

    def manifest_text(self, question: str) -> str:
        shown, _ = cut_text(question, MAX_QUESTION_CHARS)
        manifest = json.dumps(self.book.manifest(), indent=1, ensure_ascii=False)
        return f"Question: {shown}\n\nManifest of the book (no body text):\n{manifest}"

    def protocol_text(self) -> str:
        b, last = self.bounds, self.book.last_written
        return "\n\n".join(
            [
                self.system_text(),
                "You cannot see the book's text. You see its manifest and may call read-only tools, "
                "one per answer. Answer with exactly one JSON object and nothing else:\n"
                '{"type": "tool_call", "tool": "<name>", "args": {...}, "reason": "<why>"}\n'
                '{"type": "final", "plan": {"diagnosis": "...", "evidence": ["..."], '
                '"suggestions": [{"chapter": 1, "note": "..."}], "adjustments": [{"chapter": 1, '
                '"title": "...", "summary": "...", "reason": "..."}], "new_chapters": [{"after": 1, '
                '"title": "...", "summary": "...", "reason": "..."}]}}',
                f"Tools (arguments):\n{tool_list()}",
                f"Bounds: at most {b.max_steps} answers and {b.max_tool_calls} tool calls; results "
                f"longer than {b.max_result_chars:,} characters are cut.",
                f"Plan rules: written chapters (words > 0; the last written is chapter {last}) get "
                f"suggestions only. Adjustments are only for planned chapters with 0 words. New "
                f"chapters only after chapter {last} or later, at most {b.max_new_chapters}. "
                f"Nothing is applied: the user confirms the plan.",
            ]
        )
