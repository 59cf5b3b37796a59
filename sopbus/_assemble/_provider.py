"""Which provider a scenario's run calls, and what it costs: the choice ``sopbus run``,
``sopbus worker``, ``validate`` and sweeps make the same way.

``[llm].provider`` names it (``sim``, ``replay`` or ``openai``, configured from the scenario
and the environment), roles declared ``human = true`` are answered by a person in front of
it, and every model the team can call must be priced before any call is made.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from sopbus.bus import MASK, ConfigError, Provider, Redactor, redact_url, url_secrets
from sopbus.bus.llm import opened
from sopbus.bus.money import PriceBook
from sopbus.bus.scenario import Scenario


def innermost(provider: Any) -> Any:
    """The provider behind the wrappers (a person's router, a cassette recorder)."""
    while hasattr(provider, "inner"):
        provider = provider.inner
    return provider


def prompt_counter(provider: Provider) -> Any:
    """What counts a request's prompt on the server for the gateway (the ``openai``
    provider's :meth:`~sopbus.bus.llm.OpenAIProvider.prompt_tokens`, behind any wrapper),
    or ``None``."""
    from sopbus.bus.llm import OpenAIProvider

    inner = innermost(provider)
    return inner.prompt_tokens if isinstance(inner, OpenAIProvider) and inner.tokenize else None


def with_people(
    provider: Provider, roles: list[Any], human_input: Path | None, *, required: bool
) -> Provider:
    """The run's provider, with a person answering the roles declared ``human = true``."""
    humans = [role.name for role in roles if getattr(role, "human", False)]
    if not humans:
        return provider
    from sopbus.bus.llm import HumanProvider, HumanRouter, answers_for

    answers = answers_for(
        human_input, interactive=sys.stdin.isatty(), humans=humans, required=required
    )
    return HumanRouter(provider, HumanProvider(answers))


def checked_prices(
    scenario: Scenario, roles: list[Any], *, endpoint: str | None = None
) -> PriceBook:
    """The price book, with every model the team can call priced (else a ConfigError that
    names the model and the fix) before any call is made. ``endpoint`` (see :func:`endpoint`)
    lets genai-prices price a model at the provider that serves it."""
    prices = PriceBook.load(
        scenario.price_table(), endpoint=endpoint, command_line=scenario.priced_by_flag
    )
    models = {scenario.llm.model} | {m for role in roles for m in role.models() if m}
    for model in sorted(models):
        try:
            prices.price(model)
        except ConfigError as exc:
            raise ConfigError(f"{scenario.path}: {exc}") from None
    return prices


def endpoint(scenario: Scenario, environ: Mapping[str, str]) -> str | None:
    """The URL the ``openai`` provider will call (``[llm].base_url``, else
    ``OPENAI_BASE_URL``, else OpenAI's), its credentials blanked; ``None`` for the other
    providers."""
    if scenario.llm.provider != "openai":
        return None
    from sopbus.bus.llm import DEFAULT_BASE_URL, openai_settings_from_env

    # Redacted: prices only need the host, and the quote names the endpoint it came from.
    return redact_url(
        scenario.llm.base_url or openai_settings_from_env(environ).base_url or DEFAULT_BASE_URL
    )


def make_provider(scenario: Scenario, environ: Mapping[str, str]) -> Provider:
    """The provider ``[llm].provider`` names, configured from the scenario and (for
    ``openai``) the environment: ``OPENAI_API_KEY``, and ``OPENAI_BASE_URL`` when the
    scenario gives no ``base_url``."""
    llm = scenario.llm
    if llm.provider == "sim":
        from sopbus.bus.llm import SimProvider, load_fixtures

        return SimProvider(
            seed=scenario.run.seed,
            latency_ms=llm.latency_ms,
            fixtures=load_fixtures(scenario.fixture_paths()),
            stream=bool(llm.stream),  # not given: off (the live view shows no trickle)
        )
    if llm.provider == "replay":
        from sopbus.bus.llm import ReplayProvider

        cassette = scenario.cassette_path()
        if cassette is None:
            raise ConfigError(
                f"{scenario.path}: provider 'replay' needs a cassette: set "
                f"[llm].cassette to a file recorded with `sopbus run --record FILE`"
            )
        return ReplayProvider(cassette)
    from sopbus.bus.llm import OpenAIProvider, openai_settings_from_env

    env = openai_settings_from_env(environ)
    if not env.api_key:
        raise ConfigError(
            f"{scenario.path}: provider 'openai' needs an API key: set "
            f"OPENAI_API_KEY in the environment or in a .env file in the working "
            f"directory (any value for a local server)"
        )
    return OpenAIProvider(
        base_url=_whole_url(scenario, env.base_url),
        api_key=env.api_key,
        timeout_s=llm.timeout_s,
        idle_timeout_s=llm.idle_timeout_s,
        stream=llm.stream is not False,  # not given: on, where the server can stream
        max_tokens_param=llm.max_tokens_param,
        tokenize=llm.tokenize,
    )


def _whole_url(scenario: Scenario, from_env: str | None) -> str | None:
    """The base URL to call. A run keeps its URL with the credentials blanked
    (``http://***@host/v1``), so a resumed, replayed or forked run takes the whole URL from
    ``OPENAI_BASE_URL`` when that is the same URL with credentials."""
    url = scenario.llm.base_url
    if url is None or MASK not in url:
        return url or from_env
    if from_env is not None and redact_url(from_env) == url:
        return from_env
    raise ConfigError(
        f"{scenario.path}: the base URL {url} had credentials, which a run does "
        f"not keep; set OPENAI_BASE_URL to the whole URL to run it again"
    )


@asynccontextmanager
async def opened_for_run(
    provider: Provider, record: Path | None, redactor: Redactor
) -> AsyncIterator[Provider]:
    """The provider, opened for the run (and wrapped in a recorder with ``--record``, which
    writes through the run's ``redactor`` as the run's own files do)."""
    if record is not None:
        from sopbus.bus.llm import RecordingProvider

        provider = RecordingProvider(provider, record, scrub=redactor.data if redactor else None)
    async with opened(provider) as live:
        yield live


def run_secrets(scenario: Scenario, environ: Mapping[str, str]) -> tuple[str, ...]:
    """What a run must never write: the credentials in its base URL (the scenario's and
    ``OPENAI_BASE_URL``: a run whose kept URL is blanked calls the one from the environment)
    and the API key (see :mod:`sopbus.bus._util._redact`)."""
    from sopbus.bus.llm import openai_settings_from_env

    env = openai_settings_from_env(environ)
    key = env.api_key if env.api_key and len(env.api_key) >= 8 else None
    urls = (scenario.llm.base_url, env.base_url)
    return (
        *(s for url in urls for s in url_secrets(url) if MASK not in s),
        *([key] if key else []),
    )


def with_whole_url(
    environ: Mapping[str, str], scenario: Scenario, origin: Path
) -> Mapping[str, str]:
    """``environ`` with ``OPENAI_BASE_URL`` set to the whole URL that ``scenario``'s blanked
    base URL stands for, taken from the file ``origin`` it was made from (a sweep's
    variants and runs keep their URL blanked; the user's scenario file has it whole), when
    the environment does not give it already. The URL stays in memory, never in a file."""
    kept = scenario.llm.base_url
    if kept is None or MASK not in kept or environ.get("OPENAI_BASE_URL"):
        return environ
    for url in _credentialed_urls(origin):
        if redact_url(url) == kept:
            return {**environ, "OPENAI_BASE_URL": url}
    return environ


def _credentialed_urls(path: Path) -> list[str]:
    """The strings of the TOML file at ``path`` that are URLs with credentials (its
    ``[llm].base_url``, the values of a ``[sweep.set]``); none when it cannot be read."""
    import tomllib

    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return []
    found: list[str] = []
    pending: list[Any] = [doc]
    while pending:
        value = pending.pop()
        if isinstance(value, dict):
            pending += value.values()
        elif isinstance(value, list):
            pending += value
        elif isinstance(value, str) and redact_url(value) != value:
            found.append(value)
    return found
