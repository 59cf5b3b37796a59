"""A venv of the test's own Python, laid out in a temporary folder, with nothing in its bin
folder but ``python`` and the commands a test puts there: a user's venv used without
activating it (``venv/bin/python -m sopbus``, PATH not naming venv/bin)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path


def bare_venv(folder: Path, *commands: str) -> Path:
    """Makes the venv under ``folder`` with ``commands`` (paths) linked into its bin folder;
    returns its ``python``."""
    (folder / "bin").mkdir(parents=True)
    here = Path(sys.prefix)
    shutil.copy(here / "pyvenv.cfg", folder / "pyvenv.cfg")
    (folder / "lib").symlink_to(here / "lib")
    python = folder / "bin" / "python"
    python.symlink_to(Path(sys.executable).resolve())
    for command in commands:
        (folder / "bin" / Path(command).name).symlink_to(command)
    return python
