"""Whether the local backend, run as root, can run the code as a fresh unprivileged uid.

``RLIMIT_NPROC`` does not bind uid 0, so under root the ``processes`` limit only holds for
code that runs as another uid: a fresh one per run (the bwrap backend's range), which owns
nothing on the host and shares its process count with no one. Without a mount namespace the
code reaches its directories and its program by their host paths, so each must be
searchable by a uid that is neither owner nor group: every directory above them needs the
``x`` bit for others. What is not, keeps the code at uid 0 and is the reason the run gives
for ``processes`` not being enforced.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path

from ._scratch import Scratch


def unreachable(path: Path) -> Path | None:
    """The first directory on the way to ``path`` that others cannot search, else None."""
    for parent in reversed(Path(os.path.abspath(path)).parents):
        try:
            mode = os.stat(parent).st_mode
        except OSError:
            return parent
        if not mode & stat.S_IXOTH:
            return parent
    return None


def program(argv: Sequence[str], env: Mapping[str, str]) -> Path | None:
    """The program ``argv`` runs, as the code's ``PATH`` finds it (None: not found)."""
    found = shutil.which(argv[0], path=env.get("PATH")) if argv else None
    return Path(found) if found else None


def blocker(scratch: Scratch, argv: Sequence[str], env: Mapping[str, str]) -> str | None:
    """Why the code cannot run as another uid here (a sentence), or None when it can."""
    found = program(argv, env)
    wanted = [scratch.work, scratch.tmp, scratch.home]
    if found is not None:  # a symlinked interpreter is reached by both paths
        wanted += [found, found.resolve()]
    for target in wanted:
        closed = unreachable(target)
        if closed is not None:
            return f"{closed} is not searchable by other users (chmod o+x), so {target} is not reachable"
    return None


def open_to_others(scratch: Scratch) -> None:
    """Let another uid reach the scratch directory's parts (mkdtemp makes it 0700); only
    search, so the code cannot list the directory nor reach its lock file's contents."""
    os.chmod(scratch.path, 0o711)
