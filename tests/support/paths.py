"""Where things are: the repository's root, the tests' data files, the shipped scenarios."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""The repository's root (the checkout the tests run from)."""
DATA = ROOT / "tests" / "data"
"""The tests' own data files: bad scenarios, small scenarios, the resume team."""
SCENARIOS = ROOT / "scenarios"
"""The shipped scenarios and their fixtures."""
