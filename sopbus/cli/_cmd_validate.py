"""``sopbus validate SCENARIO [--provider P] [--model M] [--base-url URL] [--price IN,OUT]
[--mermaid]``: check a scenario file without running it.

Two steps. The file: decode it, resolve the files it names, and describe what it declares.
The team: build it from the SOP and the file's roles exactly as ``sopbus run`` would (every
name in ``watch``/``actions`` checked against the registry: a typo exits 2 with the
closest names), print the watch graph (who watches what, who publishes what, and the
routes between them), and warn about actions nobody watches, roles nobody can reach and
cycles only the round limit bounds. Nothing is printed until both steps pass.

``--mermaid`` prints only the graph, as a Mermaid flowchart (pipe it into a ``.mmd`` file);
the warnings then go to stderr. ``--provider``, ``--model``, ``--base-url`` and ``--price``
are ``sopbus run``'s flags, laid over the file the same way, so the model checked (its price
above all) is the one the run would call.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from ._flags import MODEL_FLAGS, RUN_SETTINGS, SCENARIO, Flag, add

if TYPE_CHECKING:
    from sopbus.bus import RoleSpec, Scenario
    from sopbus.sops import Team

NAME = "validate"
HELP = "check a scenario file and print what it declares, without running it"


MERMAID = Flag(
    "--mermaid",
    action="store_true",
    help="print the watch graph as a Mermaid flowchart (warnings to stderr)",
)


def configure(parser: argparse.ArgumentParser) -> None:
    add(parser, SCENARIO, MERMAID, *MODEL_FLAGS, RUN_SETTINGS)


class Report:
    """What ``validate`` prints: lines describing the scenario, the watch graph, then
    warnings. (A plain class: ``dataclasses`` imports ``inspect``, which ``--help`` need
    not pay for.)"""

    def __init__(
        self,
        lines: list[tuple[str, str]],
        warnings: list[str],
        graph: list[tuple[str, str]] | None = None,
    ):
        self.lines = lines
        self.warnings = warnings
        self.graph = graph or []
        self.notes: list[str] = []  # what the run will need that a valid file need not hold


def run(args: argparse.Namespace) -> int:
    from sopbus._examples import scenario_path
    from sopbus.bus import (
        ConfigError,
        ToolServerError,
        load_scenario,
        scenario_warnings,
        scenario_with_overrides,
    )

    from ._cmd_run import overrides, with_set
    from ._exit import ExitCode

    # A ConfigError exits 2 with its message.
    scenario = with_set(load_scenario(scenario_path(args.scenario)), args)
    scenario = scenario_with_overrides(scenario, **overrides(args))
    report = Report(lines=describe(scenario), warnings=scenario_warnings(scenario))
    try:
        team = check_team(scenario, report)
    except ToolServerError as error:  # not the file's mistake (that is a ConfigError): 1
        if isinstance(error, ConfigError):
            raise
        print(f"sopbus: error: {scenario.path}: {error}", file=sys.stderr)
        return ExitCode.FAILED
    if args.mermaid:
        from ._graph import mermaid

        print(mermaid(team))
        for warning in report.warnings:
            print(f"warning: {warning}", file=sys.stderr)
        for note in report.notes:
            print(f"note: {note}", file=sys.stderr)
        return 0
    from ._fit import hanging, wrapped
    from ._runref import line_width

    # Each line wrapped at the terminal's width under its label: an idea or a warning can
    # run to 300 characters, and a role's name or an action's never breaks.
    width = line_width()
    print(wrapped(f"{args.scenario}: ok", width))
    for label, text in [*report.lines, *report.graph]:
        print(hanging(label, text, width))
    for warning in report.warnings:
        print(hanging("warning: ", warning, width))
    for note in report.notes:
        print(hanging("note: ", note, width))
    return 0


def check_team(scenario: Scenario, report: Report) -> Team:
    """Makes every check ``sopbus run`` makes before it starts (the team, prices, the
    provider's settings: :func:`sopbus._assemble._execute.preflight`; the tools the actions
    name, starting the MCP servers they need; a mistake raises ConfigError),
    adds the watch graph to ``report`` and its warnings before the file's own."""
    from sopbus._assemble import preflight, run_environ
    from sopbus.sops import team_warnings

    from ._graph import graph_text

    environ = _without_needing_a_key(scenario, run_environ(), report)
    checked = preflight(scenario, environ)  # the keys run would see: env over ./.env
    team: Team = checked.team
    if scenario.mcp:
        import trio

        from sopbus._assemble import check_servers

        # The tools of an MCP server are known only once it runs: started, checked, stopped.
        trio.run(check_servers, scenario, team)
    from sopbus._assemble import worst_lines

    report.graph = [*graph_text(team), *answer_bounds(team)]
    report.lines += [
        ("  worst     ", line) for line in worst_lines(checked.worst, scenario.run.budget_usd)
    ]
    report.warnings[:0] = [*team_warnings(team), *checked.warnings, *short_caps(scenario, checked)]
    return team


def short_caps(scenario: Scenario, checked: Any) -> list[str]:
    """What ``run`` would refuse: a cap below one round of a population's worst case."""
    from sopbus._assemble import refuse_short_cap
    from sopbus.bus import ConfigError

    try:
        refuse_short_cap(scenario, checked.worst)
    except ConfigError as exc:
        return [f"`sopbus run` will refuse to start: {exc}"]
    return []


def _without_needing_a_key(
    scenario: Scenario, environ: dict[str, str], report: Report
) -> dict[str, str]:
    """``environ`` with a stand-in for the provider's API key when it has none, and a note
    saying the run needs one: a file is valid whoever holds the key (and no call is made
    here), so the other checks of the provider's settings still run."""
    from sopbus._assemble import provider_spec

    missing = provider_spec(scenario).missing_key(environ)
    if missing is None:
        return environ
    report.notes.append(
        f"`sopbus run` needs an API key for provider {scenario.llm.provider!r}: set {missing} "
        f"in the environment or in a .env file in the working directory (any value for a "
        f"local server); validate checked the file without one"
    )
    return {**environ, missing: "sopbus-validate-has-no-key"}


def answer_bounds(team: Team) -> list[tuple[str, str]]:
    """Each role's actions with the ``max_tokens`` their calls ask for, as the layers resolve
    it (the action's default, ``[llm].max_tokens``, the action's and the role's ``llm``)."""
    from sopbus.bus import DEFAULT_MAX_TOKENS
    from sopbus.roles import Role

    roles = [r for r in team.roles if isinstance(r, Role) and r.actions]
    width = max((len(r.name) for r in roles), default=0)
    lines = [
        (
            f"  {r.name:<{width}}  ",
            ", ".join(
                f"{a.name} {r.llm_for(a).max_tokens or DEFAULT_MAX_TOKENS}" for a in r.actions
            ),
        )
        for r in roles
    ]
    heading = ("", "max_tokens (the longest answer each action's calls ask for):")
    return [heading, *lines] if lines else []


def describe(scenario: Scenario) -> list[tuple[str, str]]:
    """A few ``(label, text)`` lines, the labels aligned, saying what ``scenario`` declares."""
    from sopbus.bus.money import money

    run, llm = scenario.run, scenario.llm
    rows = [
        (
            "scenario",
            scenario.name + (f": {scenario.info.description}" if scenario.info.description else ""),
        ),
        ("sop", _sop(scenario)),
        ("idea", scenario.idea or "(none; give one with sopbus run --idea)"),
        (
            "run",
            f"{run.mode} mode, at most {run.max_rounds} rounds, budget "
            f"{money(run.budget_usd)}, seed {run.seed}, runs in {run.runs_dir}/",
        ),
        (
            "llm",
            f"{llm.provider} {llm.model}, temperature {llm.temperature}, "
            f"max_tokens {llm.max_tokens or 'not set (each action its own, else 1024)'}, "
            f"output {llm.output_mode}"
            + (f", extra_body {json.dumps(llm.extra_body)}" if llm.extra_body else ""),
        ),
    ]
    rows += [("fixture", str(p)) for p in scenario.fixture_paths()]
    cassette = scenario.cassette_path()
    if cassette is not None:
        rows.append(("cassette", str(cassette)))
    rows += [
        (
            "price",
            f"{model}: {money(p.input)} in, {money(p.output)} out per 1M tokens"
            + (" (--price, the command line)" if model in scenario.priced_by_flag else ""),
        )
        for model, p in scenario.prices.items()
    ]
    rows += [("role", _role(role)) for role in scenario.roles]
    rows += [("population", _population(p)) for p in scenario.populations]
    rows += [
        ("action", f"{name} -> {_output(spec.output)}") for name, spec in scenario.actions.items()
    ]
    rows += [
        ("inject", f"round {i.round}: {i.cause_by} from {i.sent_from}") for i in scenario.inject
    ]
    return [(f"  {label:<9} ", text) for label, text in rows]


def _sop(scenario: Scenario) -> str:
    name = scenario.sop or "(none: the team is the file's [[roles]])"
    options = ", ".join(scenario.sop_options)
    return f"{name} (options: {options})" if options else name


def _role(role: RoleSpec) -> str:
    parts = [role.name + (f" ({role.profile})" if role.profile else "")]
    if role.watch is not None:
        watched = [
            w if isinstance(w, str) else f"{w.action} (from {' '.join(w.senders) or 'nobody'})"
            for w in role.watch
        ]
        parts.append(f"watches {', '.join(watched) or 'nothing'}")
    if role.follows:
        parts.append(f"follows {', '.join(role.follows)}")
    if role.actions is not None:
        parts.append(f"actions {', '.join(role.actions) or 'none'}")
    return "; ".join(parts)


def _population(p: Any) -> str:
    share = f"{p.active:.0%} of them act per round" if p.active else "all with mail act"
    source = p.attributes_file or ", ".join(p.attributes) or "no attributes"
    return (
        f"{p.name}: {p.count:,} agents ({p.name}-0 ... {p.name}-{p.count - 1}), watches "
        f"{', '.join(p.watch) or 'nothing'}; takes {', '.join(p.actions)}; {share}; "
        f"attributes {source}; {p.concurrency} calls at once"
    )


def _output(output: dict[str, str] | None) -> str:
    if output is None:
        return "free text"
    return ", ".join(f"{name}: {spec}" for name, spec in output.items())
