"""Termination conditions that combine: small stateful values that are a bus StopCondition.

Each condition is called by the run loop after every round with the messages the round
published, and returns why to stop, or ``None``. They keep state across calls (a message
count, a start time), so build a fresh one per run. Combine them with :class:`AnyOf` (the
first that fires ends the run) or :class:`AllOf` (each must have fired, at any round so
far: a fired condition stays fired, as in AutoGen's ``&``).

Token and spend limits need the run's totals, which only the gateway knows, and the
gateway is made after the team. Such conditions take a ``stats`` callable (the gateway's
:meth:`sopbus.bus.Gateway.stats`) now or later through :meth:`bind_stats`; whoever assembles the
run calls ``bind_stats(gateway.stats)`` on the team's stop condition when it has that
method (composites pass it on). Until bound they cannot fire, and say so once in the log.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from decimal import Decimal
from typing import Protocol

from loguru import logger

from sopbus.bus import GatewayStats, Message
from sopbus.bus.money import money

Stats = Callable[[], GatewayStats]
"""The run's totals so far (:meth:`sopbus.bus.Gateway.stats`)."""


class Condition(Protocol):
    def __call__(self, published: Sequence[Message], round: int) -> str | None: ...


class MaxMessages:
    """Fires once ``limit`` messages caused by ``actions`` (all messages when empty) have
    been published."""

    def __init__(self, limit: int, actions: Iterable[str] = ()) -> None:
        if limit < 1:
            raise ValueError(f"MaxMessages limit must be 1 or more, got {limit}")
        self.limit, self.actions, self.count = limit, frozenset(actions), 0

    def __call__(self, published: Sequence[Message], round: int) -> str | None:
        self.count += sum(1 for m in published if not self.actions or m.cause_by in self.actions)
        if self.count >= self.limit:
            return f"{self.count} messages reached the limit of {self.limit}"
        return None


class TextMention:
    """Fires when a message caused by ``actions`` (all when empty) contains ``text``."""

    def __init__(self, text: str, actions: Iterable[str] = ()) -> None:
        if not text:
            raise ValueError("TextMention needs a non-empty text to look for")
        self.text, self.actions = text, frozenset(actions)

    def __call__(self, published: Sequence[Message], round: int) -> str | None:
        for m in published:
            if (not self.actions or m.cause_by in self.actions) and self.text in m.content:
                return f"{m.sent_from} said {self.text!r}"
        return None


class _NeedsStats:
    def __init__(self, stats: Stats | None) -> None:
        self.stats = stats
        self._warned = False

    def bind_stats(self, stats: Stats) -> None:
        self.stats = stats

    def _totals(self) -> GatewayStats | None:
        if self.stats is None:
            if not self._warned:
                logger.warning(
                    "{} cannot fire: the run did not bind the gateway's stats "
                    "(call bind_stats(gateway.stats) on the team's stop condition)",
                    type(self).__name__,
                )
                self._warned = True
            return None
        return self.stats()


class TokenLimit(_NeedsStats):
    """Fires once the run's prompt plus completion tokens reach ``limit``."""

    def __init__(self, limit: int, stats: Stats | None = None) -> None:
        if limit < 1:
            raise ValueError(f"TokenLimit limit must be 1 or more, got {limit}")
        super().__init__(stats)
        self.limit = limit

    def __call__(self, published: Sequence[Message], round: int) -> str | None:
        totals = self._totals()
        if totals is None:
            return None
        used = totals.tokens
        return f"{used} tokens used, limit {self.limit}" if used >= self.limit else None


class SpendLimit(_NeedsStats):
    """Fires once the run has spent ``limit`` USD (a soft stop below the budget cap)."""

    def __init__(self, limit: Decimal, stats: Stats | None = None) -> None:
        if limit <= 0:
            raise ValueError(f"SpendLimit limit must be > 0, got {limit}")
        super().__init__(stats)
        self.limit = Decimal(limit)

    def __call__(self, published: Sequence[Message], round: int) -> str | None:
        totals = self._totals()
        if totals is None:
            return None
        spent = totals.total_usd
        return f"{money(spent)} spent, limit {money(self.limit)}" if spent >= self.limit else None


class Timeout:
    """Fires once ``seconds`` have passed since the condition was made (at team building,
    just before the run). ``clock`` is injectable for tests."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        if not seconds > 0:
            raise ValueError(f"Timeout seconds must be > 0, got {seconds}")
        self.seconds, self.clock, self.started = seconds, clock, clock()

    def __call__(self, published: Sequence[Message], round: int) -> str | None:
        elapsed = self.clock() - self.started
        return (
            f"{elapsed:.1f} s passed, timeout {self.seconds:g} s"
            if elapsed >= self.seconds
            else None
        )


class _Composite:
    def __init__(self, conditions: Iterable[Condition]) -> None:
        self.conditions = list(conditions)
        if not self.conditions:
            raise ValueError(f"{type(self).__name__} needs at least one condition")

    def bind_stats(self, stats: Stats) -> None:
        for condition in self.conditions:
            bind = getattr(condition, "bind_stats", None)
            if bind is not None:
                bind(stats)


class AnyOf(_Composite):
    """Fires when any of its conditions fires (each is still called every round, so the
    counting ones stay exact)."""

    def __call__(self, published: Sequence[Message], round: int) -> str | None:
        reasons = [r for c in self.conditions if (r := c(published, round))]
        return reasons[0] if reasons else None


class AllOf(_Composite):
    """Fires once every condition has fired, in this round or an earlier one."""

    def __init__(self, conditions: Iterable[Condition]) -> None:
        super().__init__(conditions)
        self.fired: dict[int, str] = {}

    def __call__(self, published: Sequence[Message], round: int) -> str | None:
        for i, condition in enumerate(self.conditions):
            reason = condition(published, round)
            if reason and i not in self.fired:
                self.fired[i] = reason
        if len(self.fired) == len(self.conditions):
            return "; ".join(self.fired[i] for i in range(len(self.conditions)))
        return None
