"""Small members for testing the bus without roles/ (the bus knows roles only as a protocol)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

import trio

from sopbus.bus import Message, Turn


class Echo:
    """Watches some actions; on each turn publishes one message per reply action."""

    def __init__(
        self,
        name: str,
        watch: Sequence[str] = (),
        *,
        aliases: Sequence[str] = (),
        watch_from: Mapping[str, Iterable[str]] | None = None,
        replies: Sequence[str] = (),
        delay: float = 0.0,
        on_step: Callable[[Sequence[Message], Turn], None] | None = None,
    ):
        self.name = name
        self.aliases = tuple(aliases)
        self.watch = frozenset(watch)
        # Sender subscriptions (sopbus.bus.Member's optional watch_from): action -> senders.
        self.watch_from = {a: frozenset(s) for a, s in (watch_from or {}).items()}
        self.replies = tuple(replies)
        self.delay = delay
        self.on_step = on_step
        self.seen: list[Message] = []
        self.cancelled = False

    async def step(self, news: Sequence[Message], turn: Turn) -> Sequence[Message]:
        self.seen.extend(news)
        if self.on_step is not None:
            self.on_step(news, turn)
        try:
            if self.delay:
                await trio.sleep(self.delay)
        except trio.Cancelled:
            self.cancelled = True
            raise
        return [
            Message(cause_by=a, sent_from=self.name, content=f"{self.name} after {news[-1].id}")
            for a in self.replies
        ]
