"""A sweep's matrix: which variants of a scenario run with which seeds.

The variants are the product of the values of each ``--set key=v1,v2`` (and of the
``[sweep.set]`` table of the file, which a flag of the same key replaces); each variant runs
once per seed. A key is a dotted key of the scenario file and each value a TOML value, as
``sopbus fork --set`` reads them (a bare word is a string). Values are split at commas
outside brackets, braces and quotes: ``--set 'sop.files=["a","b"],["c"]'`` is two values.

Runs go seed by seed, each seed through every variant (v1 s0, v2 s0, v1 s1, ...), so when the
sweep's money runs out the variants compared have had the same seeds.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

import msgspec

from sopbus.bus import ConfigError
from sopbus.bus.scenario import MAX_BUDGET_USD, Scenario
from sopbus.bus.store import with_settings

_RANGE = re.compile(r"\s*(-?\d+)\s*(?:\.\.\s*(-?\d+)\s*)?")


class Variant(msgspec.Struct, frozen=True, kw_only=True):
    """One combination of settings; ``id`` is ``v1``, ``v2``, ... in matrix order."""

    id: str
    settings: tuple[tuple[str, Any], ...]

    @property
    def label(self) -> str:
        """``llm.model=gpt-4o sop.review=false``, or ``(as the file says)``."""
        return " ".join(f"{k}={toml_literal(v)}" for k, v in self.settings) or "(as the file says)"


def seeds_from(
    count: int | None, span: str | None, spec: int | str | Sequence[int] | None, default: int
) -> tuple[int, ...]:
    """The seeds: ``--seeds N`` (0 to N-1), ``--seed A..B`` (inclusive), else the file's
    ``[sweep].seeds`` (a count, a range or a list), else the scenario's one seed."""
    if count is not None and span is not None:
        raise ConfigError("--seeds and --seed name the seeds twice; give one of them")
    if count is not None:
        return tuple(range(count))
    if span is not None:
        return seed_range(span, "--seed")
    if spec is None:
        return (default,)
    if isinstance(spec, int):
        if spec < 1:
            raise ConfigError(
                f"[sweep].seeds = {spec}: expected a count of 1 or more, a range "
                f'such as "0..4", or a list of seeds'
            )
        return tuple(range(spec))
    if isinstance(spec, str):
        return seed_range(spec, "[sweep].seeds")
    if not spec:
        raise ConfigError("[sweep].seeds = []: name at least one seed")
    return tuple(dict.fromkeys(spec))


def seed_range(text: str, where: str) -> tuple[int, ...]:
    match = _RANGE.fullmatch(text)
    first, last = (int(match[1]), int(match[2] or match[1])) if match else (1, 0)
    if first > last:
        raise ConfigError(
            f"{where} {text!r}: expected a range of seeds A..B with A <= B, "
            f"such as 0..4 (or one seed)"
        )
    return tuple(range(first, last + 1))


def variants_from(flags: Sequence[str], table: Mapping[str, Any]) -> tuple[Variant, ...]:
    """The variants of ``--set`` flags laid over the ``[sweep.set]`` table."""
    axes: dict[str, list[Any]] = {key: _as_values(value) for key, value in _flat(table)}
    for flag in flags:
        key, sep, raw = flag.partition("=")
        if not sep or not key.strip() or not raw.strip():
            raise ConfigError(
                f"--set {flag!r}: expected key=value1,value2,..., such as "
                f"llm.model=gpt-4o-mini,gpt-4o"
            )
        axes[key.strip()] = [toml_value(part) for part in split_values(raw)]
    for key, values in axes.items():
        if not values:
            raise ConfigError(f"[sweep.set] {key!r} has no values; give at least one")
    keys = list(axes)
    combos = itertools.product(*(axes[k] for k in keys))
    return tuple(
        Variant(id=f"v{i}", settings=tuple(zip(keys, combo, strict=True)))
        for i, combo in enumerate(combos, start=1)
    )


def _flat(table: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    # `llm.model = [...]` unquoted in TOML is a nested table; both spellings mean the same key.
    out: list[tuple[str, Any]] = []
    for key, value in table.items():
        if isinstance(value, dict):
            out.extend(_flat(value, f"{prefix}{key}."))
        else:
            out.append((f"{prefix}{key}", value))
    return out


def _as_values(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def split_values(raw: str) -> list[str]:
    """``raw`` cut at the commas outside ``[]``, ``{}`` and quotes."""
    parts, depth, quote, start = [], 0, "", 0
    for i, char in enumerate(raw):
        if quote:
            quote = "" if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(raw[start:i])
            start = i + 1
    parts.append(raw[start:])
    return [p.strip() for p in parts]


def toml_value(raw: str) -> Any:
    """``raw`` as a TOML value; what is not one is the string itself (``gpt-4o``)."""
    try:
        return msgspec.toml.decode(f"v = {raw}".encode())["v"]
    except msgspec.DecodeError:
        return raw


def toml_literal(value: Any) -> str:
    """``value`` written as TOML writes it (``"gpt-4o"``, ``true``, ``[1, 2]``)."""
    text: str = msgspec.toml.encode({"v": value}).decode()
    return text.partition("=")[2].strip()


def variant_scenario(base: Scenario, variant: Variant) -> Scenario:
    """``base`` with the variant's settings (a bad key is a :class:`~sopbus.bus.ConfigError` naming
    it, as ``sopbus fork --set`` reports it) and without its ``[sweep]`` table."""
    settings = tuple(f"{key}={toml_literal(value)}" for key, value in variant.settings)
    scenario = with_settings(base, settings, at_round=0) if settings else base
    return msgspec.structs.replace(scenario, sweep=None)


def sweep_budget(given: Decimal | None, file: Decimal | None, caps: Sequence[Decimal]) -> Decimal:
    """The sweep's cap: ``--budget``, else ``[sweep].budget_usd``, else the runs' caps added
    up (then only each run's own cap binds)."""
    budget = given if given is not None else file
    if budget is None:
        return sum(caps, Decimal(0))
    if not budget.is_finite() or budget <= 0:
        raise ConfigError(
            f"[sweep].budget_usd = {budget}: expected an amount of USD greater than 0"
        )
    if budget > MAX_BUDGET_USD:
        raise ConfigError(
            f"[sweep].budget_usd = {budget}: expected at most ${MAX_BUDGET_USD:,}, the "
            f"largest budget sopbus accepts"
        )
    return budget
