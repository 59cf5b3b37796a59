"""A provider opened for as long as it is used (a run, a worker's life)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from .._protocol import Provider


@asynccontextmanager
async def opened(provider: Provider) -> AsyncIterator[Provider]:
    """``provider``, opened for the ``async with`` block: a provider that holds a connection
    (openai's HTTP client, or a router or recorder around one) is an async context manager
    and is entered and closed; any other is used as it is."""
    if hasattr(provider, "__aenter__"):
        async with provider:  # type: ignore[attr-defined]
            yield provider
    else:
        yield provider
