"""``sopbus eval SCENARIO... --dataset D [--limit N] [--epochs K] [--concurrency C]
[--budget USD] [--scorer S]`` and ``sopbus eval --resume EVAL [--budget USD]``.

Runs each scenario once per task and epoch, each an ordinary run directory under
``evals/<id>/runs/``, all under one cap; prints a line per task as it ends and the figures
per scenario at the end. Exit codes: 0 every task ran, 2 a usage or configuration error,
3 the cap was spent and tasks were not run, 130 interrupted (finish with ``--resume``).
See :mod:`sopbus.eval`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ._cmd_sweep import RESUME as SWEEP_RESUME
from ._flags import (
    BUDGET,
    CONCURRENCY,
    DATASET,
    EPOCHS,
    EVALS_DIR,
    LIMIT,
    MODEL_FLAGS,
    SANDBOX,
    SCENARIO,
    SCORER,
    Flag,
    add,
)

if TYPE_CHECKING:
    from sopbus.eval import Dataset, EvalDir, EvalRecord

NAME = "eval"
HELP = "score scenarios on a dataset of tasks: pass@k, cost per solved task, under one cap"

VARIANT = Flag(
    "--variant",
    dest="variants",
    metavar="KEY=VALUE",
    action="append",
    default=[],
    help="a variant of every scenario with one setting changed (repeatable: each is a "
    "column of the comparison), such as llm.model=gpt-4o or sop.max_fix_rounds=2",
)
# Not sweep's --resume (an ID of a sweep): an eval's, with the same name on purpose.
RESUME = Flag(
    "--resume",
    homonym_of=SWEEP_RESUME,
    metavar="EVAL",
    help="finish an interrupted eval: tasks with a result are kept, their runs not paid again",
)

REPLAY = Flag(
    "--replay",
    metavar="EVAL",
    help="run an eval again into a new eval directory, every answer from its runs' "
    "recordings, at no cost, and score it again",
)


def configure(parser: argparse.ArgumentParser) -> None:
    scenarios = SCENARIO.but(
        nargs="*", help="scenario files (TOML) or shipped names, compared side by side"
    )
    add(parser, scenarios, DATASET, LIMIT, EPOCHS, CONCURRENCY, SCORER, VARIANT)
    add(parser, BUDGET.but(help="the whole eval's budget cap (default: every run's cap added up)"))
    add(
        parser,
        *MODEL_FLAGS,
        SANDBOX,
        EVALS_DIR.but(help="where eval directories go (default: evals)"),
    )
    add(parser, RESUME, REPLAY)


def run(args: argparse.Namespace) -> int:
    from sopbus.bus import ConfigError
    from sopbus.eval import check_counts

    check_counts(args.limit, args.epochs, args.concurrency)
    if args.replay is not None:
        return _replayed(args)
    if args.resume is not None:
        if args.scenario or args.dataset:
            raise ConfigError(
                "--resume finishes the eval as it was planned; drop SCENARIO and --dataset"
            )
        from sopbus.eval import reopen

        edir, record, data = reopen(args.resume, args.evals_dir, args.budget_usd)
    else:
        edir, record, data = _planned(args)
    try:
        return _execute(edir, record, data)
    finally:
        edir.unlock()


def _planned(args: argparse.Namespace) -> tuple[EvalDir, EvalRecord, Dataset]:
    from sopbus._examples import scenario_path
    from sopbus.bus import ConfigError
    from sopbus.eval import EvalArgs, new_eval

    if not args.scenario or args.dataset is None:
        raise ConfigError("sopbus eval needs SCENARIO... and --dataset D (or --resume EVAL)")
    return new_eval(
        EvalArgs(
            scenarios=tuple(scenario_path(s) for s in args.scenario),
            dataset=args.dataset,
            limit=args.limit,
            epochs=args.epochs,
            concurrency=args.concurrency,
            budget=args.budget_usd,
            scorer=args.scorer,
            provider=args.provider,
            model=args.model,
            base_url=args.base_url,
            price=args.price,
            evals_dir=args.evals_dir,
            sandbox=args.sandbox,
            variants=tuple(args.variants),
        )
    )


def _replayed(args: argparse.Namespace) -> int:
    from sopbus._assemble import configure_logging
    from sopbus.eval import replay_eval

    configure_logging(quiet=True)
    outcome = replay_eval(args.replay, args.evals_dir, say=_say)
    print_eval(outcome.record, outcome.rows)
    print(f"eval directory: {outcome.eval_dir}")
    return 0


def _say(line: str) -> None:
    from ._fit import wrapped
    from ._runref import line_width

    print(wrapped(line, line_width()), file=sys.stderr, flush=True)


def _execute(edir: EvalDir, record: EvalRecord, data: Dataset) -> int:
    import trio

    from sopbus._assemble import configure_logging
    from sopbus.eval import run_eval

    configure_logging(quiet=True)
    try:
        outcome = trio.run(run_eval, edir, record, data, _say)
    except BaseException as exc:
        if not _interrupted(exc):
            raise
        _say(f"sopbus: interrupted; finish it with `sopbus eval --resume {record.eval_id}`")
        return 130
    print_eval(outcome.record, outcome.rows)
    print(f"eval directory: {edir.path}")
    return 3 if outcome.record.state == "budget_exhausted" else 0


def print_eval(record: EvalRecord, rows: Sequence[dict[str, Any]]) -> None:
    from sopbus.eval import table_lines

    from ._fit import wrapped
    from ._runref import line_width

    width = line_width()
    for line in table_lines(record, rows):
        print(wrapped(line, width, later="    "))


def _interrupted(exc: BaseException) -> bool:
    if isinstance(exc, BaseExceptionGroup):
        return exc.subgroup(KeyboardInterrupt) is not None
    return isinstance(exc, KeyboardInterrupt)
