"""Which provider a scenario's run calls, and what it costs: the choice ``sopbus run``,
``sopbus worker``, ``validate`` and sweeps make the same way.

``[llm].provider`` names a registered provider (``sopbus.bus.llm.register_provider``: each
provider's module registers itself with its factory and what it declares) or a user's
``"module:Class"`` (:mod:`._user_provider`); :func:`provider_spec` is the one place that
tells them apart. Roles declared ``human = true`` are answered by a person in front of it,
and every model the team can call must be priced before any call is made.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from sopbus.bus import (
    MASK,
    ConfigError,
    PriceBook,
    Provider,
    Redactor,
    Scenario,
    redact_url,
    url_secrets,
)
from sopbus.bus.llm import PromptCounter, opened
from sopbus.bus.scenario import ProviderSpec, every_provider, is_reference, provider_for


def provider_spec(scenario: Scenario) -> ProviderSpec:
    """What ``[llm].provider`` names: the registered provider, or a user's class (imported
    from beside the scenario file, checked, see :mod:`._user_provider`)."""
    name = scenario.llm.provider
    if is_reference(name):
        from ._user_provider import user_provider

        return user_provider(scenario)
    try:
        return provider_for(name)
    except ConfigError as exc:
        raise ConfigError(f"{scenario.path}: {exc} - at `$.llm.provider`") from None


def prompt_counter(provider: Provider) -> PromptCounter | None:
    """What counts a request's prompt on the server for the gateway (the ``openai``
    provider's, behind any wrapper), or ``None``."""
    return provider.prompt_counter()


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
    """The URL the provider will call (``[llm].base_url``, else its variable such as
    ``OPENAI_BASE_URL``, else its default), its credentials blanked; ``None`` for a
    provider that declares no ``base_url``. Prices may depend on it."""
    return provider_spec(scenario).endpoint(scenario, environ)


def make_provider(scenario: Scenario, environ: Mapping[str, str]) -> Provider:
    """The provider ``[llm].provider`` names, built by its factory from the scenario and
    the environment (keys, endpoints)."""
    return provider_spec(scenario).make(scenario, environ)


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
    """What a run must never write: the credentials in its base URL (the scenario's and each
    provider's variable, such as ``OPENAI_BASE_URL``: a run whose kept URL is blanked calls
    the one from the environment) and every provider's secrets, such as ``OPENAI_API_KEY``
    (see :mod:`sopbus.bus._util._redact`). Every provider's, not only the run's: a resumed run
    may be switched to another."""
    specs = {spec.name: spec for spec in (*every_provider(), provider_spec(scenario))}
    variables = [spec.base_url_env for spec in specs.values() if spec.base_url_env]
    urls = (scenario.llm.base_url, *(environ.get(v) for v in variables))
    return (
        *(s for url in urls for s in url_secrets(url) if MASK not in s),
        *dict.fromkeys(secret for spec in specs.values() for secret in spec.secrets(environ)),
    )


def with_whole_url(
    environ: Mapping[str, str], scenario: Scenario, origin: Path
) -> Mapping[str, str]:
    """``environ`` with the provider's base URL variable (``OPENAI_BASE_URL``) set to the
    whole URL that ``scenario``'s blanked base URL stands for, taken from the file ``origin``
    it was made from (a sweep's variants and runs keep their URL blanked; the user's scenario
    file has it whole), when the environment does not give it already. The URL stays in
    memory, never in a file."""
    kept, variable = scenario.llm.base_url, provider_spec(scenario).base_url_env
    if kept is None or MASK not in kept or variable is None or environ.get(variable):
        return environ
    for url in _credentialed_urls(origin):
        if redact_url(url) == kept:
            return {**environ, variable: url}
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
