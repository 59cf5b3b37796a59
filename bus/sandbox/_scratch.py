"""Scratch directories: one per sandboxed run, under the run's directory, always removed.

Each scratch directory holds ``work/`` (the code's working directory), ``tmp/``, ``home/``
and a ``lock`` file that its owner holds an ``flock`` on while the run lasts. The kernel drops
the lock when the owner dies, even by ``kill -9``; :func:`sweep_stale` (called when a run
starts) removes every directory under a root whose lock nobody holds, so a killed sopbus
leaves nothing behind after its next start.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import stat
import sys
import tempfile
import time
from pathlib import Path

from loguru import logger

LOCK = "lock"
_UNLOCKED_GRACE_S = 60.0  # a directory this young may be between mkdtemp and its lock


class Scratch:
    """A scratch directory, locked by this process until :meth:`remove`."""

    def __init__(self, root: Path):
        root.mkdir(parents=True, exist_ok=True)
        # Absolute: bwrap binds the work directory by its path, and a run under a relative
        # --runs-dir (`runs`) would name a path bwrap cannot find, so no test could run.
        self.path = Path(tempfile.mkdtemp(prefix=f"{os.getpid()}-", dir=root.absolute()))
        self._lock = os.open(self.path / LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        # Blocking: another run's sweep_stale may hold the fresh lock for a moment while it
        # looks; it leaves alone a directory without work/, which is made only once locked.
        fcntl.flock(self._lock, fcntl.LOCK_EX)
        self.work, self.tmp, self.home = (self.path / n for n in ("work", "tmp", "home"))
        for d in (self.work, self.tmp, self.home):
            d.mkdir()

    def hand_to(self, uid: int, gid: int) -> None:
        """Give the code's directories (and what was prepared in them) to ``uid``."""
        for top in (self.work, self.tmp, self.home):
            os.chown(top, uid, gid)
            for base, dirs, files in os.walk(top):
                for name in dirs + files:
                    os.chown(os.path.join(base, name), uid, gid, follow_symlinks=False)

    def remove(self) -> None:
        _rmtree(self.path)
        os.close(self._lock)


def sweep_stale(root: Path) -> int:
    """Remove the scratch directories under ``root`` whose owner is gone; how many."""
    try:
        entries = list(os.scandir(root))
    except (FileNotFoundError, NotADirectoryError):
        return 0
    removed = 0
    for entry in entries:
        if entry.is_dir(follow_symlinks=False) and _is_stale(Path(entry.path)):
            _rmtree(Path(entry.path))
            removed += 1
    if removed:
        logger.info(
            "sandbox: removed {} scratch director{} left by a killed run in {}",
            removed,
            "y" if removed == 1 else "ies",
            root,
        )
    return removed


def _is_stale(path: Path) -> bool:
    try:
        fd = os.open(path / LOCK, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        try:
            return time.time() - os.lstat(path).st_mtime > _UNLOCKED_GRACE_S
        except FileNotFoundError:
            return False  # swept by another run between the listing and now
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return False  # its owner is alive
    try:
        if (path / "work").is_dir():
            return True  # its owner locked it before making work/, and is gone
        # Between its lock file and its lock: a run starting now (or one killed then).
        return time.time() - os.lstat(path).st_mtime > _UNLOCKED_GRACE_S
    finally:
        os.close(fd)


def _rmtree(path: Path) -> None:
    def unlock_and_retry(func: object, failed: str, exc: BaseException) -> None:
        # Code may leave directories without write or search permission; open them up
        # (never through a link: lstat first) and try once more.
        parent = os.path.dirname(failed)
        if not os.path.islink(parent):
            os.chmod(parent, stat.S_IRWXU)
        if os.path.isdir(failed) and not os.path.islink(failed):
            os.chmod(failed, stat.S_IRWXU)
            shutil.rmtree(failed, ignore_errors=True)
        else:
            try:
                os.unlink(failed)
            except FileNotFoundError:
                pass

    try:
        if sys.version_info >= (3, 12):
            shutil.rmtree(path, onexc=unlock_and_retry)
        else:
            shutil.rmtree(path, onerror=lambda f, p, e: unlock_and_retry(f, p, e[1]))
    except OSError as exc:
        logger.warning("sandbox: could not remove scratch directory {}: {}", path, exc)
