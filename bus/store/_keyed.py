"""A keyed seal over a run's record: tamper-evidence against someone who can rewrite files.

The hash chain has no key, so whoever can write the run directory can edit a line and
recompute every hash after it. With a key (``SOPBUS_SEAL_KEY``, or ``--seal-key-file`` on
the commands that run a scenario), each execution that ends writes ``keyed_seal.json``:
the SHA-256 of every file of the record (the event logs, ledger, answers, summary,
scenario and artifacts) and an HMAC-SHA256 over them with the key. The key is never
written to the run; only a key id (an HMAC of a fixed text, which does not reveal the key)
tells which key sealed it. ``sopbus verify --key-file FILE`` (or the same variable)
recomputes both: a file changed, added or removed after the seal, or a seal made without
the key, is reported.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import msgspec

from .._errors import ConfigError
from .._util import ARTIFACTS, CALLS, COSTS, SCENARIO, SUMMARY
from ._crosscheck import event_logs

KEYED_SEAL = "keyed_seal.json"
SEAL_KEY_ENV = "SOPBUS_SEAL_KEY"
Report = Callable[[str], None]


def seal_key(environ: Mapping[str, str]) -> bytes | None:
    """The seal key in ``environ`` (``SOPBUS_SEAL_KEY``), or ``None``."""
    value = environ.get(SEAL_KEY_ENV, "")
    return value.encode() if value else None


def read_key_file(path: Path, flag: str) -> bytes:
    """The key in the file ``path`` (a trailing newline is not part of it); a
    :class:`ConfigError` naming the file and ``flag`` when it cannot be used."""
    try:
        key = path.read_bytes().rstrip(b"\r\n")
    except OSError as error:
        raise ConfigError(
            f"{flag} {path}: cannot read the key file ({error.strerror}); give a file that "
            f"holds the key"
        ) from None
    try:
        key.decode()
    except UnicodeDecodeError:
        raise ConfigError(
            f"{flag} {path}: the key is not text; write it as hex or another printable text"
        ) from None
    if len(key) < 16:
        raise ConfigError(
            f"{flag} {path}: the key is {len(key)} bytes; a seal key needs at least 16 "
            f"(for example `python -c 'import secrets; print(secrets.token_hex(32))' > {path}`)"
        )
    return key


def key_id(key: bytes) -> str:
    """Which key sealed a run, without revealing it."""
    return hmac.new(key, b"sopbus seal key id", hashlib.sha256).hexdigest()[:12]


def _record_files(run_dir: Path) -> dict[str, str]:
    """``relative path -> SHA-256`` (``symlink`` for a link) of the run's record."""
    paths = [*event_logs(run_dir), *(run_dir / n for n in (COSTS, CALLS, SUMMARY, SCENARIO))]
    artifacts = run_dir / ARTIFACTS
    if artifacts.is_dir():
        paths += [p for p in artifacts.rglob("*") if p.is_symlink() or p.is_file()]
    files = {}
    for path in sorted(set(paths)):
        if path.is_symlink():
            files[path.relative_to(run_dir).as_posix()] = "symlink"
        elif path.is_file():
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            files[path.relative_to(run_dir).as_posix()] = digest
    return files


def _mac(key: bytes, body: dict[str, Any]) -> str:
    return hmac.new(key, msgspec.json.encode(body, order="sorted"), hashlib.sha256).hexdigest()


def write_keyed_seal(run_dir: Path, key: bytes) -> None:
    """Seals the run's record as it is now with ``key`` (module docstring)."""
    body = {"run_id": run_dir.name, "key_id": key_id(key), "files": _record_files(run_dir)}
    data = msgspec.json.format(msgspec.json.encode({**body, "mac": _mac(key, body)}), indent=2)
    tmp = run_dir / (KEYED_SEAL + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, run_dir / KEYED_SEAL)


def check_keyed_seal(run_dir: Path, key: bytes | None, report: Report, note: Report) -> None:
    """The run's keyed seal with ``key``; without a key, a note on what cannot be checked."""
    path = run_dir / KEYED_SEAL
    stored = _read(path, report) if path.is_file() else None
    if key is None:
        if path.is_file():
            note(
                f"{path}: the run is keyed (key id {stored.get('key_id') if stored else '?'}); "
                f"without its key (--key-file FILE or {SEAL_KEY_ENV}) verify cannot rule out "
                f"a rewrite that recomputed every hash, so the keyed seal is not checked"
            )
        return
    if not path.is_file():
        report(
            f"{path}: missing: no keyed seal, so nothing proves the run was not rewritten "
            f"(it was run without the key, or the seal was removed)"
        )
        return
    if stored is None:
        return
    body = {k: v for k, v in stored.items() if k != "mac"}
    if stored.get("key_id") != key_id(key):
        report(f"{path}: sealed with another key (id {stored.get('key_id')}, yours {key_id(key)})")
        return
    if not hmac.compare_digest(str(stored.get("mac", "")), _mac(key, body)):
        report(f"{path}: its MAC does not match: the seal was edited or made without the key")
        return
    _compare(run_dir, body.get("files") or {}, report, note)


def _read(path: Path, report: Report) -> dict[str, Any] | None:
    try:
        data = msgspec.json.decode(path.read_bytes())
    except msgspec.DecodeError as error:
        report(f"{path}: not JSON ({error})")
        return None
    if not isinstance(data, dict):
        report(f"{path}: not a JSON object")
        return None
    return data


def _compare(run_dir: Path, sealed: dict[str, str], report: Report, note: Report) -> None:
    now = _record_files(run_dir)
    changed = [
        f"{run_dir / rel}: "
        + ("missing" if rel not in now else "added" if rel not in sealed else "changed")
        + " since the keyed seal"
        for rel in sorted(sealed.keys() | now.keys())
        if sealed.get(rel) != now.get(rel)
    ]
    if changed and not (run_dir / SUMMARY).is_file():
        note(
            f"{run_dir / KEYED_SEAL}: the run has not finished: what its last execution "
            f"wrote after the keyed seal is not keyed ({len(changed)} file(s))"
        )
        return
    for problem in changed:
        report(problem)
