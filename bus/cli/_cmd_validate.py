"""``sopbus validate SCENARIO``: check a scenario file without running it.

Step 1 (here): decode the file, resolve the files it names, and print what it declares.
Step 2 (the team, added with the team assembly): build the team from the SOP and the
file's roles without running it, check every name in ``watch``/``actions`` against the
registry, print the watch graph and warn about unwatched actions, unreachable roles and
unbounded cycles. It goes where :func:`run` says, as one more function that takes the
scenario and the :class:`Report` and appends to it; ``--mermaid`` goes in
:func:`configure`.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ._args import path_arg

if TYPE_CHECKING:
    from bus import RoleSpec, Scenario

NAME = "validate"
HELP = "check a scenario file and print what it declares, without running it"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("scenario", metavar="SCENARIO", type=path_arg, help="a scenario file (TOML)")


class Report:
    """What ``validate`` prints: lines describing the scenario, then warnings. (A plain
    class: ``dataclasses`` imports ``inspect``, which ``--help`` need not pay for.)"""

    def __init__(self, lines: list[str], warnings: list[str]):
        self.lines = lines
        self.warnings = warnings


def run(args: argparse.Namespace) -> int:
    from bus import load_scenario, scenario_warnings

    scenario = load_scenario(args.scenario)  # a ConfigError here exits 2 with its message
    report = Report(lines=describe(scenario), warnings=scenario_warnings(scenario))
    # Step 2, the team checks, is called here: e.g. `check_team(scenario, args, report)`.
    print(f"{args.scenario}: ok")
    for line in report.lines:
        print(f"  {line}")
    for warning in report.warnings:
        print(f"warning: {warning}")
    return 0


def describe(scenario: Scenario) -> list[str]:
    """A few aligned lines saying what ``scenario`` declares."""
    run, llm = scenario.run, scenario.llm
    rows = [("scenario", scenario.name + (f": {scenario.info.description}"
                                          if scenario.info.description else "")),
            ("sop", _sop(scenario)),
            ("idea", scenario.idea or "(none; give one with sopbus run --idea)"),
            ("run", f"{run.mode} mode, at most {run.max_rounds} rounds, budget "
                    f"${run.budget_usd}, seed {run.seed}, runs in {run.runs_dir}/"),
            ("llm", f"{llm.provider} {llm.model}, temperature {llm.temperature}, "
                    f"max_tokens {llm.max_tokens}, output {llm.output_mode}")]
    rows += [("fixture", str(p)) for p in scenario.fixture_paths()]
    cassette = scenario.cassette_path()
    if cassette is not None:
        rows.append(("cassette", str(cassette)))
    rows += [("price", f"{model}: ${p.input} in, ${p.output} out per 1M tokens")
             for model, p in scenario.prices.items()]
    rows += [("role", _role(role)) for role in scenario.roles]
    rows += [("action", f"{name} -> {_output(spec.output)}") for name, spec in scenario.actions.items()]
    rows += [("inject", f"round {i.round}: {i.cause_by} from {i.sent_from}") for i in scenario.inject]
    return [f"{label:<9} {text}" for label, text in rows]


def _sop(scenario: Scenario) -> str:
    name = scenario.sop or "(none: the team is the file's [[roles]])"
    options = ", ".join(scenario.sop_options)
    return f"{name} (options: {options})" if options else name


def _role(role: RoleSpec) -> str:
    parts = [role.name + (f" ({role.profile})" if role.profile else "")]
    if role.watch is not None:
        parts.append(f"watches {', '.join(role.watch) or 'nothing'}")
    if role.actions is not None:
        parts.append(f"actions {', '.join(role.actions) or 'none'}")
    return "; ".join(parts)


def _output(output: dict[str, str] | None) -> str:
    if output is None:
        return "free text"
    return ", ".join(f"{name}: {spec}" for name, spec in output.items())
