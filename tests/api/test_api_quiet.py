"""The Python API is quiet on stderr by default (loguru's INFO line per call, coloured in a
notebook, was noise in a user's program); ``verbose=True`` brings the lines back, and every
line still reaches the run's ``run.log``."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = """
import sopbus
from loguru import logger
done = sopbus.run_scenario("software_company", runs_dir="runs", verbose={verbose})
logger.info("the program's own line")
print(done.run_dir)
"""


def run(tmp_path: Path, verbose: bool) -> tuple[str, Path]:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(SCRIPT.format(verbose=verbose))],
        cwd=tmp_path,
        env={**os.environ, "NO_COLOR": ""},
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    return done.stderr, tmp_path / done.stdout.strip().splitlines()[-1]


def test_the_api_prints_no_info_lines_by_default(tmp_path: Path) -> None:
    stderr, run_dir = run(tmp_path, verbose=False)
    info = [line for line in stderr.splitlines() if "INFO" in line]
    assert info == [info[-1]] and info[-1].endswith("the program's own line")  # untouched
    assert "\x1b[" not in stderr  # not a terminal: no colours
    log = (run_dir / "run.log").read_text()
    assert sum("| INFO" in line for line in log.splitlines()) > 3


def test_verbose_prints_the_run_lines(tmp_path: Path) -> None:
    stderr, _ = run(tmp_path, verbose=True)
    assert sum("INFO" in line for line in stderr.splitlines()) > 3
