"""What a run's gateway has counted so far, as one typed value: :class:`GatewayStats`."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import msgspec


class GatewayStats(msgspec.Struct, frozen=True, kw_only=True):
    """A run's totals as its gateway counts them: what ``summary.json`` reports and what
    a stop condition that watches spend or tokens reads (:meth:`sopbus.bus.Gateway.stats`).

    ``total_usd`` is spent against the cap ``budget_usd`` (exact ``Decimal``); ``llm_calls``
    the attempts sent to a provider (refusals and paid tool calls are not model calls);
    ``overrun`` the first call whose reported usage could not be true
    (:func:`sopbus.bus.llm._overrun.overrun_record`), or ``None``; ``taped_calls`` the
    answers a resume, replay or fork took from its recording (``None`` outside those)."""

    total_usd: Decimal = Decimal(0)
    budget_usd: Decimal = Decimal(0)
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    overrun: dict[str, Any] | None = None
    taped_calls: int | None = None

    @property
    def tokens(self) -> int:
        """Prompt and completion tokens together."""
        return self.prompt_tokens + self.completion_tokens
