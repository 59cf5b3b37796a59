"""``sopbus resume RUN [--budget USD] [--max-rounds N] [--force]``: continue a killed or stopped run.

The run's scenario is run again into the same directory; every call the run had already
answered is answered from its own ``calls.jsonl`` (no provider call, no new cost), calls
that were in flight when it died are ledgered ``lost`` at their reservation and made
again, and the run goes on live from there. See :mod:`sopbus.bus.store._resume` for what happens to each
file. A run stopped by its round limit or budget resumes with the limit raised. A run that
completed is left as it is (exit 0), unless ``--force`` runs it again.
"""

from __future__ import annotations

import argparse

from ._flags import BUDGET, BUS_FLAGS, HUMAN_INPUT, MAX_ROUNDS, PROGRESS_FLAGS, RUN_FLAGS, Flag, add
from ._runref import resolve_run

NAME = "resume"
HELP = "continue a killed or stopped run in its directory, paying no completed call twice"


FORCE = Flag(
    "--force",
    action="store_true",
    help="run a completed run again, to continue past its end with new limits (without it, "
    "resuming a completed run changes nothing and exits 0)",
)


def configure(parser: argparse.ArgumentParser) -> None:
    budget = BUDGET.but(help="a new budget cap in USD (above what the run has spent)")
    rounds = MAX_ROUNDS.but(help="a new round limit (for a run stopped by its round limit)")
    human = HUMAN_INPUT.but(
        help="answers for roles with human = true that the recording lacks, one a line (a "
        "file or a named pipe; a JSON object for an action with output fields); default: "
        "ask on the terminal"
    )
    add(parser, *RUN_FLAGS, budget, rounds, human, FORCE, *PROGRESS_FLAGS, *BUS_FLAGS)


def run(args: argparse.Namespace) -> int:
    import sys

    from sopbus.bus.store import finished, plan_resume

    run_dir = resolve_run(args.run, args.runs_dir)
    done = None if args.force else finished(run_dir, max_rounds=args.max_rounds)
    if done is not None:
        # Nothing to continue: said, and the directory left exactly as it is.
        print(
            f"run {run_dir.name} is complete: {done}; nothing was resumed and nothing in "
            f"{run_dir} changed. To run it again past its end with new limits, add --force "
            f"(e.g. `sopbus resume {run_dir.name} --force --max-rounds N`)",
            file=sys.stderr,
        )
        return 0
    scenario, continuation = plan_resume(
        run_dir, budget_usd=args.budget_usd, max_rounds=args.max_rounds
    )
    from ._running import run_command

    return run_command(scenario, args, continuation)
