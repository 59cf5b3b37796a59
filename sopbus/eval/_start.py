"""A new eval's directory from its arguments, checked before anything runs: each scenario
builds, every model it calls has a price, the dataset loads and every scorer exists. An
interrupted eval is made ready again by :func:`resumed_eval`."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from sopbus._assemble import checked_prices, endpoint, run_environ, scenario_as_run
from sopbus.bus import ConfigError
from sopbus.bus.money import FileAccount, money
from sopbus.bus.scenario import Scenario, load_scenario, scenario_with_overrides
from sopbus.bus.store import ledger_of, new_run_id

from ._dataset import Dataset, load_dataset
from ._record import EvalDir, EvalRecord, EvalScenario
from ._scorers import check_scorer

JUDGED = "judge"


@dataclass(frozen=True, kw_only=True)
class EvalArgs:
    """What ``sopbus eval`` and :func:`sopbus.evaluate` are given."""

    scenarios: tuple[Path, ...]
    dataset: str
    limit: int | None = None
    epochs: int = 1
    concurrency: int = 4
    budget: Decimal | None = None
    scorer: str | None = None
    provider: str | None = None
    model: str | None = None
    base_url: str | None = None
    price: str | None = None
    evals_dir: Path = Path("evals")
    sandbox: str | None = None
    #: ``KEY=VALUE`` settings, each a variant of every scenario (as ``sopbus sweep --set``
    #: makes variants), compared side by side.
    variants: tuple[str, ...] = ()


def check_counts(limit: int | None, epochs: int, concurrency: int) -> None:
    """The counts a user gives, each at least 1 (a ConfigError naming the flag)."""
    for flag, value in (("--limit", limit), ("--epochs", epochs), ("--concurrency", concurrency)):
        if value is not None and value < 1:
            raise ConfigError(f"{flag} {value}: give a whole number of at least 1")


def new_eval(args: EvalArgs) -> tuple[EvalDir, EvalRecord, Dataset]:
    """Checks everything, then writes the eval's directory (nothing has run yet)."""
    check_counts(args.limit, args.epochs, args.concurrency)
    if not args.scenarios:
        raise ConfigError("sopbus eval needs at least one SCENARIO")
    if args.scorer is not None:
        check_scorer(args.scorer, "--scorer")
    dataset = load_dataset(args.dataset, limit=args.limit)
    for task in dataset.tasks:
        if task.check is not None:
            check_scorer(task.check, f"{args.dataset}: task {task.id}: check")
    _check_modules(dataset, args.scorer)
    loaded = [(_overridden(path, args), path.stem) for path in args.scenarios]
    varied, named = _varied(loaded, args.variants)
    scenarios = [_checked(s) for s in varied]
    labels = _labels(named)
    runs = len(dataset.tasks) * args.epochs
    judged = _judged(dataset, args.scorer)
    worst = sum((s.run.budget_usd * runs * (2 if judged else 1) for s in scenarios), Decimal(0))
    budget = args.budget if args.budget is not None else worst
    eval_id = new_run_id(f"{labels[0]}-eval")
    edir = EvalDir(args.evals_dir / eval_id)
    (edir.path / "scenarios").mkdir(parents=True)
    edir.lock()
    for label, scenario in zip(labels, scenarios, strict=True):
        edir.scenario_file(label).write_text(scenario_as_run(scenario), encoding="utf-8")
    record = EvalRecord(
        eval_id=eval_id,
        scenarios=tuple(
            EvalScenario(label=label, name=s.name, origin=str(s.path))
            for label, s in zip(labels, scenarios, strict=True)
        ),
        dataset=str(Path(args.dataset).resolve()) if Path(args.dataset).is_file() else args.dataset,
        task_ids=tuple(t.id for t in dataset.tasks),
        epochs=args.epochs,
        concurrency=args.concurrency,
        budget_usd=budget,
        worst_case_usd=worst,
        scorer=args.scorer,
        created_at=time.time(),
        simulated=any(s.llm.provider == "sim" for s in scenarios),
    )
    FileAccount.create(edir.account_path, budget, fix=budget_fix(eval_id))
    edir.write(record)
    return edir, record, dataset


def _check_modules(dataset: Dataset, scorer: str | None) -> None:
    """Each Python check's module is a file beside the dataset (said before any run)."""
    for task in dataset.tasks:
        kind, _, arg = (task.check or scorer or "").partition(":")
        module = Path(dataset.base) / f"{arg.partition(':')[0]}.py"
        if kind == "python" and not module.is_file():
            raise ConfigError(
                f"task {task.id}: check python:{arg} names {module}, which is not there; "
                f"put the module beside the dataset"
            )


def budget_fix(eval_id: str) -> str:
    """The end of a refusal's message: how the user raises the eval's cap."""
    return f"raise the eval's budget: sopbus eval --resume {eval_id} --budget USD"


def _judged(dataset: Dataset, scorer: str | None) -> bool:
    checks = [t.check or scorer or "" for t in dataset.tasks]
    return any(c.startswith(JUDGED) for c in checks)


def _overridden(path: Path, args: EvalArgs) -> Scenario:
    scenario = load_scenario(path)
    return scenario_with_overrides(
        scenario,
        provider=args.provider,
        model=args.model,
        base_url=args.base_url,
        price=args.price,
        sandbox=args.sandbox,  # type: ignore[arg-type]
    )


def _checked(scenario: Scenario) -> Scenario:
    """``scenario``, once its team builds and every model it calls has a price."""
    from sopbus.sops import build_team

    team = build_team(scenario)
    checked_prices(scenario, team.roles, endpoint=endpoint(scenario, run_environ()))
    return scenario


def _varied(
    loaded: list[tuple[Scenario, str]], variants: tuple[str, ...]
) -> tuple[list[Scenario], list[tuple[str, str]]]:
    """Each scenario, or with ``variants`` each scenario once per setting; with the
    (name, stem) each is labelled by."""
    if not variants:
        return [s for s, _ in loaded], [(s.name, stem) for s, stem in loaded]
    from sopbus.bus.store import with_settings

    out: list[Scenario] = []
    named: list[tuple[str, str]] = []
    for scenario, stem in loaded:
        for setting in variants:
            out.append(with_settings(scenario, (setting,), at_round=0))
            key, _, value = setting.partition("=")
            named.append((f"{scenario.name}[{key.rpartition('.')[2]}={value}]", stem))
    return out, named


def _labels(names: list[tuple[str, str]]) -> list[str]:
    """A label per scenario, safe in a run id and unique: its name, or where two share a
    name its file's stem, or ``name-2`` for a second of the same file."""
    labels: list[str] = []
    counts = [n for n, _ in names]
    for name, stem in names:
        shown = stem if counts.count(name) > 1 else name
        base = re.sub(r"[^A-Za-z0-9_.-]+", "-", shown).strip("-") or "scenario"
        label, n = base, 1
        while label in labels:
            n += 1
            label = f"{base}-{n}"
        labels.append(label)
    return labels


def resumed_eval(edir: EvalDir, budget: Decimal | None) -> EvalRecord:
    """The record of the interrupted eval in ``edir``, its account rebased to the ledgers
    of the runs that ended (a kill leaves holds behind), its cap raised to ``budget``."""
    edir.lock()
    record = edir.read()
    account = FileAccount(edir.account_path, fix=budget_fix(record.eval_id))
    if edir.runs_dir.is_dir():
        for run_dir in edir.runs_dir.iterdir():
            if (run_dir / "summary.json").is_file():
                spent = sum((line.cost_usd for line in ledger_of(run_dir)), Decimal(0))
                account.rebase_now(run_dir.name, spent)
    if budget is not None:
        spent = account.read().spent
        if budget < spent:
            raise ConfigError(
                f"--budget {budget}: eval {record.eval_id} has already spent {money(spent)}; "
                f"give a budget above that"
            )
        account.set_cap(budget)
        record.budget_usd = budget
    record.resumes += 1
    record.state = "running"
    edir.write(record)
    return record
