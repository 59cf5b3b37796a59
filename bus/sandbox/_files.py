"""Files into and out of a sandbox, never through a symbolic link.

A run's files are copied into its scratch directory and back out with these functions only.
Each one opens files with ``O_NOFOLLOW`` and creates directories one component at a time, so
a link planted by earlier code (``main.py -> /etc/passwd``, ``out -> /``) is never written or
read through. Links are kept only when they point inside the copied tree (``lib -> src``);
absolute links and links that climb out are dropped with a warning. Regular files with more
than one hard link are dropped when collecting: code can hard-link a host file into its
directory (outside a namespace), and copying that out would publish the host file.
"""

from __future__ import annotations

import os
import posixpath
import stat
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from loguru import logger

_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
_WRITE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_CHUNK = 1 << 20


def relative_path(name: str) -> PurePosixPath:
    """``name`` as a path inside the sandbox; ValueError when it is absolute or climbs out."""
    path = PurePosixPath(name)
    if not path.parts or path.is_absolute() or ".." in path.parts:
        raise ValueError(
            f"file name {name!r} must be a relative path inside the sandbox "
            f"(not absolute, no '..'), e.g. 'src/main.py'"
        )
    return path


def real_dirs(root: Path, rel: PurePosixPath) -> Path:
    """``root/rel`` with every component a real directory (a link in the way is replaced)."""
    here = root
    for part in rel.parts:
        here = here / part
        try:
            mode = os.lstat(here).st_mode
        except FileNotFoundError:
            os.mkdir(here, 0o755)
            continue
        if not stat.S_ISDIR(mode):
            os.unlink(here)
            os.mkdir(here, 0o755)
    return here


def write_file(root: Path, rel: PurePosixPath, content: str | bytes) -> None:
    """Write ``content`` at ``root/rel``, replacing whatever is there without following it."""
    parent = real_dirs(root, PurePosixPath(*rel.parts[:-1]))
    target = parent / rel.parts[-1]
    _remove(target)
    data = content.encode("utf-8") if isinstance(content, str) else content
    fd = os.open(target, _WRITE, 0o644)
    with os.fdopen(fd, "wb") as out:
        out.write(data)


def write_files(root: Path, files: Mapping[PurePosixPath, str | bytes]) -> None:
    for rel, content in files.items():
        write_file(root, rel, content)


def copy_tree(
    src: Path, dst: Path, *, collecting: bool, budget: int | None = None
) -> list[PurePosixPath]:
    """Copy the tree at ``src`` into ``dst`` (created as needed) without following links.

    ``collecting`` marks files coming out of a sandbox: multiply-linked files are dropped.
    ``budget`` caps the bytes copied: files are taken in name order, and a file that does
    not fit in what is left is not copied; the files left out are returned.
    """
    dst.parent.mkdir(parents=True, exist_ok=True)  # the caller's own path, trusted
    real_dirs(dst.parent, PurePosixPath(dst.name))
    left = _Budget(budget)
    _copy_dir(src, dst, PurePosixPath(), collecting, left)
    return left.dropped


class _Budget:
    def __init__(self, total: int | None):
        self.left = total
        self.dropped: list[PurePosixPath] = []

    def take(self, size: int, rel: PurePosixPath) -> bool:
        if self.left is None:
            return True
        if size > self.left:
            self.dropped.append(rel)
            return False
        self.left -= size
        return True


def _copy_dir(src: Path, dst: Path, rel: PurePosixPath, collecting: bool, budget: _Budget) -> None:
    with os.scandir(src) as listing:
        entries = sorted(listing, key=lambda e: e.name)  # the same files kept, run after run
    for entry in entries:
        inner = rel / entry.name
        st = entry.stat(follow_symlinks=False)
        if stat.S_ISDIR(st.st_mode):
            inside = real_dirs(dst, PurePosixPath(entry.name))
            _copy_dir(Path(entry.path), inside, inner, collecting, budget)
        elif stat.S_ISLNK(st.st_mode):
            _copy_link(Path(entry.path), dst / entry.name, inner)
        elif stat.S_ISREG(st.st_mode):
            if collecting and st.st_nlink > 1:
                logger.warning("sandbox: dropped {} (a hard link; it may be a host file)", inner)
                continue
            if budget.take(st.st_size, inner):
                _copy_file(Path(entry.path), dst / entry.name, st.st_size)
        # sockets, fifos and devices are not files anyone wants back; skipped


def _copy_link(src: Path, dst: Path, rel: PurePosixPath) -> None:
    target = os.readlink(src)
    inside = posixpath.normpath(posixpath.join(str(rel.parent), target))
    if posixpath.isabs(target) or inside == ".." or inside.startswith("../"):
        logger.warning("sandbox: dropped the link {} -> {} (it points outside)", rel, target)
        return
    _remove(dst)
    os.symlink(target, dst)


def _copy_file(src: Path, dst: Path, size: int) -> None:
    """Copy at most ``size`` bytes (the size counted against the budget: a file still growing
    is cut there)."""
    _remove(dst)
    try:
        fd_in = os.open(src, _READ)
    except OSError as exc:  # the code may have left unreadable files; keep the rest
        logger.warning("sandbox: could not copy {}: {}", src.name, exc.strerror)
        return
    with os.fdopen(fd_in, "rb") as fin, os.fdopen(os.open(dst, _WRITE, 0o644), "wb") as fout:
        left = size
        while left > 0 and (chunk := fin.read(min(_CHUNK, left))):
            fout.write(chunk)
            left -= len(chunk)


def _remove(path: Path) -> None:
    """Remove a file or link at ``path`` (never what a link points to); a directory stays."""
    try:
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            os.unlink(path)
    except FileNotFoundError:
        pass
