"""Evals: a scenario (or several, side by side) run once per task and epoch of a dataset,
each answer scored, the figures aggregated under one cap.

``_dataset`` loads HumanEval or a JSONL file of tasks; ``_start`` checks the scenarios and
writes ``evals/<id>/`` (``_record``); ``_engine`` runs the cells ``concurrency`` at a time,
each an ordinary run drawing on the eval's shared account; ``_answer`` reads a run's answer
where ``[eval].answer`` says; ``_scorers`` (with ``_extract`` and ``_sandboxed`` for code,
``_judge`` for a rubric) scores it; ``_figures`` and ``_table`` aggregate and show it;
``_api`` is :func:`sopbus.evaluate`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sopbus.bus import lazy_exports

if TYPE_CHECKING:
    from ._api import EvalOutcome as EvalOutcome
    from ._api import evaluate as evaluate
    from ._api import reopen as reopen
    from ._api import replay_eval as replay_eval
    from ._api import run_eval as run_eval
    from ._dataset import DATASETS as DATASETS
    from ._dataset import Dataset as Dataset
    from ._dataset import Task as Task
    from ._dataset import load_dataset as load_dataset
    from ._engine import drive as drive
    from ._extract import extract_completion as extract_completion
    from ._figures import pass_at_k as pass_at_k
    from ._figures import wilson as wilson
    from ._outcome import KINDS as KINDS
    from ._outcome import TaskResult as TaskResult
    from ._page import write_eval_page as write_eval_page
    from ._record import EvalDir as EvalDir
    from ._record import EvalRecord as EvalRecord
    from ._record import eval_dirs as eval_dirs
    from ._record import resolve_eval as resolve_eval
    from ._scorers import SCORERS as SCORERS
    from ._start import EvalArgs as EvalArgs
    from ._start import check_counts as check_counts
    from ._start import new_eval as new_eval
    from ._start import resumed_eval as resumed_eval
    from ._table import eval_rows as eval_rows
    from ._table import table_lines as table_lines

_WHERE: dict[str, str] = {
    "EvalOutcome": "._api",
    "evaluate": "._api",
    "reopen": "._api",
    "replay_eval": "._api",
    "run_eval": "._api",
    "DATASETS": "._dataset",
    "Dataset": "._dataset",
    "Task": "._dataset",
    "load_dataset": "._dataset",
    "drive": "._engine",
    "extract_completion": "._extract",
    "pass_at_k": "._figures",
    "wilson": "._figures",
    "KINDS": "._outcome",
    "write_eval_page": "._page",
    "TaskResult": "._outcome",
    "EvalDir": "._record",
    "EvalRecord": "._record",
    "eval_dirs": "._record",
    "resolve_eval": "._record",
    "SCORERS": "._scorers",
    "EvalArgs": "._start",
    "check_counts": "._start",
    "new_eval": "._start",
    "resumed_eval": "._start",
    "eval_rows": "._table",
    "table_lines": "._table",
}

__getattr__, __dir__, __all__ = lazy_exports(globals(), _WHERE)
