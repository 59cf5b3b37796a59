"""Reserve and settle: the money side of one attempt. Its amount (a model call's worst
case, a paid tool's price) is held on a sweep's shared account and reserved on the run's
budget before anything is sent, and both are settled at the actual cost after; a refusal
is ledgered and raised with nothing sent."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any, NamedTuple

import trio

from .._errors import BudgetExhausted
from .._protocol import LLMRequest
from ..money import AccountShare, Budget, Hold, Reservation
from ._books import Books


class Held(NamedTuple):
    """An attempt's money: the sweep's hold (``None`` outside a sweep or for a free call)
    and the run's reservation."""

    hold: Hold | None
    reservation: Reservation


class Purse:
    """The run's ``budget`` and a sweep's ``pool`` (the shared account), moved together."""

    def __init__(self, budget: Budget, pool: AccountShare | None):
        self.budget, self._pool = budget, pool

    async def take(self, amount: Decimal, why: Callable[[], str]) -> Held:
        """``amount`` held and reserved, or :class:`~sopbus.bus.BudgetExhausted` with nothing
        held: the shared account's refusal in its own words, a budget closed after an
        overrun in its own, the cap's arithmetic as ``why()`` says."""
        hold = await self._hold(amount)  # the shared account's refusal goes up as it is
        try:
            return Held(hold, self.budget.reserve(amount))
        except BudgetExhausted:
            await self.unhold(hold, Decimal(0))
            if self.budget.closed is not None:
                raise
            raise BudgetExhausted(why()) from None

    async def settle(self, held: Held, actual: Decimal) -> None:
        """Spends ``actual`` for the attempt ``held`` (``0`` releases it)."""
        self.budget.settle(held.reservation, actual)
        await self.unhold(held.hold, actual)

    async def _hold(self, amount: Decimal) -> Hold | None:
        """The sweep's hold for an attempt (none outside a sweep, or for a free call)."""
        if self._pool is None or not amount:
            return None
        return await self._pool.reserve(amount)

    async def unhold(self, hold: Hold | None, actual: Decimal) -> None:
        if hold is None or self._pool is None:
            return
        # Shielded: a cancelled call must still give its hold back to the sweep.
        with trio.CancelScope(shield=True):
            await self._pool.settle(hold, actual)


async def held(
    purse: Purse,
    books: Books,
    request: LLMRequest,
    round: int,
    attempt: int,
    amount: Decimal,
    why: Callable[[], str],
    **fields: Any,
) -> Held:
    """:meth:`Purse.take`, with a refusal ledgered (with ``fields``) before it is raised."""
    try:
        return await purse.take(amount, why)
    except BudgetExhausted:
        books.refused(request, round, attempt, amount, **fields)
        raise
