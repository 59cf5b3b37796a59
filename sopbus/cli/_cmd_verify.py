"""``sopbus verify RUN``: is a run's record intact?

Checks the hash chains of ``events.jsonl`` (and a resumed run's earlier event logs, each
chained to the one before), ``costs.jsonl``, ``calls.jsonl`` and (for a gated run) the
receipts; the ledger against the event logs, the answers and ``summary.json`` (its totals,
its verdict and what it restates of the log), call by call; that the record is this
directory's and whole (a finished run keeps its summary and scenario); the artifacts
against their recorded writes, and each receipt against the files it vouches for (see
:mod:`sopbus.bus.store._verify`). With a key it checks the keyed seal
(:mod:`sopbus.bus.store._keyed`). Then, for a finished run whose chains hold and whose
scenario is the one it ran, it replays the recorded answers and compares the messages
(:mod:`sopbus._assemble._recheck`). Prints one line per file and, for each problem, the
file and line number where it is. Exit 0 when intact (a torn last line of a killed run is
reported, but is not tampering), 1 when not (also for a directory that holds a run's files
but no ``events.jsonl``: its log was removed), 2 for a key file that cannot be used or a
directory that holds no run.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from ._args import path_arg
from ._flags import RUN_FLAGS, Flag, add
from ._runref import resolve_run

if TYPE_CHECKING:
    from sopbus._assemble import Recheck
    from sopbus.bus.store import RunVerdict

NAME = "verify"
HELP = "check that a run's event logs, cost ledger, answers, summary, artifacts and receipts are intact"


KEY_FILE = Flag(
    "--key-file",
    metavar="FILE",
    type=path_arg,
    help="check the run's keyed seal with the key in FILE (default: $SOPBUS_SEAL_KEY)",
)
NO_REPLAY = Flag(
    "--no-replay",
    action="store_true",
    help="do not replay the recorded answers to check the messages (faster; an edited "
    "message that was sealed again then goes unseen)",
)


def configure(parser: argparse.ArgumentParser) -> None:
    add(parser, *RUN_FLAGS, KEY_FILE, NO_REPLAY)


def run(args: argparse.Namespace) -> int:
    from sopbus._assemble import run_environ
    from sopbus.bus.store import check_keyed_seal, read_key_file, seal_key, verify_run

    run_dir = _run_dir(args.run, args.runs_dir)
    key = (
        read_key_file(args.key_file, "--key-file")
        if args.key_file is not None
        else seal_key(run_environ())
    )
    verdict = verify_run(run_dir)
    check_keyed_seal(run_dir, key, verdict.problems.append, verdict.notes.append)
    replayed = None
    if args.no_replay:
        verdict.notes.append(
            f"{run_dir}: --no-replay: the messages are not checked against the answers"
        )
    elif verdict.replayable:  # a broken chain or scenario leaves nothing to replay
        from sopbus._assemble import recheck_messages

        replayed = recheck_messages(run_dir)
        verdict.problems += replayed.problems
        verdict.notes += replayed.notes
    _print(verdict, run_dir, replayed)
    return 0 if verdict.intact else 1


def _run_dir(ref: str, runs_dir: Path) -> Path:
    """The run to verify; a directory whose event log was removed is one too: verifying
    it reports the removal (exit 1), where other commands cannot find a run (exit 2)."""
    from sopbus.bus import ConfigError

    from ._runref import remains_of_run

    try:
        return resolve_run(ref, runs_dir)
    except ConfigError:
        remains = remains_of_run(ref, runs_dir)
        if remains is None:
            raise
        return remains


def _print(verdict: RunVerdict, run_dir: Path, replayed: Recheck | None) -> None:
    from ._fit import hanging, wrapped
    from ._runref import line_width

    width = line_width()  # each line wrapped under its label, a hash or a path whole
    print(wrapped(f"{run_dir}:", width))
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
            hanging(
                f"  {report.path.relative_to(run_dir)}: ",
                f"{report.lines} lines, {state}{torn}, head {report.head.decode()}",
                width,
            )
        )
    if verdict.receipts:
        print(hanging("  receipts: ", str(verdict.receipts), width))
    if replayed is not None and replayed.messages:
        print(f"  messages: {replayed.messages}, checked against a replay of the answers")
    for note in verdict.notes:
        print(hanging("note: ", note, width))
    for problem in verdict.problems:
        print(hanging("error: ", problem, width))
    print("intact" if verdict.intact else "NOT intact")
