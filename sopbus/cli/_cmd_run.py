"""``sopbus run SCENARIO [flags]``: run a scenario.

This module parses the flags, loads the scenario and lays the flags over it; the team is
assembled and run by :func:`sopbus._assemble._execute.run_scenario`, which returns the exit code.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ._args import path_arg
from ._flags import (
    BUDGET,
    BUS_FLAGS,
    HUMAN_INPUT,
    MAX_ROUNDS,
    MODE,
    MODEL_FLAGS,
    PROGRESS_FLAGS,
    REPORT,
    RUN_SETTINGS,
    RUNS_DIR_OVERRIDE,
    SANDBOX,
    SCENARIO,
    SEED,
    Flag,
    add,
)

if TYPE_CHECKING:
    from pathlib import Path

    from sopbus.bus import Scenario

NAME = "run"
HELP = "run a scenario: live progress, then a summary and the run directory"

# Flags that override a value of the scenario file, as scenario_with_overrides names them.
OVERRIDES = (
    "idea",
    "provider",
    "model",
    "base_url",
    "budget_usd",
    "max_rounds",
    "seed",
    "mode",
    "runs_dir",
    "sandbox",
    "price",
)


IDEA = Flag("--idea", metavar="TEXT", help="the first message (overrides [scenario].idea)")
RECORD = Flag(
    "--record",
    metavar="FILE",
    type=path_arg,
    help="record every LLM call into a replay cassette",
)
INJECT = Flag(
    "--inject",
    metavar="FILE",
    type=path_arg,
    action="append",
    help="a TOML file of [[inject]] entries (as in a scenario: round and message), added to "
    "the scenario's; may be given more than once",
)
OTEL = Flag(
    "--otel",
    action="store_true",
    help="send the run's trace over OTLP/HTTP when it ends (also when an "
    "OTEL_EXPORTER_OTLP_ENDPOINT variable is set; needs sopbus[otel])",
)


def configure(parser: argparse.ArgumentParser) -> None:
    add(parser, SCENARIO, IDEA, *MODEL_FLAGS, BUDGET, MAX_ROUNDS, SEED, MODE)
    add(parser, RUNS_DIR_OVERRIDE, SANDBOX, RECORD, INJECT, HUMAN_INPUT, OTEL, REPORT, RUN_SETTINGS)
    add(parser, *PROGRESS_FLAGS, *BUS_FLAGS)


def run(args: argparse.Namespace) -> int:
    from sopbus._examples import scenario_path
    from sopbus.bus import load_scenario, scenario_with_overrides

    scenario = with_set(load_scenario(scenario_path(args.scenario)), args)
    scenario = scenario_with_overrides(scenario, **overrides(args))
    for path in getattr(args, "inject", None) or ():
        scenario = with_injections(scenario, path)
    # Imported after loading, so that a wrong file is reported before anything heavy loads.
    from ._running import run_command

    return run_command(scenario, args)


def with_set(scenario: Scenario, args: argparse.Namespace) -> Scenario:
    """``scenario`` with the ``--set KEY=VALUE`` settings laid over it, by the code fork and
    sweep use (a key of the file, a TOML value)."""
    settings = tuple(getattr(args, "settings", None) or ())
    if not settings:
        return scenario
    from sopbus.bus.store import with_settings

    return with_settings(scenario, settings, at_round=0)


def with_injections(scenario: Scenario, path: Path) -> Scenario:
    """``scenario`` with the ``[[inject]]`` entries of the file at ``path`` added (a user's
    edits, e.g. board writes for the book writer); errors name the file and ``$.inject[i]``."""
    import msgspec

    from sopbus.bus import ConfigError, InjectSpec, read_user_toml

    data = read_user_toml(path, "--inject file")
    try:
        found = msgspec.convert(data.get("inject", []), tuple[InjectSpec, ...])
    except msgspec.ValidationError as exc:
        raise ConfigError(f"--inject file {path}: {str(exc).replace('`$', '`$.inject')}") from None
    if set(data) - {"inject"}:
        raise ConfigError(
            f"--inject file {path} may hold only [[inject]] entries; found "
            f"{', '.join(sorted(set(data) - {'inject'}))}"
        )
    if not found:
        raise ConfigError(f"--inject file {path} has no [[inject]] entries")
    empty = [i for i, item in enumerate(found) if not item.content and item.payload is None]
    if empty:
        raise ConfigError(
            f"--inject file {path}: $.inject[{empty[0]}] is an empty message; "
            f"give it content or a payload"
        )
    return msgspec.structs.replace(scenario, inject=(*scenario.inject, *found))


def overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The override flags the user gave (``None`` ones left out), as the scenario holds
    them: ``--runs-dir`` parses to a path, as in every command, and ``[run].runs_dir`` is
    text."""
    given = {name: value for name in OVERRIDES if (value := getattr(args, name, None)) is not None}
    if "runs_dir" in given:
        given["runs_dir"] = str(given["runs_dir"])
    return given
