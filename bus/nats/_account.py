"""A :class:`~sopbus.bus.money._account.SharedAccount` on one JetStream KV key: one cap for the
processes of many machines (a run's workers, a sweep's workers).

The whole book (cap, spend per holder, holds, refusals, leases) is one value changed by
compare-and-swap (:meth:`sopbus.bus.nats.Link.swap_key`), so ``spent + held <= cap`` holds
at every revision; holders heartbeat leases on their own wall clock, and lapsed holders'
holds are released. The format, the leases and their clock-skew trade-off are described
in docs/design/nats.md ("The budget on one KV key").
"""

from __future__ import annotations

import time
from collections.abc import Callable
from decimal import Decimal
from typing import Any, TypeVar

import trio

from .._errors import BudgetExhausted, ConfigError
from ..money import AccountState, Book, Hold, checked_cap, decoder, encoder, money, new_hold
from ._link import Link

T = TypeVar("T")


#: A change of the book: returns (whether to write it, the operation's result).
Change = Callable[[Book], tuple[bool, T]]


class NatsAccount:
    """The account under ``key`` in the KV bucket ``bucket`` (see the module docstring).
    :meth:`open` it first. ``fix`` ends a refusal's message: how the user raises the cap."""

    def __init__(
        self, link: Link, bucket: str, key: str = "budget", *, fix: str = "raise the budget"
    ):
        self.link, self.bucket, self.key = link, bucket, key
        self._fix = fix
        self._kv: Any = None

    async def open(self, cap: Decimal | None) -> None:
        """Opens the bucket (created if absent) and the account: created with ``cap`` when
        there is none (atomically: of several processes opening at once, one creates it).
        An existing account keeps its cap; ``None`` joins it whatever its cap is (a
        worker), a different cap is a :class:`~sopbus.bus.ConfigError`. No account and no cap is
        one too: the process that starts the run or sweep creates it."""
        if cap is not None:
            checked_cap(cap)
        self._kv = await self.link.key_value(self.bucket)
        await self._swap(
            self._opening(cap), absent=encoder.encode(Book(cap=cap)) if cap is not None else None
        )

    def _opening(self, cap: Decimal | None) -> Change[None]:
        def change(book: Book) -> tuple[bool, None]:
            if cap is not None and book.cap != cap:
                raise ConfigError(
                    f"the shared account {self._where} already exists with a cap of {money(book.cap)}, "
                    f"not {money(cap)}: join it without a cap, or give a new bucket for a new cap"
                )
            return False, None

        return change

    # -- the SharedAccount protocol ----------------------------------------------------

    async def reserve(self, holder: str, amount: Decimal) -> Hold:
        hold = new_hold(holder, amount)
        refusal = await self._swap(lambda book: (True, book.reserve(hold, self._fix)))
        if refusal is not None:
            raise BudgetExhausted(refusal)
        return hold

    async def settle(self, hold: Hold, actual: Decimal) -> None:
        if not await self._swap(lambda book: ((held := book.settle(hold, actual)), held)):
            raise RuntimeError(
                f"{hold!r} is not held in {self._where}: a rebase dropped it (its holder was "
                f"resumed elsewhere), its holder's lease lapsed, or it was closed twice"
            )

    async def release(self, hold: Hold) -> None:
        await self.settle(hold, Decimal(0))

    async def rebase(self, holder: str, spent: Decimal) -> None:
        def change(book: Book) -> tuple[bool, None]:
            book.rebase(holder, spent)
            return True, None

        await self._swap(change)

    async def state(self) -> AccountState:
        return await self._swap(lambda book: (False, book.state()))

    # -- leases and the cap ----------------------------------------------------------------

    async def heartbeat(self, holder: str, lease_s: float) -> None:
        """``holder`` is alive until ``lease_s`` seconds from now (see "Leases" in the module
        docstring); call it well within the lease, again and again."""
        if not lease_s > 0:
            raise ValueError(f"a lease is longer than 0 s, got {lease_s!r}")

        def change(book: Book) -> tuple[bool, None]:
            book.leases[holder] = time.time() + lease_s  # read at each try: the write's time
            return True, None

        await self._swap(change)

    async def release_lapsed(self) -> list[str]:
        """Releases (spending nothing) the holds of every holder whose lease lapsed, forgets
        those leases, and returns the holders, sorted (those without holds too: they are
        gone all the same). A holder that never heartbeated is never among them."""

        def change(book: Book) -> tuple[bool, list[str]]:
            now = time.time()
            lapsed = sorted(h for h, until in book.leases.items() if until < now)
            for holder in lapsed:
                del book.leases[holder]
            book.holds = {k: v for k, v in book.holds.items() if v[0] not in lapsed}
            return bool(lapsed), lapsed

        return await self._swap(change)

    async def set_cap(self, cap: Decimal) -> None:
        """A new cap (a resumed sweep given a larger budget); the refusal count starts
        again, since the money may last now."""
        checked_cap(cap)

        def change(book: Book) -> tuple[bool, None]:
            book.set_cap(cap)
            return True, None

        await self._swap(change)

    # -- the compare-and-swap ----------------------------------------------------------------

    @property
    def _where(self) -> str:
        return f"{self.bucket}/{self.key} on {self.link.url}"

    async def _swap(self, change: Change[T], *, absent: bytes | None = None) -> T:
        """Applies ``change`` to the book in one compare-and-swap loop; ``absent`` is the
        book to create when the key has none (else that is an error)."""
        if self._kv is None:
            raise RuntimeError(f"open() the account {self.bucket}/{self.key} before using it")

        def on_value(value: bytes | None) -> tuple[bytes | None, T]:
            stored = value if value is not None else absent
            if stored is None:
                raise ConfigError(
                    f"no shared account at {self._where}: the process that starts "
                    f"the run or sweep creates it with the cap"
                )
            book = decoder.decode(stored)  # decoded at each try: a retry starts afresh
            write, result = change(book)
            return (encoder.encode(book) if write or value is None else None), result

        with trio.CancelScope(shield=True):
            result = await self.link.swap_key(self._kv, self.key, on_value)
        return result
