"""``sopbus report RUN [-o FILE] [--open]``: the run as one offline HTML page.

Message flow, money over time, the calls timeline, the watch graph and the artifacts, in
one self-contained file (default ``runs/<id>/report.html``) that makes no request to any
host. ``--open`` shows it in the default browser.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ._args import path_arg
from ._flags import RUN_FLAGS, Flag, add
from ._runref import resolve_run

NAME = "report"
HELP = "write a run's report: one offline HTML page with flow, money, calls, graph, artifacts"


OUTPUT = Flag(
    "-o",
    "--output",
    metavar="FILE",
    type=path_arg,
    help="where to write the page (default: report.html in the run directory)",
)
OPEN = Flag("--open", action="store_true", help="open the page in the default browser")


def configure(parser: argparse.ArgumentParser) -> None:
    add(parser, *RUN_FLAGS, OUTPUT, OPEN)


def run(args: argparse.Namespace) -> int:
    run_dir = resolve_run(args.run, args.runs_dir)
    path = write(run_dir, args.output)
    print(path)
    if args.open:
        import webbrowser

        webbrowser.open(path.resolve().as_uri())
    return 0


def write(run_dir: Path, output: Path | None) -> Path:
    """Writes the report of ``run_dir``; an output path that cannot be written is the
    user's to fix (a :class:`~sopbus.bus.ConfigError`, exit 2)."""
    from sopbus.bus import ConfigError
    from sopbus.bus.report import write_report

    if output is not None and output.is_dir():
        raise ConfigError(
            f"-o {output} is a directory; give a file name, e.g. {output / 'report.html'}"
        )
    if output is not None and not output.parent.is_dir():
        raise ConfigError(
            f"cannot write -o {output}: directory {output.parent} does not exist; "
            f"create it first or choose another path"
        )
    try:
        return write_report(run_dir, output)
    except OSError as exc:
        raise ConfigError(
            f"cannot write the report to {exc.filename or output}: {exc.strerror}; "
            f"choose another path with -o FILE"
        ) from None
