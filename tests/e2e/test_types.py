"""The type checker over the code and the tests (docs/design/style.md: type everything).

mypy reads folders, so it runs on the packages laid out as they install
(``sopbus/bus``, ``sopbus/roles``, ...; see ``installed_tree``), with the tests beside them.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sopbus._examples import write_team
from support.installed import ROOT, installed_tree


@pytest.mark.slow
def test_mypy_finds_no_errors_in_the_packages_and_tests(tmp_path: Path) -> None:
    tree = installed_tree(tmp_path)
    shutil.copytree(ROOT / "tests", tree / "tests", ignore=shutil.ignore_patterns("__pycache__"))
    # The module `sopbus new` writes is a user's first Python of sopbus: it must type-check.
    (module,) = [p for p in write_team(tree / "new-team") if p.suffix == ".py"]
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "sopbus", "tests", str(module)],
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Success: no issues found" in done.stdout
