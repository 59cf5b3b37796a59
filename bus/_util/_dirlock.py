"""Advisory locks on directories: "a process is working in here", which the kernel drops
when that process dies (a run directory while it executes, a sweep directory while it runs).
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path


def try_lock(directory: Path) -> int | None:
    """The descriptor that holds an exclusive lock on ``directory`` (closing it releases the
    lock), or ``None`` when another process holds it."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd
