"""The cost ledger: one :class:`LedgerLine` per LLM call attempt, ``costs.jsonl`` of a run.

Money fields are ``Decimal`` and encode as JSON strings (``"0.00015"``), so the file sums
exactly. The wall-clock fields are :data:`WALL_CLOCK_FIELDS` (``latency_ms`` and ``t``, last
in each line); everything else is a function of the run's inputs, so a determinism check
compares lines with those two dropped.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Literal

import msgspec

from ._quote import PriceSource

Outcome = Literal["ok", "error", "refused", "replayed", "lost", "overrun"]

WALL_CLOCK_FIELDS: tuple[str, ...] = ("latency_ms", "t")

TOOL_PROVIDER = "tool"
"""The ``provider`` of a paid tool call's ledger line (a tool priced by its scenario), which
counts in the spend but is not a model call."""


class CallColumns(msgspec.Struct, frozen=True):
    """The calls of one batch of a population's agents (one ledger line), one column a
    field and one entry a call: which agent asked (its index), the prompt and completion
    tokens billed, and the exact cost. The line's own tokens and ``cost_usd`` are the sums
    of the columns; a batch line with ``cached_tokens`` is never made (the simulator and a
    batch provider report none)."""

    agents: list[int]
    prompt_tokens: list[int]
    completion_tokens: list[int]
    cost_usd: list[Decimal]

    def __len__(self) -> int:
        return len(self.agents)


class LedgerLine(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One call attempt as the ledger keeps it.

    ``seq`` counts lines from 1 within a run. ``subject`` is what the call was for, where
    the action said (``tests/test_game.py`` for a ``WriteTest``); empty and omitted otherwise. ``outcome`` is ``ok`` (answered and billed),
    ``error`` (the provider failed; no usage, so $0), ``refused`` (the budget refused the
    reservation; no call made), ``replayed`` (answered from a cassette; recorded usage at $0)
    ``lost`` (in flight when the run was killed; written by ``sopbus resume``, which counts
    the call's reservation as spent since the provider may have billed it), or ``overrun``
    (answered with usage that cannot be true: the tokens are the provider's, the cost what
    they price at, and the run ended there).
    An ``error`` line costs $0 when the provider cannot have billed it (an HTTP error status,
    no connection) and its reservation when it may have (a stream cut mid-way, a timeout, a
    200 answer that was no chat completion): ``estimated`` is then true. ``status`` (the
    HTTP status or a stream error's code) and ``error`` (the first line of what went wrong)
    say why an ``error`` or ``overrun`` line failed; the three are omitted when unset.
    ``attempt`` is the caller's attempt number plus the gateway's retries before this one.
    ``total_usd`` is the run's spend after this line, ``budget_usd`` its cap.
    ``price_source`` says who priced the model: ``command-line`` (``--price``; a resumed
    run's lines say ``scenario``, as its ``scenario.toml`` holds the price), ``scenario`` (its
    ``[prices]``), ``sopbus``
    (``bus/money/prices.toml``) or ``genai-prices``; empty (and omitted from the JSON) for a
    ``replayed`` line, which costs $0 whatever the price, and in ledgers written before it.
    ``resume`` is 0 for lines of a run's first execution and ``n`` for lines written by its
    n-th ``sopbus resume`` (omitted from the JSON when 0).
    ``corrected`` says why an ``ok`` line's tokens are sopbus's own count rather than the
    provider's: the usage it reported was too small to be true (zero prompt tokens, no
    completion tokens for the text it sent, more cached tokens than prompt; see
    :mod:`sopbus.bus.llm._plausible`); ``estimated`` is then true (omitted when unset).
    ``reserved_usd`` is what a ``refused`` call needed: its worst-case cost (the prompt's
    upper bound plus ``max_tokens`` of completion), which did not fit under the cap
    (omitted from the JSON on other lines).
    ``lost_call`` is the call id of the reservation a ``lost`` line stands for (its
    ``llm_reserved`` event), so a resume killed after writing it does not count it again
    (omitted from the JSON on other lines).
    ``finish_reason`` is why an answered call's model stopped, as the provider said it
    (``length``: cut at ``max_tokens``); omitted when the provider did not say, and in
    ledgers written before it.
    ``batch`` (a population's calls made together, :meth:`sopbus.bus.Gateway.complete_many`)
    holds each call of the line as :class:`CallColumns`; ``role`` is then the population's
    name and :attr:`calls` the number of calls (omitted on a line of one call).
    ``latency_ms`` (provider call duration) and ``t`` (Unix time at the end) are wall clock.
    """

    seq: int
    round: int
    role: str
    action: str
    subject: str = ""
    provider: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    cache_write_tokens: int = 0
    """Prompt tokens written to the provider's prompt cache, billed at the model's
    ``cache_write`` price (part of ``prompt_tokens``, as ``cached_tokens`` are); 0 (omitted)
    where the provider reports none, and in ledgers written before it."""
    cost_usd: Decimal
    total_usd: Decimal
    budget_usd: Decimal
    attempt: int
    step: int = 0
    """The call's step in its tool loop: 1 for the first model call, 2 for the one after the
    first tool results, ...; 0 (omitted) outside a tool loop and in ledgers before it."""
    outcome: Outcome
    price_source: PriceSource | Literal[""] = ""
    resume: int = 0
    estimated: bool = False
    status: int | None = None
    error: str | None = None
    reserved_usd: Decimal | None = None
    lost_call: int = 0
    corrected: str | None = None
    finish_reason: str | None = None
    batch: CallColumns | None = None
    latency_ms: float
    t: float

    @property
    def calls(self) -> int:
        """The calls this line stands for: a batch's, else one (a refusal is not a call, a
        paid tool's line is no model call: the readers of a ledger say so)."""
        return 1 if self.batch is None else len(self.batch)

    def each_call(self) -> list[LedgerLine]:
        """The line as one line a call: a batch's calls each under its agent's name
        (``Player-17``) with its own tokens, cost and running total; any other line itself."""
        batch = self.batch
        if batch is None:
            return [self]
        total = self.total_usd - self.cost_usd
        out = []
        for agent, prompt, completion, cost in zip(
            batch.agents, batch.prompt_tokens, batch.completion_tokens, batch.cost_usd
        ):
            total += cost
            out.append(
                msgspec.structs.replace(
                    self,
                    role=f"{self.role}-{agent}",
                    prompt_tokens=prompt,
                    completion_tokens=completion,
                    cost_usd=cost,
                    total_usd=total,
                    batch=None,
                )
            )
        return out

    @property
    def shown_outcome(self) -> str:
        """The outcome as a reader is told it: ``estimated`` for an ``error`` counted at
        its reservation (the provider may have billed it), else :attr:`outcome`."""
        return "estimated" if self.outcome == "error" and self.estimated else self.outcome

    @property
    def what(self) -> str:
        """The action, and the subject when there is one: ``WriteTest (tests/test_game.py)``."""
        return f"{self.action} ({self.subject})" if self.subject else self.action


def without_wall_clock(line: LedgerLine) -> dict[str, object]:
    """``line`` as a dict without :data:`WALL_CLOCK_FIELDS`, for determinism checks."""
    record = msgspec.structs.asdict(line)
    for name in WALL_CLOCK_FIELDS:
        del record[name]
    return record
