"""Size limits on what a sandboxed run writes: the scratch directory (``scratch_mb``) and,
on the ``local`` backend, its ``/tmp`` and home (``tmp_mb``; under ``bwrap`` those are
tmpfs mounts of that size).

A per-file rlimit does not bound a run that writes many files, so a :class:`Watch` measures
the directories while the run lasts and stops it once one passes its limit. Sizes count
``st_size`` (a sparse file counts in full, as copying it out would). Between two looks a
fast writer can pass the limit by what it writes in :data:`INTERVAL_S`; copy-out then keeps
at most the limit (see :func:`sopbus.bus.sandbox._files.copy_tree`).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import NamedTuple

import trio

INTERVAL_S = 0.05


class Quota(NamedTuple):
    """A directory, the bytes its files may total, and the setting that says so."""

    path: Path
    limit: int
    setting: str


def tree_size(path: Path) -> int:
    """The bytes of the regular files under ``path`` (links not followed; a file that
    vanishes while it is counted counts 0)."""
    total = 0
    try:
        entries = list(os.scandir(path))
    except OSError:
        return 0
    for entry in entries:
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode):
            total += tree_size(Path(entry.path))
        elif stat.S_ISREG(st.st_mode):
            total += st.st_size
    return total


def mb(limit: int) -> str:
    return f"{limit / (1 << 20):g} MB"


class Watch:
    """Returns from :meth:`__call__` when a quota is passed (``passed`` says which)."""

    def __init__(self, quotas: list[Quota]):
        self.quotas = quotas
        self.passed: Quota | None = None

    async def __call__(self) -> None:
        while True:
            for quota in self.quotas:
                if await trio.to_thread.run_sync(tree_size, quota.path) > quota.limit:
                    self.passed = quota
                    return
            await trio.sleep(INTERVAL_S)

    def note(self) -> str | None:
        """The sentence for the run's stderr and notes when the run was stopped."""
        q = self.passed
        if q is None:
            return None
        return (
            f"sandbox: stopped: the files written passed the limit of {mb(q.limit)} "
            f"({q.setting}); write less, or raise {q.setting} in the scenario"
        )
