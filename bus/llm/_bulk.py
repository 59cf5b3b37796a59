"""A population's calls in batches (:meth:`sopbus.bus.Gateway.complete_many`).

A batch is reserved as one: each call at its own worst case, as many calls as the cap
covers (the rest are not sent, and the first of them is ledgered ``refused``). The
provider's batch method answers them; each call is priced exactly and checked against its
own reservation; the batch is settled, recorded (one :class:`BatchRecord` in
``calls.jsonl``) and ledgered as one line whose :class:`~sopbus.bus.CallColumns` keep every
call. So the money is the single path's, call by call, and the records grow by a few
bytes a call instead of three copies of a ledger line each (docs/populations.md).
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Sequence
from decimal import Decimal
from typing import Protocol

import msgspec
import trio

from .._errors import BudgetExhausted, ProviderError, ProviderOverrun
from .._protocol import Answers, Completion, LLMRequest, Provider, Usage
from .._util import reached
from ..money import CallColumns, Outcome, Price, PriceBook, money
from ._books import NO_USAGE, Books, CallJournal, round_ms
from ._overrun import impossible_usage
from ._purse import Held, Purse
from ._recording import BatchRecord
from ._replay import batch_key
from ._said import first_line, refusal
from ._tokens import prompt_upper_bound

_ZERO = Decimal(0)


class Batch:
    """One batch on its way: the requests sent, their agents, reservations and money."""

    __slots__ = ("agents", "call", "held", "request", "requests", "round", "start", "worst")

    def __init__(
        self,
        crowd: LLMRequest,
        requests: Sequence[LLMRequest],
        agents: Sequence[int],
        worst: list[Decimal],
        round: int,
    ):
        self.request, self.requests, self.agents = crowd, requests, agents
        self.worst, self.round = worst, round
        self.call = 0
        self.held: Held | None = None
        self.start = trio.current_time()


class Batcher:
    """The batch side of one run's gateway: the same provider, prices, purse and books."""

    def __init__(
        self,
        provider: Provider,
        prices: PriceBook,
        purse: Purse,
        books: Books,
        journal: CallJournal | None,
    ):
        self.provider, self.prices, self.purse = provider, prices, purse
        self.books, self.journal = books, journal

    async def complete(
        self, requests: Sequence[LLMRequest], agents: Sequence[int], *, crowd: str, round: int
    ) -> Answers:
        """The answers to ``requests`` (agents ``agents`` of the population ``crowd``), as
        many as the cap covers, from the provider's batch method."""
        first = requests[0]
        price = self.prices.price(first.model)
        worst = self._worst(requests, price)
        fits = _fitting(worst, self.purse.budget.left)
        if fits == 0:
            return self._refused(requests, price, worst, round)
        crowd_request = msgspec.structs.replace(first, messages=(), role=crowd, subject="")
        batch = Batch(crowd_request, requests[:fits], agents[:fits], worst[:fits], round)
        try:
            await self._reserve(batch)
        except BudgetExhausted as refused:  # a sweep's account, or a budget closed
            self.books.refused(first, round, 1, worst[0])
            return Answers([None] * len(requests), str(refused))
        try:
            completions = self.provider.complete_batch(batch.requests)
        except BaseException as exc:
            await self._failed(batch, exc)
            raise
        reached("llm:answered")
        await self._answered(batch, price, completions)
        answers: list[Completion | None] = [
            *completions,
            *itertools.repeat(None, len(requests) - fits),
        ]
        if fits == len(requests):
            return Answers(answers)
        return Answers(answers, self._refuse_one(requests[fits], price, worst[fits], round))

    def _worst(self, requests: Sequence[LLMRequest], price: Price) -> list[Decimal]:
        """Each call's worst case (its prompt's bound plus ``max_tokens``), priced once per
        distinct bound: a population's prompts differ by a few tokens."""
        if self.provider.free:
            return [_ZERO] * len(requests)
        priced: dict[tuple[int, int], Decimal] = {}
        out = []
        overhead = self.provider.prompt_overhead
        for request in requests:
            bound = (prompt_upper_bound(request) + overhead(request), request.max_tokens)
            cost = priced.get(bound)
            if cost is None:
                cost = priced[bound] = price.worst_case(*bound)
            out.append(cost)
        return out

    async def _reserve(self, batch: Batch) -> None:
        total = sum(batch.worst, _ZERO)
        request = batch.request
        batch.held = await self.purse.take(
            total,
            lambda: (
                f"{request.role}: a batch of {len(batch.requests)} calls needs "
                f"up to {money(total)}; {money(self.purse.budget.left)} is left"
            ),
        )
        if self.journal is not None:
            batch.call = self.journal.reserved(
                request, round=batch.round, attempt=1, amount=total, calls=len(batch.requests)
            )

    def _refused(
        self, requests: Sequence[LLMRequest], price: Price, worst: list[Decimal], round: int
    ) -> Answers:
        why = self._refuse_one(requests[0], price, worst[0], round)
        return Answers([None] * len(requests), why)

    def _refuse_one(self, request: LLMRequest, price: Price, worst: Decimal, round: int) -> str:
        """Ledgers the first call the cap does not cover as ``refused``; says why."""
        bound = prompt_upper_bound(request) + self.provider.prompt_overhead(request)
        why = refusal(request, price, bound, worst, self.purse.budget)
        if self.purse.budget.closed is not None:
            why = f"no more calls: {self.purse.budget.closed}"
        self.books.refused(request, round, 1, worst)
        return why

    async def _answered(self, batch: Batch, price: Price, completions: list[Completion]) -> None:
        """Prices each call, checks it against its reservation, settles and books the batch."""
        if len(completions) != len(batch.requests):
            raise ProviderError(
                f"the {self.provider.name} provider answered {len(completions)} of a batch of "
                f"{len(batch.requests)} requests"
            )
        columns, usage, why = _priced(batch, price, completions, free=self.provider.free)
        cost = sum(columns.cost_usd, _ZERO)
        assert batch.held is not None
        await self.purse.settle(batch.held, cost)
        outcome: Outcome = "ok" if why is None else "overrun"
        texts = [c.text for c in completions]
        finish = {i: c.finish_reason or "" for i, c in enumerate(completions)}
        finish = {i: f for i, f in finish.items() if f != "stop"}
        summed = Completion(
            text="", usage=usage, model=batch.request.model, provider=self.provider.name
        )
        line = self.books.line(
            batch.request,
            batch.round,
            1,
            outcome,
            usage,
            cost,
            round_ms(trio.current_time() - batch.start),
            completion=summed,
            batch=columns,
            error=why,
        )
        if why is not None:
            message = (
                f"the {self.provider.name} provider reported usage that cannot be true in a "
                f"batch of {batch.request.role}'s {batch.request.action} calls: {why}; no "
                f"further call is made"
            )
            self.purse.budget.close(message)
            self.books.book(line, batch.request, batch.call, None)
            raise ProviderOverrun(message, overrun={"role": batch.request.role, "why": why})
        self.books.book(
            line,
            batch.request,
            batch.call,
            summed,
            texts=texts,
            finish=finish,
            key=batch_key(batch.requests),
        )

    async def _failed(self, batch: Batch, exc: BaseException) -> None:
        """A batch that raised: nothing answered, so nothing billed but what may have been."""
        billed = isinstance(exc, ProviderError) and exc.maybe_billed
        assert batch.held is not None
        cost = batch.held.reservation.amount if billed else _ZERO
        await self.purse.settle(batch.held, cost)
        self.books.ledger(
            batch.request,
            batch.round,
            1,
            "error",
            NO_USAGE,
            cost,
            round_ms(trio.current_time() - batch.start),
            call=batch.call,
            estimated=billed,
            status=exc.status if isinstance(exc, ProviderError) else None,
            error=first_line(exc),
        )


def _fitting(worst: list[Decimal], left: Decimal) -> int:
    """How many of the calls, from the first, fit in ``left`` together."""
    sums = list(itertools.accumulate(worst))
    return bisect.bisect_right(sums, left)


def _priced(
    batch: Batch, price: Price, completions: list[Completion], *, free: bool
) -> tuple[CallColumns, Usage, str | None]:
    """The batch's columns, its summed usage, and why a call's usage cannot be true (the
    first such call), or ``None``."""
    costs: dict[tuple[int, int], Decimal] = {}
    prompt, completion, cost_usd = [], [], []
    why = None
    for request, answer, worst in zip(batch.requests, completions, batch.worst):
        usage = answer.usage
        pair = (usage.prompt_tokens, usage.completion_tokens)
        cost = costs.get(pair)
        if cost is None:
            cost = costs[pair] = _ZERO if free else price.cost(Usage(*pair))
        if cost > worst or min(pair) < 0 or pair[1] > request.max_tokens or usage.cached_tokens:
            why = why or impossible_usage(usage, request, cost=cost, reserved=worst)
            why = why or "a batch call reported cached prompt tokens, which a batch cannot ledger"
        prompt.append(pair[0])
        completion.append(pair[1])
        cost_usd.append(cost)
    columns = CallColumns(list(batch.agents), prompt, completion, cost_usd)
    return columns, Usage(sum(prompt), sum(completion)), why


class _Asker(Protocol):
    async def __call__(self, request: LLMRequest, *, round: int) -> Completion: ...


async def one_by_one(
    ask: _Asker, requests: Sequence[LLMRequest], *, round: int, concurrency: int
) -> Answers:
    """``requests`` asked one by one (each reserved, ledgered and recorded on its own),
    ``concurrency`` in flight: the first refusal stops new calls, the calls in flight end."""
    answers: list[Completion | None] = [None] * len(requests)
    refused: list[str] = []
    order = iter(range(len(requests)))  # shared by the workers: each call is made once

    async def worker() -> None:
        for i in order:
            if refused:
                return
            try:
                answers[i] = await ask(requests[i], round=round)
            except BudgetExhausted as why:
                refused.append(str(why))
                return

    async with trio.open_nursery() as nursery:
        for _ in range(max(1, min(concurrency, len(requests)))):
            nursery.start_soon(worker)
    return Answers(answers, refused[0] if refused else None)


def taped_answers(record: BatchRecord, *, replayed: bool) -> list[Completion]:
    """Each call of a recorded batch as the :class:`~sopbus.bus.Completion` it was."""
    line = record.ledger
    assert line is not None and line.batch is not None, "a batch is recorded with its line"
    columns, provider = line.batch, record.completion.provider
    return [
        Completion(
            text=text,
            usage=Usage(p, c),
            model=line.model,
            provider=provider,
            replayed=replayed,
            finish_reason=record.finish.get(i, "stop"),
        )
        for i, (text, p, c) in enumerate(
            zip(record.texts, columns.prompt_tokens, columns.completion_tokens)
        )
    ]


def replayed_batch(books: Books, record: BatchRecord, request: LLMRequest, round: int) -> None:
    """Ledgers a recorded batch answered again at $0 (a replay, a fork) and records it."""
    line = record.ledger
    assert line is not None and line.batch is not None, "a batch is recorded with its line"
    columns = msgspec.structs.replace(line.batch, cost_usd=[_ZERO] * len(line.batch))
    summed = msgspec.structs.replace(record.completion, replayed=True)
    new = books.line(
        request,
        round,
        1,
        "replayed",
        summed.usage,
        _ZERO,
        0.0,
        completion=summed,
        provider="replay",
        batch=columns,
    )
    books.book(new, request, 0, summed, texts=record.texts, finish=record.finish, key=record.key)
