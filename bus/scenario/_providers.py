"""The providers ``[llm].provider`` may name: one registry, filled by each provider's own
module (``sopbus.bus.llm.register_provider``), read by everything that lists or tests one.

The registry lives beside the scenario schema because the schema checks the name when the
file is loaded, and the schema is below the providers. The built-in providers are listed by
module path only (:data:`_BUILTIN`), so naming them (the schema, ``--provider``'s help)
imports none of them: looking one up imports its module, which registers it. A name with a
colon (``my_llm:EchoProvider``) is a user's own class, resolved by the assembly.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from .._errors import ConfigError
from ._types import Scenario

if TYPE_CHECKING:
    from .._protocol import Provider

ProviderFactory = Callable[["Scenario", Mapping[str, str]], "Provider"]
"""Builds a run's provider from the scenario and the environment (keys, endpoints); raises
:class:`~sopbus.bus.ConfigError` naming the scenario file for what is missing."""

_BUILTIN: dict[str, str] = {
    "sim": "sopbus.bus.llm._sim",
    "openai": "sopbus.bus.llm._openai",
    "replay": "sopbus.bus.llm._replay",
    "anthropic": "sopbus.bus.llm._anthropic",
}
"""The shipped providers, in the order errors list them, each by the module that registers
it. A new built-in provider adds its line here and calls :func:`register_provider`."""


_REGISTERED: dict[str, ProviderSpec] = {}
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.-]*")
_REFERENCE = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")


class ProviderSpec(NamedTuple):
    """A registered provider: its ``name``, its ``factory`` and what it declares (see
    :func:`register_provider` for each capability). A NamedTuple rather than a dataclass:
    the command line imports this module, and dataclasses would import ``inspect``."""

    name: str
    factory: ProviderFactory
    network: bool = False
    simulated: bool = False
    cassette: bool = False
    base_url: bool = False
    base_url_env: str | None = None
    default_base_url: str | None = None
    secret_env: tuple[str, ...] = ()
    key_env: str | None = None

    def make(self, scenario: Scenario, environ: Mapping[str, str]) -> Provider:
        """The run's provider, built by the factory."""
        return self.factory(scenario, environ)

    def endpoint(self, scenario: Scenario, environ: Mapping[str, str]) -> str | None:
        """The URL it calls, credentials blanked (prices only need the host), or ``None``."""
        from .._util import redact_url

        if not self.base_url:
            return None
        url = scenario.llm.base_url or self._env_url(environ) or self.default_base_url
        return None if url is None else redact_url(url)

    def whole_base_url(self, scenario: Scenario, environ: Mapping[str, str]) -> str | None:
        """The base URL to call. A run keeps its URL with the credentials blanked
        (``http://***@host/v1``), so a resumed, replayed or forked run takes the whole URL
        from :attr:`base_url_env` when that is the same URL with credentials."""
        from .._util import MASK, redact_url

        url, from_env = scenario.llm.base_url, self._env_url(environ)
        if url is None or MASK not in url:
            return url or from_env
        if from_env is not None and redact_url(from_env) == url:
            return from_env
        raise ConfigError(
            f"{scenario.path}: the base URL {url} had credentials, which a run does "
            f"not keep; set {self.base_url_env or 'the base URL'} to the whole URL to run it again"
        )

    def missing_key(self, environ: Mapping[str, str]) -> str | None:
        """:attr:`key_env` when ``environ`` has no value for it, else ``None``."""
        return self.key_env if self.key_env and not environ.get(self.key_env) else None

    def secrets(self, environ: Mapping[str, str]) -> tuple[str, ...]:
        """The values of its :attr:`secret_env` in ``environ`` (8 characters or more: a
        shorter placeholder such as ``x`` would blank every ``x`` of a run's files)."""
        return tuple(v for k in self.secret_env if len(v := environ.get(k) or "") >= 8)

    def _env_url(self, environ: Mapping[str, str]) -> str | None:
        return (environ.get(self.base_url_env) or None) if self.base_url_env else None


_CAPABILITIES = frozenset(ProviderSpec._fields) - {"name", "factory"}


def register_provider(name: str, factory: ProviderFactory, **capabilities: Any) -> ProviderSpec:
    """Register ``factory`` as the provider ``[llm].provider = name`` (and ``--provider
    name``) builds; a provider's module calls this at import time. ``factory(scenario,
    environ)`` returns the run's :class:`~sopbus.bus.Provider`. Registering a name again
    replaces it. The capabilities, all optional, say what the rest of sopbus must know:

    * ``network`` (bool): it calls an endpoint over the network, so a sweep runs its runs
      as concurrent tasks (they wait on I/O) rather than one process each.
    * ``simulated`` (bool): its answers are made up by sopbus, not a model's (code they hold
      is trusted by the sandbox; fixture warnings apply).
    * ``cassette`` (bool): it answers from ``[llm].cassette``, which must be given and exist.
    * ``base_url`` (bool): it takes ``[llm].base_url`` (for others it is ignored, with a
      warning) and prices its models at the endpoint it calls.
    * ``base_url_env`` (str): the environment variable with its base URL when the scenario
      gives none (``OPENAI_BASE_URL``); credentials in it are never written to a run.
    * ``default_base_url`` (str): where it calls when neither gives one.
    * ``secret_env`` (tuple of str): environment variables holding its secrets (API keys),
      never written to a run's files.
    * ``key_env`` (str): the variable its factory requires an API key in. ``sopbus
      validate`` checks a file without it (a file is valid whoever holds the key) and
      notes that the run needs it; ``sopbus run`` refuses to start without it.
    """
    if not _NAME.fullmatch(name):
        raise ValueError(
            f"provider name {name!r}: use letters, digits, '_', '-' and '.', starting with "
            f"a letter (a colon marks a user's 'module:Class')"
        )
    spec = new_provider_spec(name, factory, **capabilities)
    _REGISTERED[name] = spec
    return spec


def new_provider_spec(name: str, factory: ProviderFactory, **capabilities: Any) -> ProviderSpec:
    """A :class:`ProviderSpec` checked as :func:`register_provider` checks one, without
    registering it (a user's ``module:Class`` is the scenario's own); ``TypeError`` for a
    capability it does not know."""
    unknown = set(capabilities) - _CAPABILITIES
    if unknown:
        raise TypeError(
            f"unknown capabilities {sorted(unknown)}; expected some of {sorted(_CAPABILITIES)}"
        )
    if "secret_env" in capabilities:
        capabilities["secret_env"] = tuple(capabilities["secret_env"])
    return ProviderSpec(name=name, factory=factory, **capabilities)


def provider_names() -> list[str]:
    """Every provider name ``[llm].provider`` takes, sorted (a user's ``module:Class`` aside)."""
    return sorted({*_BUILTIN, *_REGISTERED})


def listed_providers() -> list[str]:
    """The names as errors and help list them: the shipped ones first, then the others."""
    return [*_BUILTIN, *sorted(set(_REGISTERED) - set(_BUILTIN))]


def is_reference(name: str) -> bool:
    """``name`` is a user's ``module:Class``, not a registered name."""
    return ":" in name


def provider_problem(name: str) -> tuple[str, str] | None:
    """What is wrong with ``name`` as ``[llm].provider``, as ``(what, expected)``, or
    ``None``: a registered name, or a well-formed ``module:Class`` (resolved when the run's
    provider is built, beside the scenario file)."""
    # Imported here: the command line checks --provider with this, and must start fast.
    from .._util import did_you_mean

    if name in _BUILTIN or name in _REGISTERED:
        return None
    if is_reference(name):
        if _REFERENCE.fullmatch(name):
            return None
        return f"invalid provider reference {_q(name)}", 'expected "module:Class"'
    listed = ", ".join(f"`{n}`" for n in listed_providers())
    return (
        f"invalid value {_q(name)}",
        f'expected one of {listed}, or "module:Class" for your own provider'
        + did_you_mean(name, listed_providers()),
    )


def simulated(name: str) -> bool:
    """``name`` is a registered provider whose answers are sopbus's own (the simulator's);
    ``False`` for any other name, registered or not (a user's ``module:Class``)."""
    return name in provider_names() and provider_for(name).simulated


def provider_for(name: str) -> ProviderSpec:
    """The registered provider ``name`` (its module imported on first use), or a
    :class:`~sopbus.bus.ConfigError` with the names it could be."""
    if name not in _REGISTERED and name in _BUILTIN:
        importlib.import_module(_BUILTIN[name])
    spec = _REGISTERED.get(name)
    if spec is not None:
        return spec
    if name in _BUILTIN:
        raise RuntimeError(f"{_BUILTIN[name]} did not register provider {name!r}")
    problem = provider_problem(name)
    what, expected = problem or (f"provider {_q(name)} is a user's class", "")
    raise ConfigError(f"{what}: {expected}")


def every_provider() -> list[ProviderSpec]:
    """Every registered provider, the built-in ones imported (their secrets are a run's)."""
    return [provider_for(name) for name in listed_providers()]


def _q(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
