"""``sopbus export-otel RUN [--endpoint URL]``: send a finished run's trace to an
OpenTelemetry collector (Jaeger, Langfuse, Phoenix, ...) over OTLP/HTTP.

The spans are built from the run's log (see :mod:`sopbus.bus.otel`); the endpoint is ``--endpoint``
or the standard ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_ENDPOINT``.
Exit 0 when the collector took every span, 1 when it did not, 2 without the ``otel`` extra.
"""

from __future__ import annotations

import argparse
import sys

from ._flags import RUN_FLAGS, Flag, add
from ._runref import resolve_run

NAME = "export-otel"
HELP = "send a run's trace (run, rounds, turns, LLM calls) to an OpenTelemetry collector"


ENDPOINT = Flag(
    "--endpoint",
    metavar="URL",
    help="OTLP/HTTP endpoint, e.g. http://127.0.0.1:4318 (default: the "
    "OTEL_EXPORTER_OTLP_* variables, else http://localhost:4318)",
)


def configure(parser: argparse.ArgumentParser) -> None:
    add(parser, *RUN_FLAGS, ENDPOINT)


def run(args: argparse.Namespace) -> int:
    run_dir = resolve_run(args.run, args.runs_dir)
    return send(run_dir, args.endpoint)


def send(run_dir: object, endpoint: str | None) -> int:
    """Sends the trace of ``run_dir``; prints what happened; returns the exit code."""
    from pathlib import Path

    from sopbus.bus.otel import export_trace, run_trace

    root = run_trace(Path(str(run_dir)))
    try:
        sent, where = export_trace(root, run_id=root.attributes["sopbus.run_id"], endpoint=endpoint)
    except RuntimeError as exc:
        print(f"sopbus: warning: trace not exported: {exc}", file=sys.stderr)
        return 1
    from ._fit import wrapped
    from ._runref import line_width

    run_id = root.attributes["sopbus.run_id"]
    print(wrapped(f"trace of {run_id}: {sent} spans sent to {where}", line_width()))
    return 0
