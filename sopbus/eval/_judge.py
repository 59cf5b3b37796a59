"""The LLM judge: one action with a rubric, run as a run of its own (priced, capped by the
eval's account, recorded, replayable like every run), its score and reasons kept.

The judge speaks to the model the task's scenario calls (its provider, model, endpoint and
prices), at temperature 0, with an answer of at most ``_MAX_TOKENS`` tokens.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sopbus.bus.scenario import Scenario, scenario_from_tables

from ._dataset import Task

JUDGE_ACTION = "JudgeAnswer"
_MAX_TOKENS = 512
_INSTRUCTION = (
    "You are an impartial judge. Read the task, the answer and the rubric in the request. "
    "Give `score` from 0 (fails the rubric) to 1 (meets it fully), `passed` true only when "
    "the answer meets the rubric, and `reasons`: one or two sentences that say why."
)


def judge_scenario(
    base: Scenario, task: Task, answer: str, rubric: str, runs_dir: Path
) -> Scenario:
    """The judge's one-role scenario for ``answer`` to ``task``, on ``base``'s model."""
    llm: dict[str, Any] = {
        "provider": base.llm.provider,
        "model": base.llm.model,
        "temperature": 0.0,
        "max_tokens": _MAX_TOKENS,
        "timeout_s": base.llm.timeout_s,
    }
    if base.llm.base_url is not None:
        llm["base_url"] = base.llm.base_url
    tables: dict[str, Any] = {
        "scenario": {"name": "judge", "idea": _request(task, answer, rubric)},
        "run": {
            "max_rounds": 2,
            "budget_usd": base.run.budget_usd,
            "seed": base.run.seed,
            "runs_dir": str(runs_dir),
        },
        "llm": llm,
        "prices": base.price_table(),
        "roles": [
            {
                "name": "Judge",
                "profile": "Judge",
                "goal": "score answers by a rubric",
                "watch": ["UserRequirement"],
                "actions": [JUDGE_ACTION],
            }
        ],
        "actions": {
            JUDGE_ACTION: {
                "instruction": _INSTRUCTION,
                "output": {"score": "float", "passed": "bool", "reasons": "str"},
            }
        },
    }
    return scenario_from_tables(tables, path=base.path, shown="the eval's judge")


def _request(task: Task, answer: str, rubric: str) -> str:
    question = task.input if isinstance(task.input, str) else repr(task.input)
    return f"# Task\n{question}\n\n# Answer\n{answer}\n\n# Rubric\n{rubric}\n"
