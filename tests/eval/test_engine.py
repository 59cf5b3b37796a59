"""Evals end to end on the simulator: each task a normal run, the answer read where the
scenario says, HumanEval scored from a team's code output, one cap across concurrent
tasks never passed, a resume that pays nothing twice, a replay to the same scores."""

from __future__ import annotations

import json
import shutil
from decimal import Decimal
from pathlib import Path

import pytest

import sopbus
from sopbus.bus.money import FileAccount
from sopbus.bus.store import ledger_of
from sopbus.eval import EvalDir, EvalOutcome, replay_eval
from support.humaneval import problems

DATA = Path(__file__).parent / "data"


@pytest.fixture
def work(tmp_path: Path) -> Path:
    for name in ("arith.toml", "arith_fixtures.toml", "arith.jsonl"):
        shutil.copy(DATA / name, tmp_path / name)
    return tmp_path


def _evaluate(
    work: Path, *, budget: str | None = None, concurrency: int = 4, epochs: int = 1
) -> EvalOutcome:
    return sopbus.evaluate(
        [work / "arith.toml"],
        str(work / "arith.jsonl"),
        evals_dir=work / "evals",
        budget=budget,
        concurrency=concurrency,
        epochs=epochs,
    )


def test_each_task_is_a_run_scored_where_the_scenario_says(work: Path) -> None:
    outcome = _evaluate(work)
    kinds = {r.task_id: r.kind for r in outcome.results}
    assert kinds == {"add": "passed", "capital": "passed", "mul": "wrong"}
    for result in outcome.results:
        run = sopbus.RunOutcome.open(outcome.eval_dir / "runs" / str(result.run_id))
        assert run.status == "completed"
    row = outcome.rows[0]
    assert (row["covered"], row["tasks"], row["solved"]) == (3, 3, 2)
    saved = json.loads((outcome.eval_dir / "eval.json").read_text())
    assert saved["simulated"] is True and saved["figures"]["simulated"] is True
    assert saved["figures"]["scenarios"][0]["simulated"] is True
    lines = (outcome.eval_dir / "results.jsonl").read_text().splitlines()
    assert len(lines) == 3 and all(json.loads(x)["simulated"] for x in lines)


HE_TEAM = """
[scenario]
name = "he-fixture"

[run]
max_rounds = 2
budget_usd = 0.05

[llm]
provider = "sim"
max_tokens = 800
fixtures = ["he_fixtures.toml"]

[[roles]]
name = "FunctionWriter"
watch = ["UserRequirement"]
actions = ["CompleteFunction"]

[actions.CompleteFunction]
instruction = "Complete the function."
output = { code = "str" }

[eval]
answer = "output:CompleteFunction.code"
"""


def test_humaneval_from_a_teams_code_output(tmp_path: Path) -> None:
    he = problems()
    good = he["HumanEval/0"]
    fenced = "```python\n" + good["prompt"] + good["canonical_solution"] + "```"
    fixtures = (
        "# SIMULATED OUTPUT: canned answers for sopbus's sim provider; no model wrote them.\n"
        "simulated = true\n"
        + "".join(
            f"[[fixture]]\naction = 'CompleteFunction'\nmatch = {json.dumps(entry)}\n"
            f"responses = [{json.dumps(json.dumps({'code': code}))}]\n"
            for entry, code in (
                ("has_close_elements", fenced),
                ("separate_paren_groups", he["HumanEval/1"]["canonical_solution"]),
                ("truncate_number", "    return 0.0\n"),
            )
        )
    )
    (tmp_path / "he_fixtures.toml").write_text(fixtures)
    (tmp_path / "he.toml").write_text(HE_TEAM)
    outcome = sopbus.evaluate(
        [tmp_path / "he.toml"], "humaneval", limit=3, evals_dir=tmp_path / "evals"
    )
    kinds = {r.task_id: r.kind for r in outcome.results}
    assert kinds == {"HumanEval/0": "passed", "HumanEval/1": "passed", "HumanEval/2": "wrong"}


def _spent_in_runs(eval_dir: Path) -> Decimal:
    return sum(
        (line.cost_usd for d in (eval_dir / "runs").iterdir() for line in ledger_of(d)),
        Decimal(0),
    )


def _many(work: Path, n: int) -> None:
    questions = ["What is 2+2?", "What is the capital of France?", "What is 3*3?"]
    with (work / "arith.jsonl").open("w") as out:
        for i in range(n):
            out.write(
                json.dumps({"id": f"q{i}", "input": questions[i % 3], "expected": "4"}) + "\n"
            )


def test_one_cap_across_concurrent_tasks_is_never_passed(work: Path) -> None:
    _many(work, 12)
    outcome = _evaluate(work, budget="0.00018", concurrency=4)
    account = FileAccount(outcome.eval_dir / "budget.json").read()
    assert account.spent <= Decimal("0.00018")
    assert account.held == 0
    assert _spent_in_runs(outcome.eval_dir) == account.spent
    kinds = [r.kind for r in outcome.results]
    assert "not_run" in kinds or "refused" in kinds
    row = outcome.rows[0]
    assert row["covered"] < row["tasks"] == 12
    assert row["covered"] == sum(k not in ("not_run", "refused") for k in kinds)
    assert outcome.record.state == "budget_exhausted"


def test_a_resume_finishes_the_eval_and_pays_nothing_twice(work: Path) -> None:
    _many(work, 9)
    first = _evaluate(work, budget="0.00018", concurrency=2)
    before = {
        r.run_id: len(ledger_of(first.eval_dir / "runs" / str(r.run_id)))
        for r in first.results
        if r.scored
    }
    assert 0 < len(before) < 9
    resumed = sopbus.evaluate(resume=first.record.eval_id, evals_dir=work / "evals", budget="1")
    assert resumed.record.state == "finished"
    assert all(r.scored for r in resumed.results) and len(resumed.results) == 9
    for run_id, calls in before.items():  # a finished task's run made no new call
        assert len(ledger_of(first.eval_dir / "runs" / str(run_id))) == calls
    account = FileAccount(first.eval_dir / "budget.json").read()
    assert account.spent == _spent_in_runs(first.eval_dir)
    lines = [json.loads(x) for x in (first.eval_dir / "results.jsonl").read_text().splitlines()]
    finished = [
        (x["task_id"], x["epoch"]) for x in lines if x["kind"] not in ("not_run", "refused")
    ]
    assert len(finished) == len(set(finished)) == 9


def test_an_eval_replays_at_no_cost_to_the_same_scores(work: Path) -> None:
    first = _evaluate(work, epochs=2)
    again = replay_eval(first.record.eval_id, work / "evals")
    key = lambda r: (r.task_id, r.epoch)  # noqa: E731
    assert sorted((key(r), r.kind) for r in again.results) == sorted(
        (key(r), r.kind) for r in first.results
    )
    assert again.rows[0]["pass_at_1"] == first.rows[0]["pass_at_1"]
    assert again.rows[0]["pass_at_2"] == first.rows[0]["pass_at_2"]
    assert FileAccount(EvalDir(again.eval_dir).account_path).read().spent == 0
    assert again.record.replay_of == first.record.eval_id


def test_a_judge_is_a_capped_run_whose_score_and_reasons_are_kept(work: Path) -> None:
    (work / "arith.jsonl").write_text(
        json.dumps({"id": "j", "input": "What is 2+2?", "check": "judge:the answer is 4"}) + "\n"
    )
    outcome = _evaluate(work)
    [result] = outcome.results
    assert result.judge_run_id is not None
    judge = sopbus.RunOutcome.open(outcome.eval_dir / "runs" / result.judge_run_id)
    assert judge.total_usd > 0
    account = FileAccount(outcome.eval_dir / "budget.json").read()
    assert account.by_holder[result.judge_run_id] == judge.total_usd
    assert result.usd == account.spent
    assert result.kind in ("passed", "wrong") and isinstance(result.detail, str)


@pytest.mark.parametrize(
    ("table", "place"),
    [('output = { answer = "str" }\nartifact = "answer.txt"', "artifact:answer.txt"),
     ('output = { answer = "str" }', "last_message")],
)  # fmt: skip
def test_the_answer_is_read_from_an_artifact_or_the_last_message(
    work: Path, table: str, place: str
) -> None:
    text = (work / "arith.toml").read_text()
    text = text.replace('output = { answer = "str" }', table)
    (work / "other.toml").write_text(text.replace("output:Answer.answer", place))
    outcome = sopbus.evaluate(
        [work / "arith.toml", work / "other.toml"], str(work / "arith.jsonl"),
        evals_dir=work / "evals", scorer="contains",
    )  # fmt: skip
    assert [r["scenario"] for r in outcome.rows] == ["arith", "other"]
    kinds = {(r.scenario, r.task_id): r.kind for r in outcome.results}
    assert kinds[("other", "add")] == "passed" and kinds[("other", "mul")] == "wrong"
    assert kinds[("other", "capital")] == "passed"


def test_variants_of_a_scenario_side_by_side(work: Path) -> None:
    outcome = sopbus.evaluate(
        [work / "arith.toml"], str(work / "arith.jsonl"), evals_dir=work / "evals",
        variants=["llm.model=gpt-4o-mini", "llm.model=gpt-4o"],
    )  # fmt: skip
    rows = {r["scenario"]: r for r in outcome.rows}
    assert set(rows) == {"arith-model-gpt-4o-mini", "arith-model-gpt-4o"}
    cheap, dear = rows["arith-model-gpt-4o-mini"], rows["arith-model-gpt-4o"]
    assert cheap["pass_at_1"] == dear["pass_at_1"] and cheap["usd"] < dear["usd"]
    assert (cheap["front"], dear["front"]) == (True, False)
