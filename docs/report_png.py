"""Regenerates docs/report.png, the picture on the report's page (docs/report.md): the
software company's main job run on the simulator, its report opened in the headless
chromium the browser tests use (tests/support/chromium.py), the top of the page shot.

    python docs/report_png.py [--out docs/report.png]

Run it again whenever the report's look changes, and commit the PNG.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

WIDTH, HEIGHT, SCALE = 1280, 1560, 0.75  # a desktop window, shown at 960 pixels wide


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "report.png")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sopbus-report-png-") as tmp:
        page = _main_job_report(Path(tmp))
        args.out.write_bytes(_shot(page))
    print(args.out)
    return 0


def _main_job_report(runs_dir: Path) -> Path:
    """Runs the shipped main job as a user does and returns its report.html."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "sopbus",
            "run",
            str(ROOT / "scenarios" / "software_company.toml"),
            "--runs-dir",
            str(runs_dir),
            "--quiet",
            "--report",
        ],
        cwd=ROOT,
        check=True,
    )
    (run_dir,) = [p for p in runs_dir.iterdir() if p.is_dir()]
    return run_dir / "report.html"


def _shot(page: Path) -> bytes:
    from support.chromium import browser

    with browser() as chrome:
        loaded = chrome.load(page, width=WIDTH, height=HEIGHT)
        if loaded.errors or loaded.requests:
            raise SystemExit(f"the report did not load cleanly: {loaded.errors or loaded.requests}")
        return chrome.screenshot(scale=SCALE)


if __name__ == "__main__":
    raise SystemExit(main())
