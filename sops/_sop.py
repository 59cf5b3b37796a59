"""What a procedure (SOP) is: a named recipe that builds a team from a scenario.

An SOP does not wire roles together; it only chooses which roles there are and what each
watches, plus how the run starts (the seed messages) and when it stops (a stop condition).
The bus does the rest.

The SOPs a scenario can name by a plain word are the registry: the built-in ones (the
modules of ``sopbus.sops.builtin``, each with a module attribute ``SOP``) and those that
installed packages register under the entry-point group ``sopbus.sops``. Every list of
SOPs reads :func:`registered_sops`. A user's own SOP is also named by reference,
``"package.module:attribute"``.
"""

from __future__ import annotations

import os
import re
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import msgspec

from sopbus.bus import (
    ConfigError,
    Injection,
    Judge,
    Message,
    Scenario,
    StopCondition,
    WriteArtifact,
    closest,
)
from sopbus.roles import LLMSettings, Registry, Role

from ._import import import_sop_module

S = TypeVar("S")


@dataclass
class Team:
    """What a run needs from an SOP.

    ``roles`` in declared order (the order they publish in within a round); ``seed`` the
    first messages (default: the scenario's idea as ``UserRequirement`` from ``Boss``);
    ``stop`` a condition checked after each round (if it has a ``bind_stats(stats)``
    method, the run hands it the gateway's ``stats`` callable before starting); ``finish`` runs
    once at the end, before the verdict, with ``write(path, data)``, which writes an artifact
    through the run's record as a role's turn does (so ``sopbus verify`` sees it), e.g. to
    assemble a book; it is not called without a run store;
    ``verdict`` judges what the run produced (a :class:`sopbus.bus.RunRecord`) and says whether
    the procedure did what it is for (a :class:`sopbus.bus.Verdict`; ``None``: no verdict).
    ``workspace`` (optional) prepares the run's own files before its tool servers start:
    ``workspace(run_dir, live) -> {mcp server name: folder}`` (a folder the SOP made in
    ``run_dir``, or one the user named), and those servers run in those folders; it is called
    for replays too (``live`` false: no server starts), so a verdict finds the same files.
    ``bounds`` names the roles that end the cycles through them themselves, each with the
    limit it enforces (``{"Edward": "at most max_test_rounds = 3 bug reports"}``):
    ``validate`` then does not warn that such a cycle is bounded only by the round limit.
    ``populations`` are the scenario's ``[[populations]]`` (:class:`sopbus.roles.Population`),
    each one member of the bus for all its agents, joining after the roles.
    """

    roles: list[Role]
    seed: list[Message] = field(default_factory=list)
    stop: StopCondition | None = None
    injections: list[Injection] = field(default_factory=list)
    finish: Callable[[WriteArtifact], None] | None = None
    verdict: Judge | None = None
    bounds: dict[str, str] = field(default_factory=dict)
    tools: dict[str, Any] = field(default_factory=dict)  # Python tools (@sopbus.tool) by name
    workspace: Callable[[Path, bool], Mapping[str, Path]] | None = None
    populations: list[Any] = field(default_factory=list)  # sopbus.roles.Population, after roles


@dataclass(frozen=True)
class SopContext:
    """What an SOP's ``build`` gets: the scenario, its ``[sop]`` options, the registry of
    actions and roles for this scenario (built-ins plus the file's own declarations) and
    the scenario's default LLM settings for every role it builds."""

    scenario: Scenario
    registry: Registry
    llm_defaults: LLMSettings

    @property
    def options(self) -> Mapping[str, Any]:
        return self.scenario.sop_options

    def options_as(self, kind: type[S]) -> S:
        """The ``[sop]`` table decoded into ``kind`` (a msgspec Struct with defaults), with
        the file, the ``$.sop.<key>`` path and the closest valid key on a mistake."""
        return options_as(self.options, kind, self.scenario.path)

    def resolve(self, relative: str) -> Path:
        """A data file named in the scenario, relative to the scenario file."""
        return self.scenario.resolve(relative)


@dataclass(frozen=True)
class SOP:
    """A procedure: ``build(ctx) -> Team``.

    ``verdict`` (optional) is the procedure's verdict on every run of a team it builds:
    ``verdict(record: bus.RunRecord) -> bus.Verdict | None``. It replaces the verdict the
    built team carries (``Team.verdict``), so a user's SOP that reuses another's ``build``
    can state its own; a ``build`` whose verdict depends on its options sets
    ``Team(verdict=...)`` instead.
    """

    name: str
    description: str
    build: Callable[[SopContext], Team]
    verdict: Judge | None = None


BUILTIN_PACKAGE = "sopbus.sops.builtin"
ENTRY_POINT_GROUP = "sopbus.sops"
"""The entry-point group under which an installed package registers its SOPs by name
(``my_sop = "my_package.module:SOP"``); ``[scenario].sop = "my_sop"`` then names it."""
_BUILTIN_DIR = Path(__file__).parent / "builtin"


@dataclass(frozen=True)
class SopEntry:
    """One SOP of the registry: the ``name`` a scenario gives it, the ``ref``
    (``"module:attribute"``) it is loaded from, and where it comes from (``"built-in"`` or
    the distribution that registers it, ``"my-sops 0.1 (entry point)"``)."""

    name: str
    ref: str
    origin: str = "built-in"


def builtin_sops() -> list[str]:
    """The names of the built-in SOPs: the modules of ``sopbus.sops.builtin``."""
    # A directory listing, without importing anything: every scenario load asks, and
    # pkgutil would import inspect (~15 ms) for the same list.
    return sorted(
        file.removesuffix(".py")
        for file in os.listdir(_BUILTIN_DIR)
        if file.endswith(".py") and not file.startswith("_")
    )


def registered_sops() -> dict[str, SopEntry]:
    """Every SOP a scenario can name by a plain word, by name: the built-in ones, then those
    of installed packages (entry points ``sopbus.sops``). A built-in name wins over an
    installed one, and the first installed package on the path over a later one."""
    found = {name: SopEntry(name, f"{BUILTIN_PACKAGE}.{name}:SOP") for name in builtin_sops()}
    for name, entry in _installed_sops().items():
        found.setdefault(name, entry)
    return found


def _installed_sops() -> dict[str, SopEntry]:
    # Read only when a name is not built-in, or for a listing: scanning the installed
    # distributions costs tens of milliseconds that a run of a built-in SOP need not pay.
    from importlib.metadata import entry_points

    found: dict[str, SopEntry] = {}
    for point in entry_points(group=ENTRY_POINT_GROUP):
        dist = f"{point.dist.name} {point.dist.version}" if point.dist else "a package"
        ref = point.value if ":" in point.value else f"{point.value}:SOP"
        found.setdefault(point.name, SopEntry(point.name, ref, f"{dist} (entry point)"))
    return found


def get_sop(ref: str, *, where: str = "$.scenario.sop", path: Path | None = None) -> SOP:
    """The SOP a scenario names: a registered name (:func:`registered_sops`) or
    ``"module:attribute"``."""
    file = f"{path}: " if path else ""
    if ":" not in ref:
        entry = _entry(ref, where, file)
        ref, where = entry.ref, where if entry.origin == "built-in" else f"{where} ({entry.origin})"
    module_name, _, attr = ref.partition(":")
    module = import_sop_module(module_name, path.parent if path else None, where, file)
    if not hasattr(module, attr):
        raise ConfigError(f"{file}{_missing(module, attr, ref, where)}")
    sop = getattr(module, attr)
    if not isinstance(sop, SOP):
        raise ConfigError(
            f"{file}{ref!r} at {where} is not an SOP: {module_name}.{attr} in "
            f"{_module_file(module)} is a {type(sop).__name__}; point it at a "
            f"sops.SOP(name=..., description=..., build=...) value"
        )
    return sop


def _entry(name: str, where: str, file: str) -> SopEntry:
    """The registry's entry for ``name``, or a ConfigError with the names there are."""
    if name in builtin_sops():
        return SopEntry(name, f"{BUILTIN_PACKAGE}.{name}:SOP")
    known = registered_sops()
    if name in known:
        return known[name]
    near = closest(name, known)
    hint = f"; did you mean {near[0]!r}?" if near else ""
    raise ConfigError(
        f"{file}unknown SOP {name!r} at {where}: the SOPs are {', '.join(known)} "
        f"(`sopbus sops` lists them), or name your own as 'module:attribute'{hint}"
    )


def _missing(module: Any, attr: str, ref: str, where: str) -> str:
    """Why ``module`` has no SOP at ``attr``: what is missing, in which file, and what the
    module does hold."""
    found = [name for name, value in vars(module).items() if isinstance(value, SOP)]
    has = (
        f"; it has {', '.join(f'{module.__name__}:{n}' for n in found)}, name one of those"
        if found
        else ""
    )
    return (
        f"{ref!r} at {where}: module {module.__name__} ({_module_file(module)}) has no "
        f"attribute {attr!r}; define `{attr} = sops.SOP(name=..., description=..., "
        f"build=...)` in it{has}"
    )


def _module_file(module: Any) -> str:
    return str(getattr(module, "__file__", None) or f"module {module.__name__}")


def options_as(options: Mapping[str, Any], kind: type[S], path: Path | None = None) -> S:
    """``options`` converted to ``kind``, with errors that say where and what is valid."""
    file = f"{path}: " if path else ""
    fields = getattr(kind, "__struct_fields__", ())
    for key in options:
        if key not in fields:
            near = closest(key, fields)
            hint = f"; did you mean `{near[0]}`?" if near else ""
            raise ConfigError(
                f"{file}unknown key `{key}` - at `$.sop.{key}`: this SOP takes "
                f"{', '.join(fields) or 'no options'}{hint}"
            )
    try:
        return msgspec.convert(dict(options), kind)
    except msgspec.ValidationError as exc:
        if missing := re.fullmatch(r"Object missing required field `(\w+)`", str(exc)):
            raise ConfigError(f"{file}{_missing_option(missing[1], kind)}") from None
        text = str(exc).replace("- at `$", "- at `$.sop")
        raise ConfigError(f"{file}{text}{_choices(kind, text)}") from None


def _missing_option(key: str, kind: type) -> str:
    """A required ``[sop]`` key left out: where it goes and how to write it (msgspec names
    the key only, with no path)."""
    hint = typing.get_type_hints(kind).get(key)
    item = (
        typing.get_args(hint)[0]
        if typing.get_origin(hint) is list and typing.get_args(hint)
        else None
    )
    if isinstance(item, type) and hasattr(item, "__struct_fields__"):
        keys = ", ".join(item.__struct_fields__)
        how = f"add a [[sop.{key}]] table for each entry (keys: {keys})"
    else:
        how = f"add `{key} = ...` to the [sop] table"
    return f"missing required key `{key}` - at `$.sop.{key}`: this SOP needs it; {how}"


def _choices(kind: type, error: str) -> str:
    """For a wrong value of a ``Literal`` option (``$.sop.strategy``, or in a table such as
    ``$.sop.termination.mode``), the values it may take: msgspec names only the wrong one."""
    found = re.match(r"Invalid enum value .* - at `\$\.sop\.([\w.]+)`$", error)
    if found is None:
        return ""
    hint: Any = kind
    for key in found.group(1).split("."):
        # `T | None` tables: look inside T
        inner = [a for a in typing.get_args(hint) if a is not type(None)] or [hint]
        hint = typing.get_type_hints(inner[0]).get(key) if isinstance(inner[0], type) else None
    values = typing.get_args(hint) if typing.get_origin(hint) is typing.Literal else ()
    return f"; choose one of {', '.join(repr(v) for v in values)}" if values else ""
