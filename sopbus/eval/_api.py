"""``sopbus.evaluate``: an eval from Python, the same as ``sopbus eval`` does it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from sopbus.bus.money import FileAccount, money

from ._dataset import Dataset, load_dataset
from ._engine import drive
from ._outcome import TaskResult
from ._record import EvalDir, EvalRecord, resolve_eval
from ._start import EvalArgs, new_eval, resumed_eval
from ._table import eval_rows

Say = Callable[[str], None]


@dataclass(frozen=True)
class EvalOutcome:
    """A finished (or cap-stopped) eval: its directory, its record with the figures, one
    row of figures per scenario, and every task's result."""

    eval_dir: Path
    record: EvalRecord
    rows: list[dict[str, Any]]
    results: list[TaskResult]


def evaluate(
    scenarios: Sequence[str | Path] = (),
    dataset: str = "",
    *,
    limit: int | None = None,
    epochs: int = 1,
    concurrency: int = 4,
    budget: Decimal | int | str | None = None,
    scorer: str | None = None,
    provider: str | None = None,
    model: str | None = None,
    base_url: str | None = None,
    price: str | None = None,
    evals_dir: str | Path = "evals",
    variants: Sequence[str] = (),
    resume: str | None = None,
    say: Say | None = None,
) -> EvalOutcome:
    """Runs ``scenarios`` (files or shipped names) on ``dataset`` (``"humaneval"`` or a
    JSONL file) and returns the figures; ``resume`` (an eval id or directory) finishes an
    interrupted eval instead. Mistakes raise :class:`sopbus.ConfigError` before any run."""
    import trio

    from sopbus._assemble import quiet_for_the_api

    quiet_for_the_api()
    cap = None if budget is None else Decimal(str(budget))
    if resume is not None:
        edir, record, data = reopen(resume, Path(evals_dir), cap)
    else:
        from sopbus._examples import scenario_path

        args = EvalArgs(
            scenarios=tuple(scenario_path(str(s)) for s in scenarios),
            dataset=dataset, limit=limit, epochs=epochs, concurrency=concurrency,
            budget=cap, scorer=scorer, provider=provider, model=model, base_url=base_url,
            price=price, evals_dir=Path(evals_dir), variants=tuple(variants),
        )  # fmt: skip
        edir, record, data = new_eval(args)
    try:
        return trio.run(run_eval, edir, record, data, say or (lambda _line: None))
    finally:
        edir.unlock()


def reopen(
    ref: str, evals_dir: Path, budget: Decimal | None
) -> tuple[EvalDir, EvalRecord, Dataset]:
    """The interrupted eval ``ref``, ready to go on."""
    edir = resolve_eval(ref, evals_dir)
    record = resumed_eval(edir, budget)
    return edir, record, _tasks_of(record)


def _tasks_of(record: EvalRecord) -> Dataset:
    """The tasks ``record`` planned, from its dataset."""
    full = load_dataset(record.dataset)
    wanted = set(record.task_ids)
    tasks = tuple(t for t in full.tasks if t.id in wanted)
    return Dataset(name=full.name, tasks=tasks, base=full.base)


def replay_eval(
    ref: str | Path, evals_dir: str | Path = "evals", say: Say | None = None
) -> EvalOutcome:
    """The eval ``ref`` again into a new eval directory beside it, every run replayed
    from its recording (no provider is called, nothing is spent) and every answer scored
    again: the same scores, unless a check is not deterministic."""
    import shutil
    import time

    import msgspec
    import trio

    from sopbus._assemble import quiet_for_the_api
    from sopbus.bus.store import new_run_id

    quiet_for_the_api()
    source = resolve_eval(str(ref), Path(evals_dir))
    old = source.read()
    edir = EvalDir(source.path.parent / new_run_id(f"{old.scenarios[0].label}-eval-replay"))
    shutil.copytree(source.path / "scenarios", edir.path / "scenarios")
    edir.lock()
    record = msgspec.structs.replace(
        old, eval_id=edir.eval_id, replay_of=old.eval_id, created_at=time.time(),
        state="running", resumes=0, figures={},
    )  # fmt: skip
    FileAccount.create(edir.account_path, old.budget_usd)
    edir.write(record)
    data = _tasks_of(record)
    try:
        return trio.run(_replay, edir, record, data, source, say or (lambda _line: None))
    finally:
        edir.unlock()


async def _replay(
    edir: EvalDir, record: EvalRecord, data: Dataset, source: EvalDir, say: Say
) -> EvalOutcome:
    await drive(edir, record, data, say, replaying=source)
    outcome = finish(edir, record)
    outcome.record.state = source.read().state  # the cap's story is the original's
    edir.write(outcome.record)
    return outcome


def worst_case_line(record: EvalRecord) -> str:
    """The worst case, said before the first call."""
    runs = len(record.scenarios) * len(record.task_ids) * record.epochs
    return (
        f"eval {record.eval_id}: {runs} run(s); worst case {money(record.worst_case_usd)} "
        f"(every run at its own cap), held to the eval's cap {money(record.budget_usd)}"
    )


async def run_eval(edir: EvalDir, record: EvalRecord, data: Dataset, say: Say) -> EvalOutcome:
    """Runs what is left of the eval, then writes its figures to ``eval.json``."""
    say(worst_case_line(record))
    try:
        await drive(edir, record, data, say)
    except BaseException:
        record.state = "interrupted"
        edir.write(record)
        raise
    return finish(edir, record)


def finish(edir: EvalDir, record: EvalRecord) -> EvalOutcome:
    results = edir.results()
    rows = eval_rows(record, results)
    state = FileAccount(edir.account_path).read()
    record.state = "budget_exhausted" if state.refused else "finished"
    record.simulated = record.simulated or any(r.simulated for r in results)
    record.figures = {
        "simulated": record.simulated,
        "spent_usd": state.spent,
        "scenarios": rows,
    }
    edir.write(record)
    return EvalOutcome(eval_dir=edir.path, record=record, rows=rows, results=results)
