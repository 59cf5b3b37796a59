"""The book of a shared account: what every :class:`~sopbus.bus.money._account.SharedAccount` keeps,
and the rules that change it, whatever stores it.

:class:`~sopbus.bus.money._file_account.FileAccount` keeps the book in a JSON file under a lock;
:class:`sopbus.bus.nats.NatsAccount` keeps it in one NATS KV key under compare-and-swap. Both read
the book, change it with these methods and write it back atomically, so the cap check and
the refusal's words are the same on one machine and across many.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import msgspec

from ._account import AccountState, Hold
from ._format import money


class Book(msgspec.Struct, kw_only=True):
    """The account's content (money as decimal strings when encoded)."""

    #: The cap in USD.
    cap: Decimal
    #: Spend per holder.
    spent: dict[str, Decimal] = {}
    #: Hold id -> (holder, amount), for the calls in flight.
    holds: dict[str, tuple[str, Decimal]] = {}
    #: Reservations refused since the cap was set.
    refused: int = 0
    #: Holder -> until when it is alive (epoch seconds); only accounts with leases use it.
    leases: dict[str, float] = {}

    def totals(self) -> tuple[Decimal, Decimal]:
        """(spent, held), in all."""
        spent = sum(self.spent.values(), Decimal(0))
        held = sum((amount for _, amount in self.holds.values()), Decimal(0))
        return spent, held

    def reserve(self, hold: Hold, fix: str) -> str | None:
        """Holds ``hold`` if it fits under the cap; else counts the refusal and returns its
        message (ending with ``fix``: how the user raises the cap)."""
        spent, held = self.totals()
        if spent + held + hold.amount > self.cap:
            self.refused += 1
            return (
                f"next call needs up to {money(hold.amount)}; {money(self.cap - spent - held)} "
                f"left of the shared {money(self.cap)} ({money(spent)} spent, {money(held)} "
                f"held by calls in flight of all runs); {fix}"
            )
        self.holds[hold.id] = (hold.holder, hold.amount)
        return None

    def settle(self, hold: Hold, actual: Decimal) -> bool:
        """Frees ``hold`` and books ``actual`` for its holder; ``False`` when it was not held
        (a rebase dropped it, its holder's lease lapsed, or it was closed twice)."""
        if self.holds.pop(hold.id, None) is None:
            return False
        if actual:
            self.spent[hold.holder] = self.spent.get(hold.holder, Decimal(0)) + actual
        return True

    def rebase(self, holder: str, spent: Decimal) -> None:
        self.holds = {k: v for k, v in self.holds.items() if v[0] != holder}
        self.spent[holder] = spent

    def set_cap(self, cap: Decimal) -> None:
        """A new cap; the refusal count starts again, since the money may last now."""
        self.cap, self.refused = checked_cap(cap), 0

    def state(self) -> AccountState:
        spent, held = self.totals()
        return AccountState(
            cap=self.cap, spent=spent, held=held, refused=self.refused, by_holder=dict(self.spent)
        )


encoder = msgspec.json.Encoder(decimal_format="string")
decoder = msgspec.json.Decoder(Book)


def checked_cap(cap: Any) -> Decimal:
    if not isinstance(cap, Decimal) or not cap.is_finite() or cap < 0:
        raise ValueError(f"a budget cap is a finite Decimal of 0 or more, got {cap!r}")
    return cap


def new_hold(holder: str, amount: Decimal) -> Hold:
    """A hold with a fresh id; a negative amount is a programming error."""
    import secrets

    if amount < 0:
        raise ValueError(f"a reservation is 0 or more, got {amount!r}")
    return Hold(id=secrets.token_hex(8), holder=holder, amount=amount)
