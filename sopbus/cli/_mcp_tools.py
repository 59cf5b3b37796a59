"""What the tools of ``sopbus mcp`` do, without the protocol: each takes plain arguments and
returns JSON-able data, from the same helpers as the commands (``examples``, ``validate``,
``run``, ``costs --json``, ``show --json``), so a tool and its command cannot disagree.

A mistake the caller can fix is a :class:`~sopbus.bus.ConfigError` with the command's words;
a run that fails is :class:`RunFailed`. The server (:mod:`._mcp_server`) turns both into
MCP tool errors.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import TYPE_CHECKING, Any, NotRequired

import msgspec
from typing_extensions import TypedDict  # pydantic refuses typing's before Python 3.12

from sopbus.bus import ConfigError

if TYPE_CHECKING:
    from sopbus._outcome import RunOutcome


class Example(TypedDict):
    name: str
    description: str
    path: str
    needs: str  # what to install to run it ("pip install 'sopbus[tools]'"), or ""


class Examples(TypedDict):
    examples: list[Example]


class Line(TypedDict):
    what: str
    text: str


class Validation(TypedDict):
    scenario: str
    valid: bool
    errors: list[str]
    warnings: list[str]
    declares: NotRequired[list[Line]]
    watch_graph: NotRequired[list[Line]]


class VerdictData(TypedDict):
    passed: bool
    reason: str
    evidence: NotRequired[str]


class RunResult(TypedDict):
    run_id: str
    status: str
    end_reason: str
    verdict: VerdictData | None
    ok: bool
    spent_usd: str
    budget_usd: str
    spend: str
    llm_calls: int
    rounds: int
    simulated: bool
    run_dir: str


class RunFailed(Exception):
    """The run started and ended ``failed``; the message says why and where its directory is."""


@dataclass(frozen=True)
class ServerSettings:
    """What ``sopbus mcp`` was started with, laid over every scenario it runs or validates."""

    max_budget: Decimal
    """The most one run may ask for (``--max-budget``)."""
    runs_dir: Path
    """Where runs go and are read from (``--runs-dir``, made absolute at start)."""
    model: dict[str, Any] = field(default_factory=dict)
    """``provider``, ``model``, ``base_url`` and ``price`` as ``sopbus run``'s flags give them."""
    scenario_dirs: tuple[Path, ...] = ()
    """Folders whose scenario files the tools may read and run (``--scenario-dir``, made
    absolute at start), besides the shipped ones (see :mod:`._mcp_paths`)."""


def list_examples() -> Examples:
    """The shipped scenarios, as ``sopbus examples --json`` lists them."""
    from sopbus._examples import examples

    return {
        "examples": [
            {"name": e.name, "description": e.description, "path": str(e.path), "needs": e.needs}
            for e in examples()
        ]
    }


def validate(ref: str, settings: ServerSettings) -> Validation:
    """``sopbus validate`` as data: a scenario that cannot be found is a ConfigError; one
    that is found and wrong is ``valid: false`` with the error ``validate`` prints."""
    from sopbus.bus import load_scenario, scenario_warnings, scenario_with_overrides

    from ._cmd_validate import Report, check_team, describe

    path = scenario_file(ref, settings)
    try:
        # quote=False: the caller is not the file's owner; no line of it goes back.
        scenario = scenario_with_overrides(load_scenario(path, quote=False), **settings.model)
        report = Report(lines=describe(scenario), warnings=scenario_warnings(scenario))
        check_team(scenario, report)
    except ConfigError as error:
        return {"scenario": str(path), "valid": False, "errors": [str(error)], "warnings": []}
    return {
        "scenario": str(path),
        "valid": True,
        "errors": [],
        "warnings": [*report.warnings, *report.notes],
        "declares": _labelled(report.lines),
        "watch_graph": _labelled(report.graph),
    }


def scenario_file(ref: str, settings: ServerSettings) -> Path:
    """The scenario file ``ref`` names, under the server's roots (:mod:`._mcp_paths`); a
    ConfigError naming what was looked for, or why it is refused."""
    from ._mcp_paths import scenario_file as found

    return found(ref, settings)


def checked_budget(budget: Any, settings: ServerSettings) -> Decimal:
    """``budget`` as exact USD, greater than 0 and at most ``--max-budget``."""
    try:
        amount = Decimal(str(budget))
    except InvalidOperation:
        amount = Decimal("NaN")
    if isinstance(budget, bool) or not amount.is_finite() or amount <= 0:
        raise ConfigError(
            f"budget {budget!r}: expected an amount of USD greater than 0, such as 0.05"
        )
    if amount > settings.max_budget:
        from sopbus.bus.money import money
        from sopbus.bus.scenario import MAX_BUDGET_USD

        # 1e308 printed to the cent is 300 digits: said as the caller wrote it.
        asked = money(amount) if amount <= MAX_BUDGET_USD else f"{budget!r}"
        raise ConfigError(
            f"budget {asked} is above this server's cap of "
            f"{money(settings.max_budget)} per run: ask for at most "
            f"{money(settings.max_budget)}, or restart `sopbus mcp` with a larger "
            f"--max-budget; nothing was run"
        )
    return amount


async def run(
    ref: str,
    budget: Any,
    settings: ServerSettings,
    *,
    max_rounds: int | None = None,
    idea: str | None = None,
    seed: int | None = None,
) -> RunResult:
    """Runs the scenario under ``budget`` (checked first: a refused ask runs nothing) with
    the server's model; the run's result, or :class:`RunFailed`."""
    from sopbus._api import run_scenario_async
    from sopbus.bus import load_scenario

    cap = checked_budget(budget, settings)
    path = scenario_file(ref, settings)
    load_scenario(path, quote=False)  # a broken file said without its lines, before a run
    given: dict[str, Any] = {"max_rounds": max_rounds, "idea": idea, "seed": seed}
    outcome = await run_scenario_async(
        path,
        **settings.model,
        **{name: value for name, value in given.items() if value is not None},
        budget_usd=cap,
        runs_dir=settings.runs_dir,
    )
    result = _result(outcome)
    if outcome.status == "failed":
        raise RunFailed(
            f"run {outcome.run_id} failed ({outcome.end_reason}): "
            f"{outcome.summary.error or outcome.summary.detail}; spent {result['spend']}; "
            f"its directory is {outcome.run_dir} (run_summary, run_costs and run_messages "
            f"read it)"
        )
    return result


def _result(outcome: RunOutcome) -> RunResult:
    from sopbus.bus.money import money, share

    spent, cap = outcome.total_usd, outcome.budget_usd
    return {
        "run_id": outcome.run_id,
        "status": outcome.status,
        "end_reason": outcome.end_reason,
        "verdict": msgspec.to_builtins(outcome.verdict),
        "ok": outcome.ok,
        "spent_usd": str(spent),
        "budget_usd": str(cap),
        "spend": f"{money(spent)} of {money(cap)} ({share(spent, cap)} of the cap)",
        "llm_calls": outcome.llm_calls,
        "rounds": outcome.rounds,
        "simulated": outcome.summary.simulated,
        "run_dir": str(outcome.run_dir),
    }


def summary(ref: str, settings: ServerSettings) -> dict[str, Any]:
    """The run's ``summary.json`` (its verdict as the log seals it), money as decimal strings."""
    from sopbus._outcome import RunOutcome

    outcome = RunOutcome.open(_run_dir(ref, settings))
    return {**msgspec.to_builtins(outcome.summary), "run_dir": str(outcome.run_dir)}


def costs(ref: str, settings: ServerSettings) -> dict[str, Any]:
    """What ``sopbus costs RUN --json`` prints, as data."""
    from sopbus.bus import load_ledger, report_json

    from ._cmd_costs import JSON_KEYS, report_for

    run_dir = _run_dir(ref, settings)
    report = report_for(run_dir, load_ledger(run_dir))
    loaded: dict[str, Any] = json.loads(report_json({key: report[key] for key in JSON_KEYS}))
    return loaded


def messages(
    ref: str, settings: ServerSettings, *, round: int | None = None, role: str | None = None
) -> dict[str, Any]:
    """The run's messages as ``sopbus show RUN --json`` gives them, optionally only one
    round's or one sender's (a round or role the run has no message of is a ConfigError
    naming the ones it has)."""
    from ._cmd_show import _rounds_run, selected, timeline

    run_dir = _run_dir(ref, settings)
    try:
        found = selected(
            list(timeline(run_dir)),
            roles=None if role is None else [role],
            rounds=None if round is None else [round],
            run_rounds=_rounds_run(run_dir),
        )
    except ConfigError as error:  # the CLI names its flags; here they are arguments
        message = str(error).replace("--round", "round", 1).replace("--role", "role", 1)
        raise ConfigError(message) from None
    return {"run_id": run_dir.name, "run_dir": str(run_dir.resolve()), "messages": found}


def _run_dir(ref: str, settings: ServerSettings) -> Path:
    from ._mcp_paths import run_dir

    return run_dir(ref, settings)


def _labelled(lines: list[tuple[str, str]]) -> list[Line]:
    return [Line(what=label.strip(), text=text) for label, text in lines]
