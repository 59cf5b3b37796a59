"""A scripted stand-in for the run's LLM gateway, for testing roles and actions.

Like pydantic-ai's ``FunctionModel``: a plain function (or a list of answers, in order)
decides what the "model" says, and every request is recorded with its round and attempt.
The real gateway (prices, budget, ledger) has its own tests; this one only lets the role
layer be driven exactly.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal

from sopbus.bus import Answers, Budget, Completion, GatewayStats, LLMRequest, Turn, Usage

Answer = Callable[[LLMRequest, int], str]


@dataclass(frozen=True)
class Call:
    request: LLMRequest
    round: int
    attempt: int


class InOrder(abc.ABC):
    """A test gateway's :meth:`complete_many`: each request through its ``complete``, in
    order (no cap to refuse them), as the real gateway asks a provider without a batch
    method."""

    @abc.abstractmethod
    async def complete(self, request: LLMRequest, *, round: int, attempt: int = 1) -> Completion:
        """One answer to ``request``."""

    async def complete_many(
        self,
        requests: Sequence[LLMRequest],
        *,
        round: int,
        crowd: str,
        agents: Sequence[int],
        concurrency: int = 4,
    ) -> Answers:
        """Each of ``requests`` through :meth:`complete`, in order (no cap to refuse them)."""
        return Answers([await self.complete(r, round=round) for r in requests])


class ScriptedGateway(InOrder):
    """Answers each ``complete`` with ``answer(request, attempt)``, or with the next of a
    list of answers; records every call in ``calls``."""

    def __init__(self, answer: Answer | Iterable[str]):
        if callable(answer):
            self._answer: Answer = answer
        else:
            queue = list(answer)
            self._answer = lambda request, attempt: _pop(queue, request)
        self.calls: list[Call] = []
        self.budget = Budget(Decimal(0))  # nothing is priced here: the run loop reads it
        self._tokens = [0, 0]

    def stats(self) -> GatewayStats:
        """The calls made and their tokens (nothing is priced), as the run summary reads."""
        return GatewayStats(
            llm_calls=len(self.calls),
            prompt_tokens=self._tokens[0],
            completion_tokens=self._tokens[1],
        )

    async def complete(self, request: LLMRequest, *, round: int, attempt: int = 1) -> Completion:
        self.calls.append(Call(request, round, attempt))
        text = self._answer(request, attempt)
        usage = Usage(
            prompt_tokens=sum(len(m.content.split()) for m in request.messages),
            completion_tokens=len(text.split()),
        )
        self._tokens[0] += usage.prompt_tokens
        self._tokens[1] += usage.completion_tokens
        return Completion(text=text, usage=usage, model=request.model, provider="scripted")

    def actions(self) -> list[str]:
        """The ``action`` of every recorded request, in order."""
        return [c.request.action for c in self.calls]


def _pop(queue: list[str], request: LLMRequest) -> str:
    if not queue:
        raise AssertionError(
            f"the script has no answer left for {request.action!r} of {request.role!r}"
        )
    return queue.pop(0)


def turn(gateway: ScriptedGateway, *, role: str = "", round: int = 1) -> Turn:
    return Turn(run_id="test-run", round=round, role=role, gateway=gateway)
