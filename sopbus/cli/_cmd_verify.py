"""``sopbus verify RUN``: is a run's record intact?

Checks the hash chains of ``events.jsonl`` (and a resumed run's earlier event logs),
``costs.jsonl``, ``calls.jsonl`` and (for a gated run) the receipts; the ledger against the
event logs, the answers and ``summary.json``, call by call; the artifacts against their
recorded SHA-256, and each receipt against the files it vouches for (see
:mod:`sopbus.bus.store._verify`). Prints one line
per file and, for each problem, the file and line number where it is. Exit 0 when intact
(a torn last line of a killed run is reported, but is not tampering), 1 when not.
"""

from __future__ import annotations

import argparse

from ._runref import add_run_arg, resolve_run

NAME = "verify"
HELP = "check that a run's event logs, cost ledger, answers, summary, artifacts and receipts are intact"


def configure(parser: argparse.ArgumentParser) -> None:
    add_run_arg(parser)


def run(args: argparse.Namespace) -> int:
    from sopbus.bus.store._verify import verify_run

    run_dir = resolve_run(args.run, args.runs_dir)
    verdict = verify_run(run_dir)
    print(f"{run_dir}:")
    for report in verdict.files:
        state = (
            "intact"
            if report.intact
            else f"BROKEN at line {report.broken.line}"
            if report.broken
            else ""
        )
        torn = " (last line torn)" if report.torn else ""
        print(
            f"  {report.path.relative_to(run_dir)}: {report.lines} lines, {state}{torn}, "
            f"head {report.head.decode()}"
        )
    if verdict.receipts:
        print(f"  receipts: {verdict.receipts}")
    for note in verdict.notes:
        print(f"note: {note}")
    for problem in verdict.problems:
        print(f"error: {problem}")
    print("intact" if verdict.intact else "NOT intact")
    return 0 if verdict.intact else 1
