"""``sopbus run`` and the commands that continue a run (resume, replay, fork): the run with
live progress, then the summary table, the optional report and trace, and the exit code.
The run itself is :func:`sopbus._assemble.execute`, as for the Python API."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from ._exit import ExitCode

if TYPE_CHECKING:
    from sopbus.bus import RunSummary
    from sopbus.bus.scenario import Scenario
    from sopbus.bus.store import Continuation


EXIT = {
    "completed": ExitCode.COMPLETED,
    "failed": ExitCode.FAILED,
    "budget_exhausted": ExitCode.BUDGET_EXHAUSTED,
    "cancelled": ExitCode.INTERRUPTED,
}


def run_command(
    scenario: Scenario, args: argparse.Namespace, continuation: Continuation | None = None
) -> int:
    """``sopbus run`` (and resume, replay, fork with a ``continuation``): the run with live
    progress, then the summary; returns the exit code."""
    import trio

    from sopbus._assemble import configure_logging, execute, run_environ
    from sopbus.bus.otel import check_available, wanted

    quiet = bool(getattr(args, "quiet", False))
    if wanted(bool(getattr(args, "otel", False)), os.environ):
        check_available()  # a missing extra is said before the run, not after it
    environ = run_environ()  # keys and endpoints: the environment over ./.env
    key_file = getattr(args, "seal_key_file", None)
    if key_file is not None:
        from sopbus.bus.store import SEAL_KEY_ENV, read_key_file

        environ[SEAL_KEY_ENV] = read_key_file(key_file, "--seal-key-file").decode()
    configure_logging(quiet, verbose=bool(getattr(args, "verbose", False)))
    from ._busargs import bus_options

    bus = bus_options(args)  # --bus: a NATS server that cannot be reached is said here
    outcome = trio.run(
        lambda: execute(
            scenario,
            record=getattr(args, "record", None),
            progress=not quiet,
            environ=environ,
            continuation=continuation,
            human_input=getattr(args, "human_input", None),
            bus=bus,
        )
    )
    from ._summary import print_summary

    print_summary(outcome.summary, outcome.run_dir)
    if outcome.summary.populations:
        from ._cmd_populations import print_populations

        print_populations(outcome.summary.populations)
    _send_trace(args, outcome.run_dir)
    if getattr(args, "report", False):
        from ._cmd_report import write

        print(f"report: {write(outcome.run_dir, None)}")
    return int(exit_code(outcome.summary))


def exit_code(result: RunSummary) -> ExitCode:
    """The exit code of a finished run: by its status, and 4 for a run that completed
    but whose verdict failed (it ended normally and still missed its purpose)."""
    if result.status == "completed" and result.verdict is not None and not result.verdict.passed:
        return ExitCode.VERDICT_FAILED
    return EXIT[result.status]


def _send_trace(args: argparse.Namespace, run_dir: Path) -> None:
    """``--otel`` (or a standard OTLP endpoint variable): the run's trace, from its log. A
    collector that is down costs a warning, never the run's result."""
    from sopbus.bus.otel import wanted

    if wanted(bool(getattr(args, "otel", False)), os.environ):
        from ._cmd_export_otel import send

        send(run_dir, None)
