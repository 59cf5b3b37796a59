"""Retries: a call that failed for a reason worth another try (a 429, a 500, a dropped
connection: :attr:`~sopbus.bus.ProviderError.retryable`) is made again, after a backoff
that doubles, or the pause the server asked for, whichever is longer."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from .._errors import ProviderError

T = TypeVar("T")


class Retries:
    """``backoff_s`` before the second attempt, doubling after; a wait past
    ``max_backoff_s`` fails the call instead. ``sleep`` waits (tests pass a recorder)."""

    def __init__(
        self, *, backoff_s: float, max_backoff_s: float, sleep: Callable[[float], Awaitable[None]]
    ):
        self._backoff_s, self._max_backoff_s, self._sleep = backoff_s, max_backoff_s, sleep

    async def run(self, attempt: Callable[[int], Awaitable[T]], attempts: int) -> T:
        """``attempt(retry)`` for ``retry`` 0, 1, ... until one returns, one raises what is
        not retryable, or ``attempts`` are used up (the last error is raised)."""
        for retry in range(attempts):
            try:
                return await attempt(retry)
            except ProviderError as error:
                if not error.retryable or retry + 1 == attempts:
                    raise
                await self._sleep(self.delay(error, retry))
        raise AssertionError("unreachable: the last attempt returns or raises")

    def delay(self, error: ProviderError, retry: int) -> float:
        """The wait after the failed ``retry``; raises ``error`` when it is too long."""
        delay = max(self._backoff_s * 2**retry, error.retry_after or 0.0)
        if delay > self._max_backoff_s:
            raise error
        return delay
