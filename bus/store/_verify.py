"""Verifying a run directory, and the receipts a gate issues.

:func:`verify_run` checks what a run left behind against itself:

- the chains of ``events.jsonl`` (and a resumed run's earlier ``events.<n>.jsonl``),
  ``costs.jsonl``, ``calls.jsonl`` and ``artifacts/receipts.jsonl`` (each line carries the
  hash of the one before; :mod:`sopbus.bus._chain`), naming the first edited, dropped, reordered or
  unchained line; a torn last line is reported as torn, not as tampering;
- the ledger against the event logs, the recorded answers and ``summary.json``, each call
  paired by its ledger ``seq`` (:mod:`sopbus.bus.store._crosscheck`; this also catches lines cut
  from the end of ``costs.jsonl``, which no chain can see, and edited summary totals);
- the executions of a resumed run: each earlier log is there, whole, under its own name
  (:mod:`sopbus.bus.store._chained`), and ``summary.json``'s verdict is the one
  ``run_ended`` seals;
- the record is this directory's and whole (:mod:`sopbus.bus.store._asrun`): each event
  log's ``run_started`` names this run, ``scenario.toml`` is the one the run wrote, and a
  finished run (its log holds ``run_ended``) still has its ``summary.json`` and
  ``scenario.toml``;
- a finished run (one with ``summary.json``, or whose log holds ``run_ended``) must end
  with its ``run_ended`` event;
- every artifact must still have the SHA-256 its last ``artifact_written`` event recorded,
  be a file (not a symbolic link), and ``artifacts/`` must hold nothing the run did not
  record writing;
- every receipt must name files whose hashes still match, and each ``receipt_issued``
  event must name a receipt of the file, in order.

A receipt (:class:`Receipt`) is a gate's signature on its inputs: the paths and SHA-256 of
the files it passed (a draft, the evidence manifest, the gate's report), appended to
``artifacts/receipts.jsonl``, whose chain links each receipt to the one before. A later
stage takes a receipt's hash as its input and :func:`require_receipt` refuses it unless the
whole receipt chain verifies and the files are unchanged.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from .._chain import ChainReport, split_line, unseal, verify_file
from .._errors import SopbusError
from .._util import ARTIFACTS, CALLS, COSTS, EVENTS, RECEIPTS, SUMMARY, JsonlWriter
from ._asrun import check_record
from ._chained import check_executions
from ._crosscheck import Logs, check_ledger, check_summary, event_logs

RECEIPT_EVENT = "receipt_issued"


class ReceiptError(SopbusError):
    """A receipt is missing, its chain does not verify, or a file it names has changed."""


class Subject(msgspec.Struct, frozen=True):
    """One file a receipt vouches for: its path under ``artifacts/`` and its SHA-256."""

    path: str
    sha256: str


class Receipt(msgspec.Struct, frozen=True, kw_only=True):
    """A passed gate's receipt (one line of ``receipts.jsonl``; the chain fields are added
    by the writer). ``subjects`` maps a name (``draft``, ``manifest``, ``report``) to the
    file vouched for."""

    seq: int
    sample: str
    gate: str
    round: int
    subjects: dict[str, Subject]


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def issue_receipt(
    artifacts_dir: Path, *, sample: str, gate: str, round: int, subjects: dict[str, str]
) -> tuple[Receipt, str]:
    """Appends a receipt for the files ``subjects`` names (paths under ``artifacts_dir``),
    hashed now, and returns it with its hash (what the next stage is handed)."""
    path = artifacts_dir / RECEIPTS
    seq = sum(1 for _ in _receipt_lines(path)) + 1 if path.is_file() else 1
    receipt = Receipt(
        seq=seq,
        sample=sample,
        gate=gate,
        round=round,
        subjects={
            name: Subject(rel, sha256_file(artifacts_dir / rel))
            for name, rel in sorted(subjects.items())
        },
    )
    with JsonlWriter(path) as writer:
        writer.write(receipt)
        return receipt, writer.head.decode()


def require_receipt(artifacts_dir: Path, receipt_hash: str) -> Receipt:
    """The receipt whose hash is ``receipt_hash``, once the receipt chain verifies and every
    file it names is unchanged; else :class:`ReceiptError` saying what is wrong."""
    path = artifacts_dir / RECEIPTS
    if not path.is_file():
        raise ReceiptError(
            f"no receipts at {path}: nothing passed the gate, so there is nothing to accept"
        )
    report = verify_file(path)
    if report.broken is not None or report.torn is not None:
        raise ReceiptError(f"the receipt chain does not verify: {report.broken or report.torn}")
    for receipt, digest, _ in _receipt_lines(path):
        if digest == receipt_hash:
            problems = _subject_problems(artifacts_dir, receipt)
            if problems:
                raise ReceiptError(f"receipt {receipt_hash}: {'; '.join(problems)}")
            return receipt
    raise ReceiptError(f"no receipt with hash {receipt_hash} in {path} ({report.lines} receipts)")


def _receipt_lines(path: Path) -> list[tuple[Receipt, str, int]]:
    """(receipt, its hash, line number) of each complete, chained line."""
    decode = msgspec.json.Decoder(Receipt).decode
    out = []
    for number, line in enumerate(path.read_bytes().split(b"\n")[:-1], 1):
        split = split_line(line)
        body = unseal(line)
        if split is None or body is None:
            continue
        out.append((decode(body), split[2].decode(), number))
    return out


def _subject_problems(artifacts_dir: Path, receipt: Receipt) -> list[str]:
    problems = []
    for name, subject in receipt.subjects.items():
        file = artifacts_dir / subject.path
        if not file.is_file():
            problems.append(f"its {name} {subject.path} is missing")
        elif sha256_file(file) != subject.sha256:
            problems.append(
                f"its {name} {subject.path} has changed since the receipt "
                f"(SHA-256 {sha256_file(file)[:12]}, receipt says {subject.sha256[:12]})"
            )
    return problems


# -- the whole run ------------------------------------------------------------------------


@dataclass
class RunVerdict:
    """What :func:`verify_run` found: ``files`` (the chain report of each file checked),
    ``problems`` (each names a file, and a line where there is one) and ``notes`` (not
    tampering: a torn last line, a run that has not finished)."""

    run_dir: Path
    files: list[ChainReport] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    receipts: int = 0
    replayable: bool = True
    """Whether the messages can be checked against a replay of the answers: every chain
    holds and ``scenario.toml`` is the one the run wrote (a replay of an edited scenario
    would check nothing, and would run what the editor wrote)."""

    @property
    def intact(self) -> bool:
        return not self.problems


def verify_run(run_dir: Path) -> RunVerdict:
    """Checks the run in ``run_dir`` (see the module docstring)."""
    verdict = RunVerdict(run_dir)
    chains = [
        *event_logs(run_dir),
        run_dir / COSTS,
        run_dir / CALLS,
        run_dir / ARTIFACTS / RECEIPTS,
    ]
    for path in chains:
        if path.is_file():
            _check_chain(verdict, verify_file(path))
    if not verdict.intact:
        verdict.replayable = False
        return verdict  # the cross-checks would only repeat the break in other words
    logs = Logs.read(run_dir)
    events = logs.logs.get(run_dir / EVENTS, [])
    check_ledger(logs, verdict.problems.append, verdict.notes.append)
    check_summary(logs, verdict.problems.append, verdict.notes.append)
    check_executions(
        logs,
        {report.path: report for report in verdict.files},
        _summary_dict(run_dir),
        verdict.problems.append,
        verdict.notes.append,
    )
    verdict.replayable = check_record(logs, verdict.problems.append, verdict.notes.append)
    _check_ending(verdict, run_dir, events)
    _check_artifacts(verdict, run_dir, events)
    _check_unrecorded(verdict, run_dir, events)
    _check_receipts(verdict, run_dir, events)
    return verdict


def _summary_dict(run_dir: Path) -> dict[str, Any] | None:
    try:
        data = msgspec.json.decode((run_dir / SUMMARY).read_bytes())
    except (OSError, msgspec.DecodeError):
        return None  # absent, or damaged (check_summary says so)
    return data if isinstance(data, dict) else None


def _check_chain(verdict: RunVerdict, report: ChainReport) -> None:
    verdict.files.append(report)
    if report.broken is not None:
        verdict.problems.append(str(report.broken))
    if report.torn is not None:
        verdict.notes.append(str(report.torn))


def _check_ending(
    verdict: RunVerdict, run_dir: Path, events: list[tuple[int, dict[str, Any]]]
) -> None:
    last = events[-1][1].get("kind") if events else None
    if last == "run_ended":
        return
    where = f"{run_dir / EVENTS}:{len(events) + 1}"
    ended = next((n for n, e in events if e.get("kind") == "run_ended"), None)
    if ended is not None:
        verdict.problems.append(
            f"{run_dir / EVENTS}:{ended + 1}: added: the run ended at line {ended} "
            f"(run_ended), and nothing is logged after that"
        )
    elif (run_dir / SUMMARY).is_file():
        verdict.problems.append(
            f"{where}: missing: the run finished (summary.json) but its log "
            f"does not end with run_ended: lines were cut from the end"
        )
    else:
        verdict.notes.append(f"{where}: the run has not finished (or was killed): no run_ended yet")


def _check_artifacts(
    verdict: RunVerdict, run_dir: Path, events: list[tuple[int, dict[str, Any]]]
) -> None:
    latest: dict[str, tuple[int, str]] = {}
    for number, event in events:
        if event.get("kind") == "artifact_written":
            latest[event["path"]] = (number, event["sha256"])
    for rel, (number, digest) in sorted(latest.items()):
        file = run_dir / ARTIFACTS / rel
        if file.is_symlink():
            verdict.problems.append(
                f"{file}: a symbolic link (to {os.readlink(file)}) where "
                f"{run_dir / EVENTS}:{number} recorded a file the run wrote"
            )
        elif not file.is_file():
            verdict.problems.append(f"{file}: missing; written at {run_dir / EVENTS}:{number}")
        elif sha256_file(file) != digest:
            verdict.problems.append(
                f"{file}: changed since it was written "
                f"({run_dir / EVENTS}:{number} recorded SHA-256 {digest[:12]})"
            )


def _check_unrecorded(
    verdict: RunVerdict, run_dir: Path, events: list[tuple[int, dict[str, Any]]]
) -> None:
    """Files (or links) in ``artifacts/`` that no ``artifact_written`` event records: the
    run writes nothing there without recording it, so each was put there afterwards."""
    root = run_dir / ARTIFACTS
    if root.is_symlink():
        verdict.problems.append(f"{root}: a symbolic link (to {os.readlink(root)}), not the run's")
        return
    recorded = {e["path"] for _, e in events if e.get("kind") == "artifact_written"}
    finished = bool(events) and events[-1][1].get("kind") == "run_ended"
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        for name in sorted(dirnames + filenames):
            path = here / name
            rel = path.relative_to(root).as_posix()
            if rel == RECEIPTS or rel in recorded:
                continue  # receipts are checked on their own, a recorded file above
            if path.is_symlink():
                verdict.problems.append(
                    f"{path}: a symbolic link (to {os.readlink(path)}) that the run did not write"
                )
            elif not finished and path.is_file():
                # A file is written before its event is logged: a kill in between leaves it.
                verdict.notes.append(
                    f"{path}: no artifact_written event records it: written as the run was "
                    f"killed, or put there afterwards (the run has not finished)"
                )
            elif path.is_file():
                verdict.problems.append(
                    f"{path}: not written by the run: no artifact_written event in "
                    f"{run_dir / EVENTS} records it"
                )
        dirnames[:] = [d for d in dirnames if not (here / d).is_symlink()]


def _check_receipts(
    verdict: RunVerdict, run_dir: Path, events: list[tuple[int, dict[str, Any]]]
) -> None:
    path = run_dir / ARTIFACTS / RECEIPTS
    lines = _receipt_lines(path) if path.is_file() else []
    verdict.receipts = len(lines)
    issued = [(n, e.get("data", {})) for n, e in events if e.get("kind") == RECEIPT_EVENT]
    for receipt, _digest, number in lines:
        for problem in _subject_problems(run_dir / ARTIFACTS, receipt):
            verdict.problems.append(f"{path}:{number}: {problem}")
    for i, (event_line, data) in enumerate(issued):
        if i >= len(lines):
            verdict.problems.append(
                f"{path}:{len(lines) + 1}: missing: {run_dir / EVENTS}:"
                f"{event_line} records receipt {data.get('receipt')}"
            )
        elif lines[i][1] != data.get("receipt"):
            verdict.problems.append(
                f"{path}:{lines[i][2]}: is not the receipt recorded at "
                f"{run_dir / EVENTS}:{event_line}"
            )
    if len(lines) > len(issued):
        verdict.problems.append(
            f"{path}:{lines[len(issued)][2]}: no {RECEIPT_EVENT} event records this receipt"
        )
