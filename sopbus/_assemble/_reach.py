"""Is the model server there? One TCP connect to the provider's endpoint before a live run
starts, so that a base URL where nothing listens is a configuration error with the fix
(exit 2, no run directory), not a run that fails its first call after its retries.

Asked of providers that declare ``network`` and ``base_url`` (the registry's capabilities);
a connect is the cheapest question every OpenAI-compatible server answers, and it needs no
key, no model and no money.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlsplit

import trio

from sopbus.bus import ConfigError, Scenario, redact_url
from sopbus.bus.scenario import ProviderSpec

CONNECT_WAIT_S = 10.0
"""How long the connect may take: a server on the same machine answers in milliseconds,
a hosted one in well under a second; past this, the calls would not fare better."""


async def check_endpoint(
    scenario: Scenario, spec: ProviderSpec, environ: Mapping[str, str]
) -> None:
    """Raises :class:`~sopbus.bus.ConfigError` when nothing listens at the base URL ``spec``
    would call for ``scenario``; returns at once for a provider without one."""
    if not (spec.network and spec.base_url):
        return
    url = spec.whole_base_url(scenario, environ) or spec.default_base_url
    if url is None:
        return
    parts = urlsplit(url)
    host = parts.hostname
    if not host:
        return  # not a URL a connect can test; the provider's own error says more
    port = parts.port or (443 if parts.scheme == "https" else 80)
    why = await _connect(host, port)
    if why is None:
        return
    variable = f", or {spec.base_url_env} in the environment" if spec.base_url_env else ""
    raise ConfigError(
        f"{scenario.path}: nothing answers at the model server {redact_url(url)} "
        f"(provider {scenario.llm.provider!r}): tried a TCP connect to {host}:{port}, {why}; "
        f"start the server, or name the one that runs with --base-url URL (or [llm].base_url"
        f"{variable}); the docs' Local models page (local-models.md) gives each server's URL"
    )


async def _connect(host: str, port: int) -> str | None:
    """``None`` when a connection opens, else what happened."""
    with trio.move_on_after(CONNECT_WAIT_S):
        try:
            stream = await trio.open_tcp_stream(host, port)
        except OSError as exc:
            return _said(exc)
        await stream.aclose()
        return None
    return f"which had no answer within {CONNECT_WAIT_S:g} s"


def _said(exc: BaseException) -> str:
    # trio wraps the error of each address it tried in a group; the first says enough.
    while isinstance(exc, BaseExceptionGroup) or (
        exc.__cause__ is not None and not getattr(exc, "strerror", None)
    ):
        inner = exc.exceptions[0] if isinstance(exc, BaseExceptionGroup) else exc.__cause__
        if inner is None:
            break
        exc = inner
    text = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return f"which failed: {text}"
