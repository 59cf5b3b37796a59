"""``sopbus eval-show EVAL [--json] [--report]``: an eval's figures per scenario.

``--json`` prints ``eval.json``'s figures; ``--report`` writes ``report.html`` in the eval
directory: the comparison charts (pass@1 with its interval against dollars per task, the
failures by kind) and every task's run, linked to its own report.
"""

from __future__ import annotations

import argparse

from ._flags import EVAL, EVALS_DIR, JSON, REPORT, add

NAME = "eval-show"
HELP = "show an eval's figures per scenario (--report: an HTML page with its charts)"


def configure(parser: argparse.ArgumentParser) -> None:
    report = REPORT.but(help="write the eval's HTML report (report.html in its directory)")
    add(parser, EVAL, EVALS_DIR, JSON, report)


def run(args: argparse.Namespace) -> int:
    import json

    from sopbus.eval import eval_rows, resolve_eval

    from ._cmd_eval import print_eval

    edir = resolve_eval(args.eval, args.evals_dir)
    record = edir.read()
    rows = eval_rows(record, edir.results())
    if args.json:
        print(json.dumps({"eval_id": record.eval_id, "simulated": record.simulated,
                          "scenarios": rows}, indent=2, default=str))  # fmt: skip
        return 0
    print_eval(record, rows)
    if args.report:
        from sopbus.eval import write_eval_page

        print(f"report: {write_eval_page(edir, record, rows)}")
    return 0
