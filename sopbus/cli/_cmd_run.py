"""``sopbus run SCENARIO [flags]``: run a scenario.

This module parses the flags, loads the scenario and lays the flags over it; the team is
assembled and run by :func:`sopbus._assemble._execute.run_scenario`, which returns the exit code.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ._args import add_model_args, add_output_args, path_arg, positive_int, usd
from ._busargs import add_bus_args

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


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "scenario",
        metavar="SCENARIO",
        type=path_arg,
        help="a scenario file (TOML), or the name of a shipped one (sopbus examples)",
    )
    parser.add_argument(
        "--idea", metavar="TEXT", help="the first message (overrides [scenario].idea)"
    )
    add_model_args(parser)
    parser.add_argument(
        "--budget",
        dest="budget_usd",
        metavar="USD",
        type=usd,
        help="budget cap in USD (overrides [run].budget_usd)",
    )
    parser.add_argument(
        "--max-rounds",
        metavar="N",
        type=positive_int,
        help="round limit (overrides [run].max_rounds)",
    )
    parser.add_argument("--seed", metavar="N", type=int, help="seed (overrides [run].seed)")
    parser.add_argument(
        "--mode", choices=("rounds", "events"), help="scheduling (overrides [run].mode)"
    )
    parser.add_argument(
        "--runs-dir", metavar="DIR", help="where run directories go (overrides [run].runs_dir)"
    )
    parser.add_argument(
        "--sandbox",
        choices=("auto", "bwrap", "local"),
        help="how model-written code runs (overrides [sandbox].backend): bwrap "
        "isolates it (bubblewrap), local does not, auto takes bwrap when "
        "installed",
    )
    parser.add_argument(
        "--record",
        metavar="FILE",
        type=path_arg,
        help="record every LLM call into a replay cassette",
    )
    parser.add_argument(
        "--inject",
        metavar="FILE",
        type=path_arg,
        action="append",
        help="a TOML file of [[inject]] entries (as in a scenario: round and "
        "message), added to the scenario's; may be given more than once",
    )
    parser.add_argument(
        "--human-input",
        metavar="PATH",
        type=path_arg,
        help="answers for roles with human = true, one a line (a file or a named "
        "pipe; a JSON object for an action with output fields); default: ask "
        "on the terminal",
    )
    parser.add_argument(
        "--otel",
        action="store_true",
        help="send the run's trace over OTLP/HTTP when it ends (also when an "
        "OTEL_EXPORTER_OTLP_ENDPOINT variable is set; needs sopbus[otel])",
    )
    parser.add_argument(
        "--report",
        action="store_true",
        help="write the run's HTML report (report.html in the run directory) at the end",
    )
    add_output_args(parser)
    add_bus_args(parser)


def run(args: argparse.Namespace) -> int:
    from sopbus._examples import scenario_path
    from sopbus.bus import load_scenario, scenario_with_overrides

    scenario = scenario_with_overrides(
        load_scenario(scenario_path(args.scenario)), **overrides(args)
    )
    for path in getattr(args, "inject", None) or ():
        scenario = with_injections(scenario, path)
    # Imported after loading, so that a wrong file is reported before anything heavy loads.
    from ._running import run_command

    return run_command(scenario, args)


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
    """The override flags the user gave (``None`` ones left out)."""
    return {name: value for name in OVERRIDES if (value := getattr(args, name, None)) is not None}
