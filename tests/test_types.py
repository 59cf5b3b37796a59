"""The type checker over the code and the tests (STYLE.md: type everything)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_mypy_finds_no_errors_in_bus_roles_sops_and_tests() -> None:
    done = subprocess.run([sys.executable, "-m", "mypy", "bus", "roles", "sops", "tests"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Success: no issues found" in done.stdout
