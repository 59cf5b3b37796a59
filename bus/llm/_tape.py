"""A run's own recording of its LLM calls, and answering calls from such a recording.

Recording (every run). The gateway tells the run's :class:`CallLog` of each attempt twice:

* before it is sent, once its budget reservation is held: an ``llm_reserved`` event goes
  into ``events.jsonl`` (call id, round, role, action, model, attempt, amount);
* when it ends: an answer becomes one :class:`CallRecord` in ``calls.jsonl``; a failure,
  a cancellation or an overrun an ``llm_released`` event (the reservation is closed) with the
  attempt's ``outcome``, ``status`` and ``error``, and its ``cost_usd`` when it was counted.

Both are written, flushed, before the call's ledger line. So after a SIGKILL the run
directory says which calls were answered (``calls.jsonl``) and which were in flight (a
reservation with neither an answer nor a release): ``sopbus resume`` counts the latter as
spent. A :class:`CallRecord` is a cassette line of :mod:`sopbus.bus.llm._replay` (``key``, ``role``,
``action``, ``completion``) with the call's ``round``, ``attempt``, call id and ledger line
added, so ``calls.jsonl`` also works as ``[llm] cassette`` for the ``replay`` provider.

Answering (resume, replay, fork). A :class:`Tape` holds the answers of ``calls.jsonl``; a
:class:`TapeGateway` stands in front of the run's :class:`~sopbus.bus.Gateway` and answers from the
tape whatever it can, leaving the rest to the gateway (a live call). Answers are matched by
what was asked, not by arrival order, so concurrent turns cannot swap them:

* ``match="key"`` (resume, replay): the same round, role and request (:func:`request_key`),
  in recorded order when the same request was asked more than once;
* ``match="turn"`` (fork): the same round and role, in order, whatever the request says: a
  fork changes settings (another model) but must see the answers the forked run saw up to
  the fork's round. The action must agree, else the fork has diverged and says so.

Tool calls are recorded beside the answers (:class:`ToolRecord` lines, ``"kind": "tool"``,
and one :class:`ToolList` line per tool source, ``"kind": "tools"``, with the tools it
offered), and the tape answers them too (:meth:`Tape.take_tool`): replay and resume never
call a tool again. Readers of answers (:func:`read_calls`, cassettes) skip those lines.

A call the recorded run was refused by its budget is refused again in the taped rounds
(:class:`~sopbus.bus.BudgetExhausted`), so a replay of a budget-exhausted run ends the same way.
Stop conditions that watch spend or tokens read :meth:`TapeGateway.course`: the totals the
run would show uninterrupted, with each taped answer counted at its original cost when it is
replayed (a resume's carried spend and a replay's $0 would otherwise move such a stop).
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Iterable, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal, Protocol

import msgspec

from .._errors import BudgetExhausted, ConfigError
from .._events import LLMCalled, Note
from .._protocol import Answers, Completion, LLMRequest, ToolCall
from .._util import CALLS
from ..money import Budget, LedgerLine
from ._bulk import one_by_one, taped_answers
from ._gateway import Gateway
from ._recording import BatchRecord, CallRecord, ToolList, ToolRecord, read_recording
from ._replay import batch_key, request_key
from ._stats import GatewayStats

RESERVED = "llm_reserved"
RELEASED = "llm_released"
EVERY_ROUND = 1 << 62
"""``taped_through`` of a replay: every round is answered from the tape."""


class RunLog(Protocol):
    """Where a run's recording goes: the run store, seen from below (the store sits above
    the gateway, so this module names only the two writes it needs)."""

    def log(self, event: Any) -> None:
        """Append one event to ``events.jsonl``, flushed."""

    def record_answer(self, record: Any) -> None:
        """Append one answered call to ``calls.jsonl``, flushed."""


class CallLog:
    """The gateway's :class:`~sopbus.bus.llm._gateway.CallJournal` for one run (module docstring).

    ``first_call`` is the last call id an earlier execution of the run used, so that ids
    stay unique across a resume.
    """

    batches = True

    def __init__(self, store: RunLog, *, first_call: int = 0):
        self._store = store
        self._next = first_call

    def reserved(
        self,
        request: LLMRequest,
        *,
        round: int,
        attempt: int,
        amount: Decimal,
        provider: str = "",
        calls: int = 0,
    ) -> int:
        self._next += 1
        self._store.log(
            Note(
                kind=RESERVED,
                round=round,
                role=request.role,
                data={
                    "call": self._next,
                    "action": request.action,
                    "model": request.model,
                    "attempt": attempt,
                    "amount": amount,
                    # What the call is for, when the action said: a lost call keeps it.
                    **({"subject": request.subject} if request.subject else {}),
                    # A paid tool call's: a resume ledgers it lost as a tool's line.
                    **({"provider": provider} if provider else {}),
                    # A population's batch: its calls, reserved (and ledgered) as one.
                    **({"calls": calls} if calls else {}),
                },
            )
        )
        return self._next

    def closed(
        self,
        call: int,
        request: LLMRequest,
        completion: Completion | None,
        line: LedgerLine,
        *,
        texts: list[str] | None = None,
        finish: dict[int, str] | None = None,
        key: str = "",
    ) -> None:
        if completion is not None and texts is not None:
            self._store.record_answer(
                BatchRecord(
                    key=key,
                    role=request.role,
                    action=request.action,
                    completion=completion,
                    round=line.round,
                    attempt=line.attempt,
                    call=call,
                    ledger=line,
                    texts=texts,
                    finish=finish or {},
                )
            )
            return
        if completion is None:
            # Why it failed and what it was counted at travel with the release, so that the
            # event log alone tells a failed attempt from an answered one.
            why = {
                k: v for k, v in (("status", line.status), ("error", line.error)) if v is not None
            }
            billed = (
                {"cost_usd": line.cost_usd, "estimated": line.estimated} if line.cost_usd else {}
            )
            self._store.log(
                Note(
                    kind=RELEASED,
                    round=line.round,
                    role=request.role,
                    data={"call": call, "outcome": line.outcome, **why, **billed},
                )
            )
            return
        self._store.record_answer(
            CallRecord(
                key=request_key(request),
                role=request.role,
                action=request.action,
                completion=completion,
                round=line.round,
                attempt=line.attempt,
                call=call,
                ledger=line,
            )
        )


def read_calls(run_dir: Path) -> list[CallRecord]:
    """The answered calls of the run in ``run_dir`` (none when it made no call)."""
    return read_recording(run_dir / CALLS).calls


Match = Literal["key", "turn"]


class Tape:
    """Recorded answers, each taken at most once (see the module docstring for ``match``)."""

    def __init__(
        self,
        records: Iterable[CallRecord],
        *,
        match: Match,
        refused: Iterable[LedgerLine] = (),
        tools: Iterable[ToolRecord] = (),
        lists: Iterable[ToolList] = (),
    ):
        self.match = match
        self._answers: dict[tuple[Any, ...], deque[CallRecord]] = defaultdict(deque)
        self._batches: dict[tuple[int, str], deque[BatchRecord]] = defaultdict(deque)
        for record in records:
            if isinstance(record, BatchRecord):
                self._batches[(record.round, record.role)].append(record)
                continue
            self._answers[self._slot(record.round, record.role, record.key)].append(record)
        self._tools: dict[tuple[Any, ...], deque[ToolRecord]] = defaultdict(deque)
        for tool in tools:
            self._tools[self._tool_slot(tool.round, tool.role, tool.call)].append(tool)
        self.lists = {found.source: found for found in lists}  # the last list of each source
        self._refused = {
            (line.round, line.role, line.action) for line in refused if line.outcome == "refused"
        }

    def was_refused(self, request: LLMRequest, round: int) -> bool:
        """Whether the recorded run's budget refused ``request``'s action in ``round``."""
        return (round, request.role, request.action) in self._refused

    def _slot(self, round: int, role: str, key: str) -> tuple[Any, ...]:
        return (round, role, key) if self.match == "key" else (round, role)

    def take(self, request: LLMRequest, round: int) -> CallRecord | None:
        """The recorded answer to ``request`` asked in ``round``, or ``None``."""
        slot = self._slot(round, request.role, request_key(request) if self.match == "key" else "")
        answers = self._answers.get(slot)
        if not answers:
            return None
        record = answers.popleft()
        if record.action != request.action:
            raise ConfigError(
                f"the run has diverged from the recording: in round {round}, role "
                f"{request.role!r} asks for {request.action!r} where the recorded run asked for "
                f"{record.action!r}; fork at an earlier round, or before the setting that changed it"
            )
        return record

    def take_batch(
        self, requests: Sequence[LLMRequest], agents: Sequence[int], round: int, crowd: str
    ) -> BatchRecord | None:
        """The next recorded batch of the population ``crowd`` in ``round`` when it answers
        the first of ``requests`` (the same agents; with ``match="key"`` the same
        requests), or ``None``: those calls are not on the tape (a batch the recorded run
        was refused is not there, and one asked with other prompts is not taken)."""
        queue = self._batches.get((round, crowd))
        if not queue:
            return None
        record = queue[0]
        n, line = len(record.texts), record.ledger
        if line is None or line.batch is None or n > len(requests):
            return None
        if record.action != requests[0].action:
            raise ConfigError(
                f"the run has diverged from the recording: in round {round}, population "
                f"{crowd!r} asks for {requests[0].action!r} where the recorded run asked for "
                f"{record.action!r}; fork at an earlier round, or before the setting that changed it"
            )
        if line.batch.agents != list(agents[:n]):
            return None
        if self.match == "key" and batch_key(requests[:n]) != record.key:
            return None
        return queue.popleft()

    def answers_one_by_one(self, round: int) -> bool:
        """Whether the tape answers calls of ``round`` one by one (a recording made before
        batches, or of a provider without a batch method)."""
        return any(slot[0] == round for slot, answers in self._answers.items() if answers)

    def _tool_slot(self, round: int, role: str, call: ToolCall) -> tuple[Any, ...]:
        if self.match == "key":
            return (round, role, call.name, call.arguments)
        return (round, role)

    def take_tool(self, call: ToolCall, round: int, role: str) -> ToolRecord | None:
        """The recorded result of ``call`` asked by ``role`` in ``round``, or ``None``."""
        results = self._tools.get(self._tool_slot(round, role, call))
        return results.popleft() if results else None

    def __len__(self) -> int:
        return sum(len(answers) for answers in self._answers.values()) + sum(
            len(record.texts) for batches in self._batches.values() for record in batches
        )


class _Counts:
    """Calls, their cost and their tokens, added up (what :meth:`TapeGateway.course` moves)."""

    __slots__ = ("calls", "completion", "prompt", "usd")

    def __init__(self) -> None:
        self.usd, self.calls, self.prompt, self.completion = Decimal(0), 0, 0, 0

    def add(self, usd: Decimal, prompt: int, completion: int, calls: int = 1) -> None:
        """One more call (or ``calls``: a batch), of ``usd`` and these tokens."""
        self.usd += usd
        self.calls += calls
        self.prompt += prompt
        self.completion += completion


class TapeGateway:
    """Answers from a :class:`Tape` first, then from the live ``gateway``.

    ``free=False`` (resume): a taped answer is the run's own, already paid and already in
    its ledger; it is returned as it was, and only its original ledger line is logged again
    (as ``llm_called``) so the new event log tells the whole run. ``free=True`` (replay,
    fork): a taped answer is ledgered as ``replayed`` at $0 and recorded into this run's
    ``calls.jsonl``. A call in a round up to ``taped_through`` that the tape cannot answer
    is a :class:`~sopbus.bus.ConfigError`: those rounds make no provider call at all.
    """

    def __init__(
        self, gateway: Gateway, tape: Tape, *, free: bool, taped_through: int, store: RunLog
    ):
        self.gateway = gateway
        self._tape = tape
        self._free = free
        self._taped_through = taped_through
        self._store = store
        self.taped = 0  # calls answered from the tape
        self._base = gateway.stats()  # what was carried over before the first call
        self._original = _Counts()  # taped answers as recorded
        self._counted = _Counts()  # as the gateway counted them again

    @property
    def budget(self) -> Budget:
        return self.gateway.budget

    def stats(self) -> GatewayStats:
        """The ledger's totals (for the summary), and how many answers came from the tape."""
        return msgspec.structs.replace(self.gateway.stats(), taped_calls=self.taped)

    def course(self) -> GatewayStats:
        """The totals as the run uninterrupted would show them at this point (see the
        module docstring): for stop conditions that watch spend or tokens."""
        now = self.gateway.stats()
        base, original, counted = self._base, self._original, self._counted
        return msgspec.structs.replace(
            now,
            total_usd=now.total_usd - base.total_usd + original.usd - counted.usd,
            llm_calls=now.llm_calls - base.llm_calls + original.calls - counted.calls,
            prompt_tokens=now.prompt_tokens - base.prompt_tokens + original.prompt - counted.prompt,
            completion_tokens=now.completion_tokens
            - base.completion_tokens
            + original.completion
            - counted.completion,
        )

    def _count(self, record: CallRecord) -> None:
        line = record.ledger
        calls = len(record.texts) if isinstance(record, BatchRecord) else 1
        if line is not None:
            self._original.add(line.cost_usd, line.prompt_tokens, line.completion_tokens, calls)
        if self._free:  # record_replay ledgers the answer: one call, its tokens, $0
            usage = record.completion.usage
            self._counted.add(Decimal(0), usage.prompt_tokens, usage.completion_tokens, calls)

    async def complete(self, request: LLMRequest, *, round: int, attempt: int = 1) -> Completion:
        record = self._tape.take(request, round)
        if record is None:
            if round <= self._taped_through and self._tape.was_refused(request, round):
                raise BudgetExhausted(
                    f"the recorded run's budget refused {request.role!r}'s "
                    f"{request.action!r} call in round {round}"
                )
            if round <= self._taped_through:
                taped = (
                    "a replay takes every answer from it"
                    if self._taped_through >= EVERY_ROUND
                    else f"rounds up to {self._taped_through} take their answers from it"
                )
                raise ConfigError(
                    f"the recording has no answer for {request.role!r}'s {request.action!r} call "
                    f"in round {round} ({taped}, with no provider call); the recorded run did "
                    f"not make that call, or asked it with another prompt"
                )
            return await self.gateway.complete(request, round=round, attempt=attempt)
        self.taped += 1
        self._count(record)
        # A stateful provider (the simulator's fixture sequences) moves on as the call did.
        self.gateway.provider.observe(request)
        if self._free:
            return self.gateway.record_replay(
                request, record.completion, round=round, attempt=attempt
            )
        if record.ledger is not None:
            self._store.log(
                LLMCalled(round=round, role=request.role, action=request.action, call=record.ledger)
            )
        return record.completion

    async def complete_many(
        self,
        requests: Sequence[LLMRequest],
        *,
        round: int,
        crowd: str,
        agents: Sequence[int],
        concurrency: int = 4,
    ) -> Answers:
        """A population's calls: the recorded batches that answer them first (as
        :meth:`complete` answers one call from the tape), then the rest one by one where
        the tape has them so or the round is taped, else live as a batch."""
        answers: list[Completion | None] = []
        while len(answers) < len(requests):
            at = len(answers)
            record = self._tape.take_batch(requests[at:], agents[at:], round, crowd)
            if record is None:
                break
            answers += self._from_batch(record, requests[at : at + len(record.texts)], round)
        rest = requests[len(answers) :]
        if not rest:
            return Answers(answers)
        if round <= self._taped_through or self._tape.answers_one_by_one(round):
            more = await one_by_one(self.complete, rest, round=round, concurrency=concurrency)
        else:
            more = await self.gateway.complete_many(
                rest,
                round=round,
                crowd=crowd,
                agents=agents[len(answers) :],
                concurrency=concurrency,
            )
        return Answers(answers + more.answers, more.refused)

    def _from_batch(
        self, record: BatchRecord, requests: Sequence[LLMRequest], round: int
    ) -> list[Completion]:
        self.taped += len(requests)
        self._count(record)
        for request in requests:  # a stateful provider moves on as the calls did
            self.gateway.provider.observe(request)
        if self._free:
            return list(self.gateway.record_replay_batch(record, round=round))
        if record.ledger is not None:
            line = record.ledger
            self._store.log(
                LLMCalled(round=round, role=record.role, action=record.action, call=line)
            )
        return taped_answers(record, replayed=False)
