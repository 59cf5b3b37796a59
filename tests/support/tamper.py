"""Tampering with a run directory the way someone who can rewrite its files would: an edit
sealed again (every hash recomputed, as the chain without a key allows), a log cut at a
batch boundary, a run copied for a test to change."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sopbus.bus import read_jsonl
from sopbus.bus._chain import parse_seal
from sopbus.bus._util._jsonl import JsonlWriter

Records = list[dict[str, Any]]


def reseal(path: Path, change: Callable[[Records], Records]) -> None:
    """Rewrites the chained file ``path`` with ``change`` applied to its records, sealed
    anew: its own chain verifies afterwards."""
    records = change(list(read_jsonl(path, dict)))
    path.unlink()
    with JsonlWriter(path) as writer:
        for record in records:
            writer.write(record)


def cut_last_batch(path: Path) -> int:
    """Cuts the chained file ``path`` after its second-to-last seal (a batch boundary, so its
    own chain still verifies); returns the lines left."""
    lines = path.read_bytes().split(b"\n")[:-1]
    sealed = [i for i, line in enumerate(lines) if parse_seal(line) is not None]
    kept = lines[: sealed[-2] + 1]
    path.write_bytes(b"".join(line + b"\n" for line in kept))
    return len(kept)


def copy_run(run_dir: Path, where: Path) -> Path:
    """A copy of ``run_dir`` under ``where`` (same directory name) that a test may change."""
    copy = where / run_dir.name
    shutil.copytree(run_dir, copy, symlinks=True)
    return copy
