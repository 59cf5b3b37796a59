"""A provider opened for as long as it is used (a run, a worker's life)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from .._protocol import Provider


@asynccontextmanager
async def opened(provider: Provider) -> AsyncIterator[Provider]:
    """``provider``, opened for the ``async with`` block: a provider that holds a connection
    (openai's HTTP client, or a router or recorder around one) opens and closes it there;
    for any other, opening does nothing (:class:`~sopbus.bus.ProviderBase`)."""
    async with provider:
        yield provider
