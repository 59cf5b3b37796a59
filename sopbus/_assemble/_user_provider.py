"""A user's own provider, named by reference: ``[llm].provider = "my_llm:EchoProvider"``.

The module is imported as a user's SOP module is (beside the scenario file first, bounded in
time, what it does at import time reported with its file and line). The class must have an
``async def complete(self, request)`` and a ``name``; it is built with
``EchoProvider.from_scenario(scenario, environ)`` when it defines that classmethod, else with
``EchoProvider()``. Its capabilities (those of ``register_provider``) are its class attribute
``capabilities``, a dict. It goes through the same gateway as every provider: reserved before
each call, priced, ledgered and capped.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from sopbus.bus import ConfigError, Provider, Scenario
from sopbus.bus.llm import ProviderSpec, as_provider
from sopbus.bus.scenario import new_provider_spec

_WHERE = "$.llm.provider"
_SHAPE = (
    "a class with name = '...' and async def complete(self, request) -> Completion "
    "(subclass sopbus.bus.ProviderBase for the optional members)"
)


def user_provider(scenario: Scenario) -> ProviderSpec:
    """The provider class ``[llm].provider`` names, checked, as a :class:`ProviderSpec`
    (a ConfigError naming the file, the field and the fix otherwise)."""
    from sopbus.sops import import_sop_module

    ref = scenario.llm.provider
    module_name, _, attr = ref.partition(":")
    file = f"{scenario.path}: "
    module = import_sop_module(module_name, scenario.path.parent, _WHERE, file, kind="provider")
    shown = getattr(module, "__file__", None) or f"module {module_name}"
    cls = getattr(module, attr, None)
    if cls is None:
        raise ConfigError(
            f"{file}{ref!r} at {_WHERE}: module {module_name} ({shown}) has no attribute "
            f"{attr!r}; define {_SHAPE} named {attr} in it" + _held(module)
        )
    if not inspect.isclass(cls) or not inspect.iscoroutinefunction(getattr(cls, "complete", None)):
        what = "a class without async def complete" if inspect.isclass(cls) else type(cls).__name__
        raise ConfigError(
            f"{file}{ref!r} at {_WHERE} is not a provider: {module_name}.{attr} in {shown} is "
            f"{what}; point it at {_SHAPE}"
        )
    return _spec(ref, cls, file)


def _spec(ref: str, cls: type, file: str) -> ProviderSpec:
    capabilities = getattr(cls, "capabilities", None) or {}
    if not isinstance(capabilities, Mapping):
        raise ConfigError(
            f"{file}{ref!r} at {_WHERE}: {cls.__name__}.capabilities is a "
            f"{type(capabilities).__name__}; make it a dict such as {{'network': True}}"
        )

    def factory(scenario: Scenario, environ: Mapping[str, str]) -> Provider:
        return _built(ref, cls, scenario, environ, file)

    try:
        # Not kept in the registry: the reference is the scenario's own, resolved per file.
        return new_provider_spec(ref, factory, **dict(capabilities))
    except TypeError as exc:
        raise ConfigError(
            f"{file}{ref!r} at {_WHERE}: {cls.__name__}.capabilities: {exc}"
        ) from None


def _built(
    ref: str, cls: type, scenario: Scenario, environ: Mapping[str, str], file: str
) -> Provider:
    make = getattr(cls, "from_scenario", None)
    provider = make(scenario, environ) if callable(make) else cls()
    name = getattr(provider, "name", None)
    if not isinstance(name, str) or not name:
        raise ConfigError(
            f"{file}{ref!r} at {_WHERE}: {cls.__name__} has no name; give it a class "
            f"attribute name = '...' (the ledger's provider column)"
        )
    return as_provider(provider)


def _held(module: Any) -> str:
    """The provider classes ``module`` does hold, to name instead."""
    found = [
        name
        for name, value in vars(module).items()
        if inspect.isclass(value)
        and inspect.iscoroutinefunction(getattr(value, "complete", None))
        and value.__module__ == module.__name__
    ]
    listed = ", ".join(f"{module.__name__}:{n}" for n in found)
    return f"; it has {listed}, name one of those" if found else ""
