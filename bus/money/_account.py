"""A budget shared by many runs: the sweep's one cap, held across tasks and processes.

A run's :class:`~sopbus.bus.Budget` lives in its own process. A sweep's cap is drawn on by every
call of every run of the sweep, in whatever process the run executes, so it lives outside
them all, behind the small :class:`SharedAccount` protocol. The operations mirror a run's
budget: *reserve* a call's worst case before the call (refused, with
:class:`~sopbus.bus.BudgetExhausted`, when it does not fit), *settle* it at the actual cost after,
or *release* it when nothing was spent. Each operation is atomic in the account itself, so
at every moment ``spent + held <= cap`` whichever process asks.

Money is booked per *holder* (the run id), which is what makes a killed run recoverable:
:meth:`SharedAccount.rebase` sets a holder's spend to what its ledger says and drops the
holds it left behind, before the run is resumed (see :mod:`sopbus.bus.store._resume`).

:class:`sopbus.bus.money._file_account.FileAccount` implements the protocol with a JSON file
updated under ``fcntl.flock`` (one machine). An account on a key-value store with
compare-and-swap (NATS KV, issue 18) implements the same five coroutines.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Protocol

import msgspec


class Hold(msgspec.Struct, frozen=True, kw_only=True):
    """Money held in a shared account for one call in flight."""

    #: Unique within the account; names the hold in settle and release.
    id: str
    #: Who holds it: the run id.
    holder: str
    #: The call's worst-case cost.
    amount: Decimal


class AccountState(msgspec.Struct, frozen=True, kw_only=True):
    """A snapshot of a shared account (read-only)."""

    #: The cap in USD.
    cap: Decimal
    #: What settled calls cost, in all.
    spent: Decimal
    #: What calls in flight hold, in all.
    held: Decimal
    #: How many reservations the account refused (0 while the money lasts).
    refused: int
    #: Spend per holder (run id).
    by_holder: dict[str, Decimal]

    @property
    def left(self) -> Decimal:
        """What new reservations may still take."""
        return self.cap - self.spent - self.held


class SharedAccount(Protocol):
    """A cap that many holders draw on at once (see the module docstring)."""

    async def reserve(self, holder: str, amount: Decimal) -> Hold:
        """Holds ``amount`` for ``holder``, or raises :class:`~sopbus.bus.BudgetExhausted` (nothing
        is held then, and the refusal is counted in :attr:`AccountState.refused`)."""
        ...

    async def settle(self, hold: Hold, actual: Decimal) -> None:
        """Frees ``hold`` and spends ``actual`` (the call's real cost) for its holder."""
        ...

    async def release(self, hold: Hold) -> None:
        """Frees ``hold`` without spending."""
        ...

    async def rebase(self, holder: str, spent: Decimal) -> None:
        """``holder``'s spend becomes ``spent`` (its ledger's sum) and its holds are dropped:
        for a run that was killed with calls in flight, before it is resumed."""
        ...

    async def state(self) -> AccountState:
        """The account as it is now."""
        ...


class AccountShare:
    """One holder's view of a :class:`SharedAccount`: what a run's gateway draws on."""

    def __init__(self, account: SharedAccount, holder: str):
        self.account = account
        self.holder = holder

    async def reserve(self, amount: Decimal) -> Hold:
        return await self.account.reserve(self.holder, amount)

    async def settle(self, hold: Hold, actual: Decimal) -> None:
        await self.account.settle(hold, actual)

    async def release(self, hold: Hold) -> None:
        await self.account.release(hold)
