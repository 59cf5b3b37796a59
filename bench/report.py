"""How big and how fast `sopbus report` is for a big run (target: 10,000 messages give a
page under 10 MB that opens in under 2 s).

Writes a synthetic run directory through the run store's real writers (tests/support/synthetic_run.py:
chained events, a ledger that sums, artifacts, a summary), builds its report, and loads it
in headless chromium over the DevTools protocol (tests/support/chromium.py). The baseline, loaded
by the same browser in the same run, is the report of a 50-message run, so the figures
say what the size of the run costs on this machine.

    python bench/report.py --messages 10000 [--roles 8] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

TARGET_MB, TARGET_S = 10.0, 2.0


def measure(messages: int, roles: int, workdir: Path, chrome: Any) -> dict[str, Any]:
    from sopbus.bus.report import write_report
    from support.synthetic_run import write_run

    start = time.perf_counter()
    run_dir = write_run(
        workdir / str(messages), messages=messages, roles=roles, per_round=50, content_chars=600
    )
    written = time.perf_counter()
    page = write_report(run_dir)
    built = time.perf_counter()
    loads = [chrome.load(page) for _ in range(3)]
    best = min(loads, key=lambda x: x.load_s)
    return {
        "messages": messages,
        "run_write_s": round(written - start, 2),
        "report_build_s": round(built - written, 2),
        "report_mb": round(page.stat().st_size / 1e6, 2),
        "load_s": round(best.load_s, 3),
        "load_event_ms": round(best.timing["load_ms"], 1),
        # None when chromium recorded no paint entry before the load event.
        "first_contentful_paint_ms": best.timing.get("first_contentful_paint_ms"),
        "requests": len(best.requests),
        "errors": len(best.errors),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--roles", type=int, default=8)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    from support.chromium import SKIP_REASON, browser, chromium

    if chromium() is None:
        print(f"bench/report.py needs chromium: {SKIP_REASON}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="sopbus-bench-report-") as tmp, browser() as chrome:
        base = measure(50, args.roles, Path(tmp), chrome)
        big = measure(args.messages, args.roles, Path(tmp), chrome)
    big["load_vs_baseline"] = round(big["load_s"] / base["load_s"], 2)
    result = {
        "baseline": base,
        "big": big,
        "targets": {"report_mb": TARGET_MB, "load_s": TARGET_S},
        "within_targets": big["report_mb"] < TARGET_MB and big["load_s"] < TARGET_S,
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    for name, row in (("baseline (50 messages)", base), (f"big ({args.messages:,} messages)", big)):
        print(
            f"{name}: report {row['report_mb']} MB built in {row['report_build_s']} s; opens in "
            f"{row['load_s']} s (load event {row['load_event_ms']} ms, first paint "
            f"{row['first_contentful_paint_ms']} ms); {row['requests']} requests, {row['errors']} errors"
        )
    print(
        f"big/baseline load time: {big['load_vs_baseline']}x; targets: < {TARGET_MB} MB, < {TARGET_S} s: "
        f"{'met' if result['within_targets'] else 'NOT met'}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
