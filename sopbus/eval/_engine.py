"""Running an eval: every (scenario, task, epoch) not yet in ``results.jsonl``, at most
``concurrency`` at a time as trio tasks, each an ordinary run under the eval's one account.

Cells go in epoch order, then task order, the scenarios of a task side by side, so that
money that runs out leaves whole tasks unreached rather than one scenario unmeasured. Once
the account has refused a reservation no new run starts: the cells left are ``not_run``.
A run directory left by an interrupted eval is resumed (``sopbus resume``'s machinery),
or only scored when it had ended; no finished call is paid again.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import msgspec
import trio

from sopbus.bus import ConfigError, RunSummary, read_summary
from sopbus.bus.money import AccountShare, FileAccount
from sopbus.bus.scenario import Scenario, load_scenario, scenario_with_overrides

from ._answer import read_answer, read_payload
from ._dataset import Dataset, Task
from ._judge import JUDGE_ACTION, judge_scenario
from ._outcome import Scored, TaskResult
from ._record import EvalDir, EvalRecord
from ._scorers import ScoreContext, score
from ._start import budget_fix

Say = Callable[[str], None]
_DEFAULT_SCORER = "exact"


@dataclass(frozen=True)
class Cell:
    """One run of the eval: a scenario's label, a task, an epoch."""

    label: str
    task: Task
    epoch: int

    def run_id(self, eval_id: str) -> str:
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", self.task.id)
        return f"{eval_id}-{self.label}-{safe}-e{self.epoch}"


async def drive(
    edir: EvalDir,
    record: EvalRecord,
    dataset: Dataset,
    say: Say,
    *,
    replaying: EvalDir | None = None,
) -> None:
    """Runs every cell of ``record`` without a result; appends each to ``results.jsonl``.
    ``replaying``: the eval whose runs are replayed (every answer from its recordings, at
    no cost) instead of run anew."""
    account = FileAccount(edir.account_path, fix=budget_fix(record.eval_id))
    # Tasks the cap did not reach (or cut) are tried again: a resume may bring more money.
    done = {(r.scenario, r.task_id, r.epoch) for r in edir.results() if r.scored}
    cells = [
        Cell(s.label, task, epoch)
        for epoch in range(record.epochs)
        for task in dataset.tasks
        for s in record.scenarios
        if (s.label, task.id, epoch) not in done
    ]
    bases = {s.label: _base(edir, s.label, s.origin) for s in record.scenarios}
    runner = _Runner(edir, record, dataset, account, bases, say)
    if replaying is not None:
        runner.source = {(r.scenario, r.task_id, r.epoch): r for r in replaying.results()}
        runner.source_runs = replaying.runs_dir
    slots = trio.Semaphore(record.concurrency)
    async with trio.open_nursery() as nursery:
        for cell in cells:
            await slots.acquire()
            nursery.start_soon(runner.one, cell, slots)


def _base(edir: EvalDir, label: str, origin: str) -> Scenario:
    """The scenario as the eval runs it, its files resolved against the original's folder."""
    path = Path(origin)
    scenario = load_scenario(
        edir.scenario_file(label), base_dir=path.parent if path.is_file() else None
    )
    return msgspec.structs.replace(scenario, path=path) if path.is_file() else scenario


class _Runner:
    def __init__(
        self,
        edir: EvalDir,
        record: EvalRecord,
        dataset: Dataset,
        account: FileAccount,
        bases: dict[str, Scenario],
        say: Say,
    ):
        self.edir, self.record, self.dataset = edir, record, dataset
        self.account, self.bases, self.say = account, bases, say
        self.ended = sum(r.scored for r in edir.results())
        self.total = len(record.scenarios) * len(record.task_ids) * record.epochs
        self.source: dict[tuple[str, str, int], TaskResult] | None = None
        self.source_runs: Path | None = None

    async def one(self, cell: Cell, slots: trio.Semaphore) -> None:
        try:
            result = await self._result(cell)
        finally:
            slots.release()
        self.edir.append(result)
        self.ended += 1
        self.say(_progress(self.ended, self.total, result))

    async def _result(self, cell: Cell) -> TaskResult:
        if self.source is not None:
            return await self._replayed(cell, self.source[(cell.label, cell.task.id, cell.epoch)])
        run_id = cell.run_id(self.record.eval_id)
        run_dir = self.edir.runs_dir / run_id
        summary = read_summary(run_dir)
        if summary is None or summary.status == "cancelled" or _refused(summary):
            if not run_dir.is_dir() and self.account.read().refused:
                return TaskResult(
                    scenario=cell.label, task_id=cell.task.id, epoch=cell.epoch, kind="not_run",
                    detail="the eval's cap was spent before this task started",
                    simulated=self.record.simulated,
                )  # fmt: skip
            summary = await self._run(cell, run_id, run_dir)
        return await self._scored(cell, summary, run_dir)

    async def _replayed(self, cell: Cell, source: TaskResult) -> TaskResult:
        """``source``'s run replayed into this eval and scored again (not run: as it was)."""
        if source.run_id is None or self.source_runs is None:
            return msgspec.structs.replace(source)
        summary = await self._replay(self.source_runs / source.run_id)
        return await self._scored(cell, summary, Path(summary.run_dir))

    async def _replay(self, run_dir: Path) -> RunSummary:
        from sopbus._assemble import execute
        from sopbus.bus.store import plan_replay

        scenario, continuation = plan_replay(run_dir, into=self.edir.runs_dir)
        return (await execute(scenario, continuation=continuation)).summary

    async def _run(self, cell: Cell, run_id: str, run_dir: Path) -> RunSummary:
        from sopbus._assemble import execute

        base = self.bases[cell.label]
        pool = AccountShare(self.account, run_id)
        if run_dir.is_dir() and (run_dir / "scenario.toml").is_file():
            from sopbus.bus.store import plan_resume

            scenario, continuation = plan_resume(run_dir)
            carried = sum((line.cost_usd for line in continuation.carried), Decimal(0))
            lost = sum((c.amount for c in continuation.lost), Decimal(0))
            await self.account.rebase(run_id, carried + lost)
            outcome = await execute(scenario, continuation=continuation, pool=pool)
        else:
            scenario = scenario_with_overrides(
                base,
                idea=task_idea(base, cell.task),
                seed=base.run.seed + cell.epoch,
                runs_dir=self.edir.runs_dir,
            )
            outcome = await execute(scenario, run_id=run_id, pool=pool)
        return outcome.summary

    async def _scored(self, cell: Cell, summary: RunSummary, run_dir: Path) -> TaskResult:
        base = self.bases[cell.label]
        result = TaskResult(
            scenario=cell.label,
            task_id=cell.task.id,
            epoch=cell.epoch,
            kind="error",
            run_id=summary.run_id or run_dir.name,
            usd=summary.total_usd,
            prompt_tokens=summary.prompt_tokens,
            completion_tokens=summary.completion_tokens,
            wall_s=summary.duration_s,
            end_reason=summary.end_reason,
            simulated=summary.simulated,
        )
        place = base.eval.answer if base.eval else "last_message"
        if _refused(summary):
            result.kind, result.detail = "refused", summary.detail
            return result
        answer = read_answer(run_dir, place)
        if summary.status == "failed" or answer is None:
            result.detail = (
                summary.detail if summary.status == "failed" else f"no answer at {place}"
            )
            return result
        verdict = await self._score(cell, base, answer, result)
        result.passed, result.kind, result.detail, result.score = (
            verdict.passed, verdict.kind, verdict.detail, verdict.score,
        )  # fmt: skip
        if verdict.kind == "wrong" and _cut_off(summary, run_dir):
            result.kind = "cut_off"
        return result

    async def _score(self, cell: Cell, base: Scenario, answer: str, result: TaskResult) -> Scored:
        spec = cell.task.check or self.record.scorer or _DEFAULT_SCORER
        timeout = base.eval.check_timeout_s if base.eval else 3.0

        async def judge(task: Task, text: str, rubric: str) -> Scored:
            return await self._judge(cell, base, text, rubric, result)

        ctx = ScoreContext(timeout_s=timeout, base=Path(self.dataset.base), judge=judge)
        return await score(cell.task, answer, spec, ctx)

    async def _judge(
        self, cell: Cell, base: Scenario, answer: str, rubric: str, result: TaskResult
    ) -> Scored:
        from sopbus._assemble import execute

        judge_id = f"{cell.run_id(self.record.eval_id)}-judge"
        judge_dir = self.edir.runs_dir / judge_id
        summary = read_summary(judge_dir)
        source = self.source and self.source.get((cell.label, cell.task.id, cell.epoch))
        if source and source.judge_run_id and self.source_runs is not None:
            summary = await self._replay(self.source_runs / source.judge_run_id)
            judge_id, judge_dir = summary.run_id, Path(summary.run_dir)
        elif summary is None:
            scenario = judge_scenario(base, cell.task, answer, rubric, self.edir.runs_dir)
            pool = AccountShare(self.account, judge_id)
            summary = (await execute(scenario, run_id=judge_id, pool=pool)).summary
        result.judge_run_id = judge_id
        result.usd += summary.total_usd
        payload = read_payload(judge_dir, JUDGE_ACTION)
        if payload is None:
            return Scored(
                passed=False,
                kind="error",
                detail=f"the judge gave no verdict ({summary.end_reason})",
            )
        passed = bool(payload.get("passed"))
        number = payload.get("score")
        return Scored(
            passed=passed,
            kind="passed" if passed else "wrong",
            detail=str(payload.get("reasons", "")),
            score=float(number) if isinstance(number, (int, float)) else None,
        )


def task_idea(scenario: Scenario, task: Task) -> str:
    """The first message of ``task``'s run: ``[eval].idea`` filled with its inputs, or the
    input itself."""
    template = scenario.eval.idea if scenario.eval else None
    inputs = task.input if isinstance(task.input, dict) else {"input": task.input}
    if template is None:
        if isinstance(task.input, str):
            return task.input
        import json

        return json.dumps(task.input, ensure_ascii=False)
    try:
        return template.format_map(inputs)
    except (KeyError, IndexError, ValueError) as exc:
        raise ConfigError(
            f"{scenario.path}: [eval].idea names {exc} that task {task.id} does not give; "
            f"its inputs are {', '.join(sorted(inputs))} (write {{{{ and }}}} for braces)"
        ) from None


def _refused(summary: RunSummary) -> bool:
    """The eval's account (not the run's own cap) refused a call of the run."""
    return summary.end_reason == "budget_exhausted" and "the eval's budget" in summary.detail


def _cut_off(summary: RunSummary, run_dir: Path) -> bool:
    """The run stopped at one of its own limits, or an answer was cut at max_tokens."""
    if summary.end_reason in ("max_rounds", "budget_exhausted"):
        return True
    from sopbus.bus.store import ledger_of

    return any(line.finish_reason == "length" for line in ledger_of(run_dir))


def _progress(ended: int, total: int, result: TaskResult) -> str:
    what = result.kind.replace("_", " ")
    return f"[{ended}/{total}] {result.scenario} {result.task_id} epoch {result.epoch}: {what}"
