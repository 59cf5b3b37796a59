"""The run's budget cap: reservations before calls, settlements after.

A call first *reserves* its worst-case cost; the reservation is refused when what is spent,
plus what calls in flight have reserved, plus this reservation would pass the cap. After the
call the reservation is *settled* at the actual cost (or *released* when nothing was spent).
No method awaits, so under trio each one runs whole, and the cap holds under any interleaving
of concurrent calls: at every moment ``spent + reserved <= cap``, and a settled cost never
exceeds its reservation when the reservation is a true upper bound.

When a provider reports usage past that bound (:class:`~sopbus.bus.ProviderOverrun`) the gateway
settles what the provider says it billed, which may pass the cap, and :meth:`Budget.close`
refuses every later reservation: the run ends there.
"""

from __future__ import annotations

from decimal import Decimal

from .._errors import BudgetExhausted
from ._format import money


class Reservation:
    """A worst-case amount held for one call until it is settled or released."""

    __slots__ = ("amount", "open")

    def __init__(self, amount: Decimal):
        self.amount = amount
        self.open = True

    def __repr__(self) -> str:
        return f"Reservation(${self.amount}, {'open' if self.open else 'closed'})"


class Budget:
    """A cap in USD with what is spent and what is reserved for calls in flight."""

    def __init__(self, cap: Decimal):
        if not isinstance(cap, Decimal) or not cap.is_finite() or cap < 0:
            raise ValueError(f"a budget cap is a finite Decimal of 0 or more, got {cap!r}")
        self._cap = cap
        self._spent = Decimal(0)
        self._reserved = Decimal(0)
        self._closed: str | None = None

    @property
    def cap(self) -> Decimal:
        return self._cap

    @property
    def spent(self) -> Decimal:
        return self._spent

    @property
    def reserved(self) -> Decimal:
        return self._reserved

    @property
    def left(self) -> Decimal:
        """What new reservations may still take."""
        return self._cap - self._spent - self._reserved

    @property
    def closed(self) -> str | None:
        """Why no reservation is taken any more (see :meth:`close`), or ``None``."""
        return self._closed

    def close(self, reason: str) -> None:
        """Refuses every later reservation with :class:`~sopbus.bus.BudgetExhausted` naming ``reason``
        (a provider's overrun: the cap can no longer be trusted)."""
        self._closed = self._closed or reason

    def reserve(self, amount: Decimal) -> Reservation:
        """Holds ``amount`` for a call, or raises :class:`~sopbus.bus.BudgetExhausted` when it does
        not fit under the cap or the budget is closed (nothing is held then)."""
        if amount < 0:
            raise ValueError(f"a reservation is 0 or more, got {amount!r}")
        if self._closed is not None:
            raise BudgetExhausted(f"no more calls: {self._closed}")
        if self._spent + self._reserved + amount > self._cap:
            raise BudgetExhausted(
                f"next call needs up to {money(amount)}; {money(self.left)} left of {money(self._cap)} "
                f"({money(self._spent)} spent, {money(self._reserved)} held by calls in flight); "
                f"raise [run].budget_usd or --budget"
            )
        self._reserved += amount
        return Reservation(amount)

    def settle(self, reservation: Reservation, actual: Decimal) -> None:
        """Frees ``reservation`` and spends ``actual``, the call's real cost."""
        self._close(reservation)
        self._spent += actual

    def release(self, reservation: Reservation) -> None:
        """Frees ``reservation`` without spending (the call cost nothing)."""
        self._close(reservation)

    def _close(self, reservation: Reservation) -> None:
        if not reservation.open:
            raise RuntimeError(f"{reservation!r} was already settled or released")
        reservation.open = False
        self._reserved -= reservation.amount
