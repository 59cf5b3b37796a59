"""The installed distribution's version, for ``--version`` and what ``sopbus mcp`` tells
its clients (``serverInfo.version``)."""

from __future__ import annotations


def installed() -> str | None:
    """sopbus's version as pip installed it; ``None`` in a checkout that was never installed.
    Looked up only when asked: ``importlib.metadata`` is not free, and ``--help`` must not
    pay for it."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("sopbus")
    except PackageNotFoundError:
        return None
