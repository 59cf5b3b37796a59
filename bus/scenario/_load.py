"""Loading a scenario file: TOML -> :class:`Scenario`, or a :class:`ConfigError` that says
exactly what to fix.

Loading has two steps. msgspec decodes the file into the Structs of
``_scenario_types`` (types, unknown keys, enums, integer ranges); then :func:`_problems`
checks what a type cannot say (money, files that must exist, one rule across tables).
Both report ``<file>: <what> - at `$.path`: <expected>; did you mean ...?``. The second
step reports every problem at once, since fixing one does not hide the next.

Provider names are checked here against the provider registry (:mod:`._providers`); a
user's ``"module:Class"`` only for its form, as its module is imported when the run's
provider is built. Names of actions, roles and SOPs are *not* checked here: the registry that knows them
lives in ``sopbus.roles``/``sopbus.sops``, which check them when they build the team.
"""

from __future__ import annotations

import json
import re
import typing
from collections.abc import Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import msgspec

from .._errors import ConfigError
from .._util import decode_user_text, nesting_depth, not_regular, read_user_bytes
from ._errors import (
    PathToken,
    explain_syntax_error,
    explain_validation_error,
    format_path,
    syntax_error_place,
)
from ._extra import scenario_extra_problems
from ._names import ROLE_NAME_FIX, role_name_problem
from ._paths import inside, outside_problem
from ._population import population_problems
from ._price import price_spec
from ._providers import is_reference, listed_providers, provider_for, provider_problem
from ._sections import schema_errors
from ._types import (
    MAX_BUDGET_USD,
    MAX_ROUNDS,
    ActionSpec,
    RoleSpec,
    RunMode,
    SandboxBackend,
    Scenario,
    ScenarioDoc,
)
from ._typespec import TYPE_SPECS, TypeSpecError, parse_type_spec

BUDGET_ABOVE_MAX = f"expected at most ${MAX_BUDGET_USD:,}, the largest budget sopbus accepts"
# TOML allows no control character but tab and line breaks, anywhere: one is binary data.
_CONTROL_BYTE = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_SOP_REF = re.compile(r"[A-Za-z_][\w-]*|[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")
_FIELD_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_CLASS_REF = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")


def load_scenario(
    path: Path | str, *, base_dir: Path | None = None, quote: bool = True
) -> Scenario:
    """Decode and check the scenario file at ``path``.

    Relative files it names (``llm.fixtures``, ``llm.cassette``) are resolved against its
    directory (or ``base_dir``: a run directory's copy names the original's files) and must
    exist, inside that directory unless the file says ``allow_outside = true``. Raises
    :class:`ConfigError` naming the file, the place (``$.roles[0].watch[1]``), what was
    expected and the closest valid names.

    A syntax error quotes the line only when ``quote`` and the file is named ``.toml``;
    ``quote=False`` (for a caller who is not the file's owner, such as an MCP client)
    also keeps the bytes of a file that is not UTF-8 out of the message, and calls a TOML
    document without a ``[scenario]`` table no scenario instead of describing its keys.
    """
    path = Path(path)
    shown = str(path)
    named_toml = path.suffix.lower() == ".toml"
    doc = _decode(_scenario_text(path, named_toml and quote), shown, quote=named_toml and quote)
    absolute = path.resolve()
    fields = {f: getattr(doc, f) for f in doc.__struct_fields__}
    base = absolute.parent if base_dir is None else base_dir.resolve()
    scenario = Scenario(**fields, path=absolute, base_dir=base)
    check_scenario(scenario, shown)
    return scenario


def scenario_from_tables(
    tables: Mapping[str, Any], *, path: Path, shown: str, classes: Mapping[str, Any] | None = None
) -> Scenario:
    """The scenario that a file holding ``tables`` (its TOML tables as Python values: what a
    ``sopbus.Team`` says) would load as, decoded and checked as :func:`load_scenario` checks a
    file; ``path`` is where that file would be (its folder resolves relative files), ``shown``
    what errors call it. ``classes`` are Python classes the team names by ``module:Class``,
    handed over in-process (see :attr:`Scenario.classes`)."""
    try:
        doc = msgspec.convert(tables, type=ScenarioDoc)
    except msgspec.ValidationError as error:
        raise ConfigError(_every_error(shown, dict(tables), error)) from None
    fields = {f: getattr(doc, f) for f in doc.__struct_fields__}
    scenario = Scenario(**fields, path=path, base_dir=path.parent, classes=dict(classes or {}))
    check_scenario(scenario, shown)
    return scenario


def action_spec(name: str, table: Mapping[str, Any], shown: str) -> ActionSpec:
    """The ``[actions.<name>]`` table ``table`` (Python values), decoded and checked as a
    scenario file's is; a :class:`ConfigError` that starts with ``shown`` names what to fix."""
    # Decoded as part of a whole file, so that a mistake's path reads as in a file.
    raw = {"scenario": {"name": name}, "actions": {name: dict(table)}}
    try:
        spec = msgspec.convert(raw, type=ScenarioDoc).actions[name]
    except msgspec.ValidationError as error:
        raise ConfigError(f"{shown}: {explain_validation_error(error, raw, ScenarioDoc)}") from None
    problems = action_problems({name: spec})
    if problems:
        raise ConfigError("\n".join(f"{shown}: {problem}" for problem in problems))
    return spec


def _scenario_text(path: Path, named_toml: bool) -> str:
    """The scenario file's text. A file that is binary, or not UTF-8 and not named ``.toml``,
    is not a TOML file, and is said to be one without a byte of it: ``sopbus validate
    /etc/shadow`` must not print what it read."""
    data = read_user_bytes(path, "scenario file")
    if _CONTROL_BYTE.search(data):
        raise ConfigError(_not_toml(path, "it holds binary data, control bytes TOML forbids"))
    if named_toml:
        return decode_user_text(data, path, "scenario file")  # names the byte, to fix it
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(_not_toml(path, "it is not UTF-8 text")) from None


def _not_toml(path: Path, why: str, kind: str = "TOML") -> str:
    return (
        f"{path}: not a {kind} file ({why}); a scenario is a UTF-8 TOML file such as "
        f"team.toml with a [scenario] table: check the path (the file's content is not shown)"
    )


def _decode(text: str, shown: str, *, quote: bool = True) -> ScenarioDoc:
    """``text`` decoded; a syntax error quotes the line only when ``quote`` (the file is
    named ``.toml``: a TOML file with a typo, not some other file given by mistake)."""
    try:
        return msgspec.toml.decode(text, type=ScenarioDoc)
    except msgspec.ValidationError as error:
        raw = msgspec.toml.decode(text)  # parsed fine a moment ago: only the types were wrong
        if not quote and not isinstance(raw.get("scenario"), dict):
            raise ConfigError(_not_toml(Path(shown), "no [scenario] table", "scenario")) from None
        raise ConfigError(_every_error(shown, raw, error)) from None
    except msgspec.DecodeError as error:
        if not quote:
            raise ConfigError(
                _not_toml(Path(shown), f"a TOML syntax error at {syntax_error_place(error)}")
            ) from None
        raise ConfigError(f"{shown}: {explain_syntax_error(error, text)}") from None
    except RecursionError:
        depth = nesting_depth(text)
        raise ConfigError(
            f"{shown}: arrays or tables nested {depth} levels deep, more than the "
            f"TOML parser can follow; a scenario needs a few levels at most: "
            f"flatten it"
        ) from None


def _every_error(shown: str, raw: dict[str, Any], error: msgspec.ValidationError) -> str:
    """Every section's schema error, one line each, as :func:`check_scenario` lists
    problems: fixing the first mistake of a file should not be the way to find the next."""
    return "\n".join(f"{shown}: {problem}" for problem in schema_errors(raw, error))


def check_scenario(scenario: Scenario, shown: str | None = None) -> None:
    """Raise :class:`ConfigError` listing every rule ``scenario`` breaks (one per line), or
    return. ``shown`` is the file name to print (default: ``scenario.path``)."""
    problems = _problems(scenario)
    if problems:
        where = shown or str(scenario.path)
        raise ConfigError("\n".join(f"{where}: {problem}" for problem in problems))


def _at(tokens: list[PathToken], what: str, expected: str = "") -> str:
    """One problem, worded like msgspec's own errors: ``<what> - at `$.path`: <expected>``."""
    return f"{what} - at `{format_path(tokens)}`" + (f": {expected}" if expected else "")


def _q(value: object) -> str:
    """A value quoted as TOML writes it: ``"Rita"``, not Python's ``'Rita'``."""
    return json.dumps(value)


def _problems(s: Scenario) -> list[str]:
    return [
        *_info_problems(s),
        *_money_problems(s),
        *_llm_problems(s),
        *_provider_problems(s),
        *scenario_extra_problems(s),
        *_role_problems(s),
        *action_problems(s.actions),
        *_inject_problems(s),
        *_mcp_problems(s),
        *[_at(tokens, what, fix) for tokens, what, fix in population_problems(s.populations)],
    ]


def _mcp_problems(s: Scenario) -> list[str]:
    out: list[str] = []
    for name, server in s.mcp.items():
        if not name or not name.replace("_", "a").replace("-", "a").isalnum() or name == "py":
            out.append(
                _at(
                    ["mcp", name],
                    f"bad tool server name {_q(name)}",
                    "use letters, digits, _ and - (the first part of its tools' names); "
                    "py is the Python tools' own",
                )
            )
        if (server.command is None) == (server.url is None):
            out.append(
                _at(
                    ["mcp", name],
                    "both command and url" if server.command else "neither command nor url",
                    'give exactly one: command = "mcp-server-git" (a server over stdio, '
                    'args = [...]) or url = "http://127.0.0.1:8931/mcp" (streamable HTTP)',
                )
            )
        if server.price_per_call is not None and server.price_per_call < 0:
            out.append(_at(["mcp", name, "price_per_call"], "a negative price", "0 or more USD"))
    return out


def _info_problems(s: Scenario) -> list[str]:
    out: list[str] = []
    if not s.info.name.strip():
        out.append(_at(["scenario", "name"], "empty name", "give the scenario a name"))
    if s.info.sop is None and not s.roles and not s.populations:
        out.append(
            _at(
                ["scenario", "sop"],
                "no SOP and no roles",
                'set sop = "<built-in SOP>" or "module:attribute", or declare the team with [[roles]]',
            )
        )
    elif s.info.sop is not None and not _SOP_REF.fullmatch(s.info.sop):
        out.append(
            _at(
                ["scenario", "sop"],
                f"invalid SOP reference {_q(s.info.sop)}",
                'expected a built-in SOP\'s name or "module:attribute"',
            )
        )
    return out


def _money_problems(s: Scenario) -> list[str]:
    out: list[str] = []
    budget = s.run.budget_usd
    if not budget.is_finite() or budget <= 0:
        out.append(
            _at(
                ["run", "budget_usd"],
                f"budget {budget}",
                "expected an amount of USD greater than 0, such as 3.0",
            )
        )
    elif budget > MAX_BUDGET_USD:
        out.append(_at(["run", "budget_usd"], f"budget {budget}", BUDGET_ABOVE_MAX))
    for model, price in s.prices.items():
        for key, value in (
            ("input", price.input),
            ("output", price.output),
            ("cached_input", price.cached_input),
            ("cache_write", price.cache_write),
        ):
            if value is not None and (not value.is_finite() or value < 0):
                out.append(
                    _at(
                        ["prices", model, key],
                        f"price {value}",
                        "expected USD per 1M tokens, 0 or more",
                    )
                )
    return out


def _llm_problems(s: Scenario) -> list[str]:
    out: list[str] = []
    for i, name in enumerate((*s.llm.fixtures, *([s.llm.cassette] if s.llm.cassette else []))):
        if not s.info.allow_outside and not inside(s.base_dir / name, s.base_dir):
            key: list[PathToken] = (
                ["llm", "fixtures", i] if i < len(s.llm.fixtures) else ["llm", "cassette"]
            )
            out.append(_at(key, *outside_problem(name, s.base_dir)))
    if out:
        return out
    for i, fixture in enumerate(s.llm.fixtures):
        if kind := not_regular(s.resolve(fixture)):
            out.append(
                _at(
                    ["llm", "fixtures", i],
                    f"fixture file {_q(fixture)} is not a regular file (it is {kind})",
                    "point it at a file",
                )
            )
        elif not s.resolve(fixture).is_file():
            out.append(
                _at(
                    ["llm", "fixtures", i],
                    f"fixture file {_q(fixture)} not found",
                    f"looked for {s.resolve(fixture)} (paths are relative to the scenario file)",
                )
            )
    return out


def _provider_problems(s: Scenario) -> list[str]:
    """An unknown ``[llm].provider``, or what the named one needs and does not have."""
    problem = provider_problem(s.llm.provider)
    if problem is not None:
        return [_at(["llm", "provider"], *problem)]
    if is_reference(s.llm.provider) or not provider_for(s.llm.provider).cassette:
        return []
    cassette = s.llm.cassette
    if cassette and not s.info.allow_outside and not inside(s.base_dir / cassette, s.base_dir):
        return []  # _llm_problems says so already
    return _cassette_problems(s)


def _cassette_problems(s: Scenario) -> list[str]:
    """What is wrong with ``[llm].cassette`` for a provider that answers from one."""
    out: list[str] = []
    cassette = s.cassette_path()
    if cassette is None:
        out.append(
            _at(
                ["llm", "cassette"],
                "no cassette",
                f"provider {_q(s.llm.provider)} needs "
                'cassette = "<file recorded with sopbus run --record>"',
            )
        )
    elif kind := not_regular(cassette):
        out.append(
            _at(
                ["llm", "cassette"],
                f"cassette file {_q(s.llm.cassette)} is not a regular file (it is {kind})",
                "point it at a file",
            )
        )
    elif not cassette.is_file():
        out.append(
            _at(
                ["llm", "cassette"],
                f"cassette file {_q(s.llm.cassette)} not found",
                f"looked for {cassette} (paths are relative to the scenario file)",
            )
        )
    return out


def _role_problems(s: Scenario) -> list[str]:
    out: list[str] = []
    first_at: dict[str, int] = {}
    for i, role in enumerate(s.roles):
        if not role.name.strip():
            out.append(_at(["roles", i, "name"], "empty role name"))
        elif problem := role_name_problem(role.name):
            out.append(_at(["roles", i, "name"], problem, ROLE_NAME_FIX))
        elif role.name in first_at:
            out.append(
                _at(
                    ["roles", i, "name"],
                    f"role {_q(role.name)} is declared twice",
                    f"first at {format_path(['roles', first_at[role.name]])}; merge the two",
                )
            )
        else:
            first_at[role.name] = i
        for j, alias in enumerate(role.aliases or ()):
            if problem := role_name_problem(alias):
                out.append(_at(["roles", i, "aliases", j], problem, ROLE_NAME_FIX))
        out.extend(_class_ref_problems(role, i))
    return out


def _class_ref_problems(role: RoleSpec, i: int) -> list[str]:
    """Python classes named in a role entry are written ``"module:Class"``."""
    refs: list[tuple[list[PathToken], str]] = (
        [(["roles", i, "class"], role.cls)] if role.cls else []
    )
    for key in ("watch", "actions"):
        for j, ref in enumerate(getattr(role, key) or ()):
            place: list[PathToken] = ["roles", i, key, j]
            if not isinstance(ref, str):  # a sender subscription: { action = ..., from = [...] }
                ref, place = ref.action, [*place, "action"]
            if ":" in ref:
                refs.append((place, ref))
    return [
        _at(place, f"invalid class reference {_q(ref)}", 'expected "module:Class"')
        for place, ref in refs
        if not _CLASS_REF.fullmatch(ref)
    ]


def action_problems(actions: Mapping[str, ActionSpec]) -> list[str]:
    """What is wrong with ``[actions.X]`` tables beyond their types (an empty instruction, a
    bad output field or type spec), one problem each with its ``$.actions.X`` path."""
    out: list[str] = []
    for name, action in actions.items():
        if not action.instruction.strip():
            out.append(
                _at(
                    ["actions", name, "instruction"],
                    "empty instruction",
                    "say what the action must do",
                )
            )
        for field, spec in (action.output or {}).items():
            out.extend(_output_field_problems(["actions", name, "output", field], field, spec))
    return out


def _output_field_problems(tokens: list[PathToken], field: str, spec: str) -> list[str]:
    if not _FIELD_NAME.fullmatch(field):
        return [
            _at(
                tokens,
                f"invalid output field name {_q(field)}",
                "expected a letter followed by letters, digits or _",
            )
        ]
    try:
        parse_type_spec(spec)
    except TypeSpecError as error:
        return [_at(tokens, error.problem, f"expected {TYPE_SPECS}{error.hint}")]
    return []


def _inject_problems(s: Scenario) -> list[str]:
    out: list[str] = []
    for i, item in enumerate(s.inject):
        if not item.content and item.payload is None:
            out.append(_at(["inject", i], "empty message", "give it content or a payload"))
    return out


def scenario_warnings(scenario: Scenario) -> list[str]:
    """Things that are allowed but probably not meant, one sentence each with its path."""
    out = []
    for i, item in enumerate(scenario.inject):
        if item.round > scenario.run.max_rounds:
            out.append(
                f"{format_path(['inject', i, 'round'])}: round {item.round} is after "
                f"the last round ({scenario.run.max_rounds}); it will never be sent"
            )
    name = scenario.llm.provider
    if scenario.llm.base_url is not None and not is_reference(name):
        if not provider_for(name).base_url:
            takers = [n for n in listed_providers() if provider_for(n).base_url]
            out.append(
                f"$.llm.base_url: ignored by provider {_q(name)} "
                f"(only {' and '.join(map(_q, takers)) or 'none'} use{'s' if len(takers) == 1 else ''} it)"
            )
    return out


def scenario_with_overrides(
    scenario: Scenario,
    *,
    idea: str | None = None,
    provider: str | None = None,
    model: str | None = None,
    base_url: str | None = None,
    budget_usd: Decimal | int | str | None = None,
    max_rounds: int | None = None,
    seed: int | None = None,
    mode: RunMode | None = None,
    runs_dir: str | Path | None = None,
    sandbox: SandboxBackend | None = None,
    price: Sequence[Decimal | int | str] | None = None,
) -> Scenario:
    """``scenario`` with the command line's flags laid over the file; ``None`` keeps the
    file's value. The result is checked again (``--provider replay`` needs a cassette).

    ``price`` is ``(input, output)`` or ``(input, output, cached_input)`` in USD per 1M
    tokens (``--price``): it prices the run's model (after ``model``) as a ``[prices]``
    entry would, over the file's entry for that model, so a local model needs no edited
    copy of the scenario."""
    _check_flags(provider=provider, mode=mode, max_rounds=max_rounds, idea=idea)
    cap = None if budget_usd is None else _decimal(budget_usd)
    if cap is not None and cap.is_finite() and cap > MAX_BUDGET_USD:
        # Said before any run directory exists: 1e26 once failed only when it was printed.
        raise ConfigError(f"--budget {budget_usd}: {BUDGET_ABOVE_MAX}")
    info = _replace(scenario.info, idea=idea)
    llm = _replace(scenario.llm, provider=provider, model=model, base_url=base_url)
    run = _replace(
        scenario.run,
        max_rounds=max_rounds,
        seed=seed,
        mode=mode,
        budget_usd=cap,
        runs_dir=None if runs_dir is None else str(runs_dir),
    )
    if sandbox is not None and sandbox not in typing.get_args(SandboxBackend):
        raise ConfigError(
            f"--sandbox {sandbox!r}: expected one of {', '.join(typing.get_args(SandboxBackend))}"
        )
    box = _replace(scenario.sandbox, backend=sandbox)
    prices, flagged = scenario.prices, scenario.priced_by_flag
    if price is not None:
        prices, flagged = {**prices, llm.model: price_spec(price)}, flagged | {llm.model}
    result = msgspec.structs.replace(
        scenario, info=info, llm=llm, run=run, sandbox=box, prices=prices, priced_by_flag=flagged
    )
    check_scenario(result)
    return result


def _check_flags(
    *, provider: str | None, mode: str | None, max_rounds: int | None, idea: str | None
) -> None:
    # The command line checks these already; a caller of the Python API gets the same words.
    if idea is not None and not idea.strip():
        # An empty first message starts nobody: the run would end at once, "completed".
        raise ConfigError(
            f"--idea {idea!r}: the first message is empty; say the idea in words, or leave "
            "--idea out to use the scenario's [scenario].idea"
        )
    if provider is not None and (problem := provider_problem(provider)) is not None:
        raise ConfigError(f"--provider {provider!r}: {problem[1]}")
    if mode is not None and mode not in typing.get_args(RunMode):
        raise ConfigError(f"--mode {mode!r}: expected one of {', '.join(typing.get_args(RunMode))}")
    if max_rounds is not None and not 1 <= max_rounds <= MAX_ROUNDS:
        raise ConfigError(f"--max-rounds {max_rounds}: expected a number from 1 to {MAX_ROUNDS}")


def _replace(struct: Any, **changes: Any) -> Any:
    given = {k: v for k, v in changes.items() if v is not None}
    return msgspec.structs.replace(struct, **given) if given else struct


def _decimal(value: Decimal | int | str) -> Decimal:
    try:
        return Decimal(str(value))
    except ArithmeticError:
        raise ConfigError(f"budget {value!r}: expected an amount of USD such as 3.0") from None


def scenario_to_builtins(scenario: Scenario) -> dict[str, Any]:
    """The scenario as its file would say it (TOML keys, ``Decimal`` as strings), plus its
    ``path``: what a run directory records as "the scenario as run"."""
    doc = ScenarioDoc(**{f: getattr(scenario, f) for f in ScenarioDoc.__struct_fields__})
    out: dict[str, Any] = msgspec.to_builtins(doc)
    out["path"] = str(scenario.path)
    return out
