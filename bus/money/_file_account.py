"""A :class:`~sopbus.bus.money._account.SharedAccount` in a JSON file, for the processes of one machine.

Every operation is one transaction: take an exclusive ``fcntl.flock`` on a lock file
beside the account, read the account, change it, write it to a temporary file and
``os.replace`` it over the old one, drop the lock. The lock serialises the processes (and
the threads of one process: each transaction opens its own descriptor, and ``flock``
locks belong to the open file, not to the process), so no update is lost and no
reservation is checked against a stale total. ``os.replace`` makes each state appear
whole: a reader without the lock, or a process killed mid-write, never sees half a file.
The kernel drops the lock of a killed process.

The file (``budget.json``) is small and readable::

    {"cap": "0.50", "spent": {"<run id>": "0.0043", ...},
     "holds": {"<hold id>": ["<run id>", "0.0025"], ...}, "refused": 0}

Transactions run in a worker thread (``trio.to_thread``), so a process waiting for the
lock does not stop its other tasks. They are not abandoned on cancellation: a reservation
that was made is always returned to the caller, which releases it.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any, TypeVar

from .._errors import BudgetExhausted, ConfigError
from ._account import AccountState, Hold
from ._book import Book, checked_cap, decoder, encoder, new_hold

T = TypeVar("T")


class FileAccount:
    """The account in ``path`` (see the module docstring). ``fix`` ends a refusal's message:
    how the user raises the cap."""

    def __init__(self, path: Path, *, fix: str = "raise the shared budget"):
        self.path = path
        self._lock_path = path.with_name(path.name + ".lock")
        self._fix = fix

    @classmethod
    def create(
        cls, path: Path, cap: Decimal, *, fix: str = "raise the shared budget"
    ) -> FileAccount:
        """A new account with ``cap`` and nothing spent; an existing file is an error."""
        if path.exists():
            raise ConfigError(f"{path} already holds an account; open it instead of creating it")
        account = cls(path, fix=fix)
        account._write(Book(cap=checked_cap(cap)))
        return account

    # -- the SharedAccount protocol ----------------------------------------------------

    async def reserve(self, holder: str, amount: Decimal) -> Hold:
        return await _in_thread(self.reserve_now, holder, amount)

    async def settle(self, hold: Hold, actual: Decimal) -> None:
        await _in_thread(self.settle_now, hold, actual)

    async def release(self, hold: Hold) -> None:
        await _in_thread(self.settle_now, hold, Decimal(0))

    async def rebase(self, holder: str, spent: Decimal) -> None:
        await _in_thread(self.rebase_now, holder, spent)

    async def state(self) -> AccountState:
        return self.read()

    # -- the same, synchronous (for code outside trio) ------------------------------------

    def reserve_now(self, holder: str, amount: Decimal) -> Hold:
        hold = new_hold(holder, amount)
        refusal = self._transact(lambda book: book.reserve(hold, self._fix))
        if refusal is not None:
            raise BudgetExhausted(refusal)
        return hold

    def settle_now(self, hold: Hold, actual: Decimal) -> None:
        if not self._transact(lambda book: book.settle(hold, actual)):
            # A rebase dropped it (the holder was resumed elsewhere) or it closed twice.
            raise RuntimeError(f"{hold!r} is not held in {self.path}")

    def rebase_now(self, holder: str, spent: Decimal) -> None:
        self._transact(lambda book: book.rebase(holder, spent))

    def set_cap(self, cap: Decimal) -> None:
        """A new cap (a resumed sweep given a larger ``--budget``); the refusal count
        starts again, since the money may last now."""
        self._transact(lambda book: book.set_cap(cap))

    def read(self) -> AccountState:
        """The account now (no lock needed: every state is written whole)."""
        try:
            book = decoder.decode(self.path.read_bytes())
        except FileNotFoundError:
            raise ConfigError(f"no shared account at {self.path}") from None
        return book.state()

    # -- the transaction -------------------------------------------------------------------

    def _transact(self, change: Callable[[Book], T]) -> T:
        fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            book = decoder.decode(self.path.read_bytes())
            result = change(book)
            self._write(book)
            return result
        finally:
            os.close(fd)  # releases the lock

    def _write(self, book: Book) -> None:
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(encoder.encode(book))
        os.replace(tmp, self.path)


async def _in_thread(function: Callable[..., T], *args: Any) -> T:
    import trio  # here, not at the top: bus.money is imported by light CLI commands

    return await trio.to_thread.run_sync(function, *args)
