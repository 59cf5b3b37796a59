"""A person as a provider: the answers of a ``human = true`` role come from someone typing.

A human role's calls go through the gateway like any model call (model ``human``, priced
$0 on purpose), so they are reserved, ledgered with provider ``human``, recorded in
``calls.jsonl`` (resume and replay answer from there and never ask again) and validated
against the action's output schema by the same repair loop: an answer that does not fit is
sent back with the validation error, and the person sees that error and is asked again, at
most ``max_repairs`` times.

Where the answers come from:

* :class:`TerminalAnswers`: on a terminal the person sees what the role received and what
  the action asks for (the output fields and their types), then types the answer: field by
  field for an action with output fields, one line of text otherwise.
* :class:`LineAnswers`: one answer a line from a file or a named pipe (``--human-input
  PATH``), a JSON object for an action with output fields, text otherwise; so scripted
  tests and other programs can play the person. A FIFO is opened when the first answer is
  needed and read as the writer writes.

:class:`HumanRouter` sends the requests of model ``human`` to the person and everything else
to the run's provider.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, Protocol

import trio

from .._errors import ConfigError, ProviderError
from .._protocol import (
    Completion,
    LiveFeed,
    LLMRequest,
    PromptCounter,
    Provider,
    ProviderBase,
    Usage,
)

HUMAN_MODEL = "human"
"""The model name of a person's answers; the price book prices it at $0."""

_NO_TOKENS = Usage(prompt_tokens=0, completion_tokens=0)


class Answers(Protocol):
    """Where a person's answers come from. ``ask`` blocks (it runs in a worker thread)."""

    def ask(self, question: Question) -> str: ...


class Question:
    """What a person is asked: who asks, what the role received, what the answer must hold."""

    def __init__(self, request: LLMRequest):
        self.role, self.action = request.role, request.action
        self.messages = request.messages
        self.fields = _fields(request.schema)

    @property
    def repair(self) -> str | None:
        """The validation error of the previous answer, when this is a second try."""
        if len(self.messages) >= 2 and self.messages[-2].role == "assistant":
            return self.messages[-1].content
        return None

    def describe(self) -> str:
        """The question as text for a terminal."""
        lines = [f"--- {self.role} is answered by you: action {self.action} ---"]
        if self.repair is None:
            lines += [f"[{m.role}] {m.content}" for m in self.messages]
        else:  # the person has read the messages already; show what to fix
            lines.append(f"Your answer did not fit:\n{self.repair}")
        if self.fields:
            lines.append("Answer with: " + ", ".join(f"{n} ({t})" for n, t in self.fields.items()))
        else:
            lines.append("Answer with one line of text.")
        return "\n".join(lines)


class HumanProvider(ProviderBase):
    """Answers requests from a person (see the module docstring). ``waiting`` names the role
    and action a person is being asked for right now (the live view shows it), else ``None``.
    ``pause`` (set by the live view) keeps the display quiet while a person types."""

    name = HUMAN_MODEL

    def __init__(self, answers: Answers):
        self._answers = answers
        self._one_at_a_time = trio.Lock()  # one person, one question at a time
        self.waiting: str | None = None
        self.pause: Callable[[], Any] | None = None

    async def complete(self, request: LLMRequest) -> Completion:
        question = Question(request)
        async with self._one_at_a_time:
            self.waiting = f"{request.role}: {request.action}"
            try:
                text = await self._ask(question)
            finally:
                self.waiting = None
        return Completion(text=text, usage=_NO_TOKENS, model=request.model, provider=self.name)

    def close(self) -> None:
        """Closes the answer file, if the answers come from one."""
        close = getattr(self._answers, "close", None)
        if callable(close):
            close()

    async def _ask(self, question: Question) -> str:
        if self.pause is None or not getattr(self._answers, "interactive", False):
            return await trio.to_thread.run_sync(
                self._answers.ask, question, abandon_on_cancel=True
            )
        async with self.pause():
            return await trio.to_thread.run_sync(
                self._answers.ask, question, abandon_on_cancel=True
            )


class HumanRouter(ProviderBase):
    """The run's provider for model calls, a person for model ``human`` (see the module
    docstring). Opening and closing pass through to the run's provider."""

    def __init__(self, inner: Provider, human: HumanProvider):
        self.inner: Provider = inner
        self.human: HumanProvider = human
        self.name = inner.name
        self.free = inner.free

    def name_for(self, request: LLMRequest) -> str:
        """Who answers ``request``: the ledger's ``provider``."""
        return self.human.name if request.model == HUMAN_MODEL else self.inner.name

    async def complete(self, request: LLMRequest) -> Completion:
        if request.model == HUMAN_MODEL:
            return await self.human.complete(request)
        return await self.inner.complete(request)

    def prompt_counter(self) -> PromptCounter | None:
        return self.inner.prompt_counter()

    def prompt_overhead(self, request: LLMRequest) -> int:
        return 0 if request.model == HUMAN_MODEL else self.inner.prompt_overhead(request)

    def show_live(self, feed: LiveFeed) -> None:
        self.inner.show_live(feed)

    async def __aenter__(self) -> HumanRouter:
        await self.inner.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.human.close()
        await self.inner.__aexit__(*exc)


class LineAnswers:
    """One answer a line from ``path`` (a file or a named pipe); see the module docstring."""

    interactive = False

    def __init__(self, path: Path):
        self.path = path
        self._file: IO[str] | None = None
        self._line = 0

    def ask(self, question: Question) -> str:
        if self._file is None:
            try:
                self._file = self.path.open(encoding="utf-8")  # a FIFO blocks here for a writer
            except OSError as exc:
                raise ProviderError(
                    f"--human-input {self.path}: cannot read it ({exc.strerror}); "
                    f"give a file or a named pipe of answers, one a line"
                ) from None
        raw = self._file.readline()
        self._line += 1
        if not raw:
            raise ProviderError(
                f"--human-input {self.path}: no answer at line {self._line} for role "
                f"{question.role!r}, action {question.action!r}; add a line"
                + (
                    " (a JSON object with " + ", ".join(question.fields) + ")"
                    if question.fields
                    else ""
                )
            )
        return raw.rstrip("\n")

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


class TerminalAnswers:
    """A person at a terminal (see the module docstring)."""

    interactive = True  # the live display keeps quiet while the person types

    def __init__(self, read: Callable[[str], str] = input, write: IO[str] | None = None):
        self._read, self._write = read, write

    def ask(self, question: Question) -> str:
        out = self._write or sys.stdout
        print("\n" + question.describe(), file=out, flush=True)
        if not question.fields:
            return self._read("> ")
        answer: dict[str, Any] = {}
        for name, kind in question.fields.items():
            raw = self._read(f"{name} ({kind}): ")
            answer[name] = _typed(raw, kind)
        return json.dumps(answer, ensure_ascii=False)


def answers_for(
    human_input: Path | None, *, interactive: bool, humans: list[str], required: bool = True
) -> Answers:
    """The source of a run's human answers: ``--human-input`` when given, else the terminal.
    With neither, a :class:`ConfigError` before the run starts (``required``), or (a resumed
    run, whose recording may hold every answer) an error only if a person must be asked."""
    if human_input is not None:
        return LineAnswers(human_input)
    if interactive:
        return TerminalAnswers()
    why = (
        f"role(s) {', '.join(map(repr, humans))} are answered by a person (human = true), "
        f"but standard input is not a terminal: give --human-input FILE (a file or named "
        f"pipe, one answer a line: a JSON object for an action with output fields, text "
        f"otherwise)"
    )
    if required:
        raise ConfigError(why)
    return NoOne(why)


class NoOne:
    """No person to ask: every question fails with ``why``."""

    interactive = False

    def __init__(self, why: str):
        self.why = why

    def ask(self, question: Question) -> str:
        raise ProviderError(
            f"{question.role}: {question.action} needs a person's answer: {self.why}"
        )


def _fields(schema: dict[str, Any] | None) -> dict[str, str]:
    """Output field names and their types, read from a pydantic JSON schema."""
    if not schema:
        return {}
    return {name: _type_name(spec, schema) for name, spec in schema.get("properties", {}).items()}


def _type_name(spec: dict[str, Any], schema: dict[str, Any]) -> str:
    if "$ref" in spec:
        return spec["$ref"].rpartition("/")[2]
    if "anyOf" in spec:
        return " | ".join(_type_name(s, schema) for s in spec["anyOf"])
    kind = spec.get("type", "any")
    if kind == "array":
        return f"list[{_type_name(spec.get('items', {}), schema)}]"
    if kind == "object":
        return f"dict[str, {_type_name(spec.get('additionalProperties', {}), schema)}]"
    return {"string": "str", "integer": "int", "number": "float", "boolean": "bool"}.get(kind, kind)


def _typed(raw: str, kind: str) -> Any:
    """A typed line as the JSON value its field wants: text stays text, anything else is read
    as JSON (``3``, ``true``, ``["a", "b"]``); what does not parse is passed on as text, and
    validation tells the person what was wrong."""
    if kind == "str":
        return raw
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw
