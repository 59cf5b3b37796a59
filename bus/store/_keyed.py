"""A keyed seal over a run's record: tamper-evidence against someone who can rewrite files.

The hash chain has no key, so whoever can write the run directory can edit a line and
recompute every hash after it. With a key (``SOPBUS_SEAL_KEY``, or ``--seal-key-file`` on
the commands that run a scenario), each execution that ends writes ``keyed_seal.json``:
the SHA-256 of every file of the record (the event logs, ledger, answers, summary,
scenario and artifacts) and an HMAC-SHA256 over them with the key. The key is never
written to the run; only a key id (an HMAC of a fixed text, which does not reveal the key)
tells which key sealed it. ``sopbus verify --key-file FILE`` (or the same variable)
recomputes both: a file changed, added or removed after the seal, a seal made without
the key, or a seal of another run (its ``run_id``) is reported.

Only ``sopbus resume`` changes a sealed run: it keeps the sealed log as
``events.<n>.jsonl``, appends to the ledger and the answers, and its execution is keyed
when it ends. Until then verify checks that the sealed log and the sealed start of those
two files are still there (the seal records their lengths) and notes that the rest is
not keyed. A run whose log says it was not resumed since the seal (fewer executions than
the seal covers) has nothing unkeyed: every difference is reported, a ``summary.json``
deleted as much as a line edited.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import msgspec

from .._errors import ConfigError
from .._util import ARTIFACTS, CALLS, COSTS, EVENTS, SCENARIO, SUMMARY
from ._crosscheck import event_logs, records

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
    body = {
        "run_id": run_dir.name,
        "key_id": key_id(key),
        "files": _record_files(run_dir),
        # A resume appends to these: their sealed start is checked after it.
        "lengths": {
            n: (run_dir / n).stat().st_size for n in (COSTS, CALLS) if (run_dir / n).is_file()
        },
    }
    data = msgspec.json.format(msgspec.json.encode({**body, "mac": _mac(key, body)}), indent=2)
    tmp = run_dir / (KEYED_SEAL + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, run_dir / KEYED_SEAL)


# What an unkeyed record cannot prove, said on each verify of one: anyone who can write the
# run directory can recompute the chains, and a finished run rewritten as a killed one
# (run_ended and summary.json dropped) has nothing left that says it had ended.
_UNKEYED = (
    "{run_dir}: not sealed with a key, so this checks consistency, not authenticity: a "
    "rewrite that recomputed every hash goes unseen, such as a run made to look killed "
    "(its run_ended and summary.json dropped, a message changed); authenticity needs a run "
    "made with --seal-key-file FILE (or {env}), verified with --key-file FILE"
)


def check_keyed_seal(run_dir: Path, key: bytes | None, report: Report, note: Report) -> None:
    """The run's keyed seal with ``key``; without a key, a note on what cannot be checked
    (without the MAC the seal proves nothing: the rest of verify finds a file removed)."""
    path = run_dir / KEYED_SEAL
    stored = _read(path, report) if path.is_file() else None
    if key is None:
        if path.is_file():
            note(
                f"{path}: the run is keyed (key id {stored.get('key_id') if stored else '?'}); "
                f"without its key (--key-file FILE or {SEAL_KEY_ENV}) verify cannot rule out "
                f"a rewrite that recomputed every hash, so the keyed seal is not checked"
            )
        else:
            note(_UNKEYED.format(run_dir=run_dir, env=SEAL_KEY_ENV))
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
    _compare(run_dir, body, report, note)


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


def _compare(run_dir: Path, body: dict[str, Any], report: Report, note: Report) -> None:
    """The run now against the seal. Only a resume changes a sealed run: it keeps the sealed
    log under its next name and appends to the ledger and the answers, and what its
    execution writes is keyed only when it ends (module docstring)."""
    if body.get("run_id") != run_dir.name:
        report(
            f"{run_dir / KEYED_SEAL}: seals run {body.get('run_id')}, not {run_dir.name} (the "
            f"directory): the record was copied from another run"
        )
    sealed = body.get("files") or {}
    if not isinstance(sealed, dict):
        report(f"{run_dir / KEYED_SEAL}: its files are not a table of paths and hashes")
        return
    now = _record_files(run_dir)
    changed = [
        f"{run_dir / rel}: "
        + ("missing" if rel not in now else "added" if rel not in sealed else "changed")
        + " since the keyed seal"
        for rel in sorted(sealed.keys() | now.keys())
        if sealed.get(rel) != now.get(rel)
    ]
    finished, executions = _latest(run_dir)
    sealed_logs = sum(1 for rel in sealed if _is_log(rel))
    if executions > sealed_logs and not finished:
        _check_kept(run_dir, body, sealed_logs, report)
        if changed:
            note(
                f"{run_dir / KEYED_SEAL}: the run was resumed after the keyed seal: what "
                f"its later execution(s) wrote is not keyed ({len(changed)} file(s))"
            )
        return
    for problem in changed:
        report(problem)


def _is_log(rel: str) -> bool:
    return rel == EVENTS or re.fullmatch(r"events\.\d+\.jsonl", rel) is not None


def _latest(run_dir: Path) -> tuple[bool, int]:
    """Whether the latest log holds ``run_ended``, and how many executions the run has had
    by its ``resumed`` event."""
    try:
        events = [e for _, e in records(run_dir / EVENTS)]
    except (msgspec.DecodeError, OSError):
        return False, 1  # a damaged log: verify's chain check reports it
    finished = any(e.get("kind") == "run_ended" for e in events)
    resumed = next((e.get("data") or {} for e in events if e.get("kind") == "resumed"), {})
    return finished, int(resumed.get("resume", 0)) + 1


def _check_kept(run_dir: Path, body: dict[str, Any], sealed_logs: int, report: Report) -> None:
    """What a resume keeps of the sealed run: the sealed logs, the one then current under its
    rotated name, and the sealed start of the ledger and the answers (their lengths are in
    seals made since sopbus recorded them)."""
    sealed, lengths = body.get("files") or {}, body.get("lengths") or {}
    for rel, digest in sorted(sealed.items()):
        if not _is_log(rel) and rel not in lengths:
            continue
        name = f"events.{sealed_logs}.jsonl" if rel == EVENTS else rel
        path = run_dir / name
        size = lengths.get(rel) if not _is_log(rel) else None
        have = _digest(path, size)
        if have != digest:
            was = f" (the sealed {EVENTS})" if rel == EVENTS else ""
            what = "missing" if have is None else "changed"
            part = f"its first {size} bytes " if size is not None else ""
            report(f"{path}{was}: {part}{what} since the keyed seal, which a resume keeps")


def _digest(path: Path, size: int | None) -> str | None:
    if path.is_symlink() or not path.is_file():
        return None
    data = path.read_bytes()
    if size is not None:
        if len(data) < size:
            return None
        data = data[:size]
    return hashlib.sha256(data).hexdigest()
