"""A new sweep's directory from the command line, or an interrupted one made ready again.

A new sweep checks every variant before anything runs (its settings, its team, its
prices), so a typo in ``--set`` is a configuration error (exit 2), not ten failed runs.

A resumed sweep trusts its run directories over ``sweep.json``: a run with a summary
(other than ``cancelled``) is done and kept, and its share of the account is set to its
ledger's sum (which repairs what a kill left held); a run directory without one (killed)
or a cancelled run is resumed by ``sopbus resume``'s machinery; a run without a directory
is started. A larger ``--budget`` raises the cap, and skipped runs start if the money
lasts.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from sopbus._assemble import checked_prices, endpoint, provider_spec, run_environ, scenario_as_run
from sopbus.bus import ConfigError
from sopbus.bus.money import FileAccount, money
from sopbus.bus.scenario import Scenario, SweepSpec, load_scenario, scenario_with_overrides
from sopbus.bus.store import is_locked, ledger_of, new_run_id

from ._plan import Variant, seeds_from, sweep_budget, variant_scenario, variants_from
from ._record import RunEntry, SweepDir, SweepRecord, ended_as


@dataclass(frozen=True, kw_only=True)
class SweepArgs:
    """The command line of ``sopbus sweep SCENARIO``."""

    scenario: Path
    seeds: int | None = None
    seed: str | None = None
    settings: tuple[str, ...] = ()
    jobs: int | None = None
    budget: Decimal | None = None
    runs_dir: str | None = None
    sweeps_dir: Path = Path("sweeps")
    bus: str | None = None
    price: str | None = None  # --price: prices the scenario's [llm].model in every variant


def new_sweep(args: SweepArgs) -> tuple[SweepDir, SweepRecord]:
    """Checks the matrix, then writes the sweep's directory (nothing has run yet)."""
    base = load_scenario(args.scenario)
    if args.price is not None:
        # Priced before the variants are laid over it: a variant's llm.model is not the
        # model --price names, and still needs a price of its own.
        base = scenario_with_overrides(base, price=args.price)
    spec = base.sweep or SweepSpec()
    seeds = seeds_from(args.seeds, args.seed, spec.seeds, base.run.seed)
    variants = variants_from(args.settings, spec.set)
    scenarios = {v.id: _checked(variant_scenario(base, v)) for v in variants}
    budget = sweep_budget(
        args.budget,
        spec.budget_usd,
        [scenarios[v.id].run.budget_usd for v in variants for _ in seeds],
    )
    # Runs that wait on a network endpoint overlap as tasks; the others need processes.
    real = any(provider_spec(s).network for s in scenarios.values())
    sweep_id = new_run_id(f"{base.name}-sweep")
    sdir = SweepDir(args.sweeps_dir / sweep_id)
    (sdir.path / "variants").mkdir(parents=True)
    sdir.lock()
    record = SweepRecord(
        sweep_id=sweep_id,
        scenario=base.name,
        scenario_path=str(base.path),
        runs_dir=str(Path(args.runs_dir or base.run.runs_dir).resolve()),
        budget_usd=budget,
        jobs=args.jobs or spec.jobs or (4 if real else os.cpu_count() or 1),
        executor="tasks" if real else "processes",
        seeds=seeds,
        variants=variants,
        runs=[
            RunEntry(run_id=f"{sweep_id}-{v.id}-s{seed}", variant=v.id, seed=seed)
            for seed in seeds
            for v in variants
        ],
        created_at=time.time(),
        bus=args.bus,
    )
    (sdir.path / "scenario.toml").write_text(
        scenario_as_run(variant_scenario(base, Variant(id="v0", settings=())))
    )
    for vid, scenario in scenarios.items():
        sdir.variant_file(vid).write_text(scenario_as_run(scenario))
    FileAccount.create(sdir.account_path, budget)
    sdir.write(record)
    return sdir, record


def _checked(scenario: Scenario) -> Scenario:
    """``scenario``, once its team builds and every model it calls has a price."""
    from sopbus.sops import build_team

    team = build_team(scenario)
    checked_prices(scenario, team.roles, endpoint=endpoint(scenario, run_environ()))
    return scenario


def resumed_sweep(sdir: SweepDir, *, jobs: int | None, budget: Decimal | None) -> SweepRecord:
    """The record of the sweep in ``sdir``, each run's state taken from its directory, the
    account rebased to the ledgers of the runs that ended (see the module docstring)."""
    sdir.lock()
    record = sdir.read()
    if record.bus is not None:
        raise ConfigError(
            f"sweep {record.sweep_id} ran on the workers of {record.bus}; resuming "
            f"a sweep on NATS is not supported yet: start it again"
        )
    account = FileAccount(sdir.account_path)
    for entry in record.runs:
        _reconcile(entry, Path(record.runs_dir) / entry.run_id, account)
    if budget is not None:
        spent = account.read().spent
        if budget < spent:
            raise ConfigError(
                f"--budget {budget}: sweep {record.sweep_id} has already spent "
                f"{money(spent)}; give a budget above that"
            )
        account.set_cap(budget)
        record.budget_usd = budget
    record.jobs = jobs or record.jobs
    record.resumes += 1
    record.state = "running"
    sdir.write(record)
    return record


def _reconcile(entry: RunEntry, run_dir: Path, account: FileAccount) -> None:
    if ended_as(entry, run_dir):
        account.rebase_now(
            entry.run_id, sum((line.cost_usd for line in ledger_of(run_dir)), Decimal(0))
        )
    elif run_dir.is_dir():
        _wait_unlocked(run_dir)
        entry.state = "interrupted"
    else:
        entry.state = "pending"


def _wait_unlocked(run_dir: Path) -> None:
    """Waits for the process of a killed sweep's run to go (its workers notice their
    coordinator's death within a tenth of a second); a run still going after that is not
    this sweep's to resume."""
    deadline = time.monotonic() + 10
    while is_locked(run_dir):
        if time.monotonic() > deadline:
            raise ConfigError(
                f"run {run_dir.name} is still executing in another process "
                f"({run_dir}); stop it before resuming its sweep"
            )
        time.sleep(0.05)
