"""``sopbus replay RUN [--into DIR]``: run a finished run again, every answer from its recording.

No provider is called and nothing is spent: each LLM answer comes from the run's
``calls.jsonl`` (matched by round, role and request), so a ``rounds`` run yields the same
messages in the same order. Compare the two with ``sopbus diff RUN REPLAY``.
"""

from __future__ import annotations

import argparse

from ._flags import INTO, PROGRESS_FLAGS, RUN_FLAGS, add
from ._runref import resolve_run

NAME = "replay"
HELP = "run a run again at no cost, every LLM answer taken from its recording"


def configure(parser: argparse.ArgumentParser) -> None:
    into = INTO.but(
        help="the folder (such as runs) that gets the replay's new run directory (default: "
        "the folder RUN is in)"
    )
    add(parser, *RUN_FLAGS, into, *PROGRESS_FLAGS)


def run(args: argparse.Namespace) -> int:
    from sopbus.bus.store import plan_replay

    scenario, continuation = plan_replay(resolve_run(args.run, args.runs_dir), into=args.into)
    from ._running import run_command

    return run_command(scenario, args, continuation)
