"""A sweep's directory: ``sweeps/<id>/`` with ``sweep.json``, ``results.csv`` and the
shared account.

``sweep.json`` is the matrix (scenario, seeds, variants with their settings) and one entry
per run: its id, variant, seed, state and outcome. It is rewritten whole (``os.replace``)
after every change, so a killed sweep leaves a whole file. Its run states are the
coordinator's view; a resume trusts the run directories instead (a run killed with the
sweep still says ``running`` here).

Files: ``sweep.json``; ``results.csv`` (one row per run, written as runs end);
``budget.json`` (the shared account, :mod:`sopbus.bus.money._file_account`); ``scenario.toml``
(the scenario as the sweep read it) and ``variants/<v>.toml`` (each variant's scenario,
which the runs load).
"""

from __future__ import annotations

import csv
import io
import os
from decimal import Decimal
from pathlib import Path
from typing import Literal

import msgspec

from sopbus.bus import ConfigError, RunSummary, encode_json, read_summary, try_lock

from ._plan import Variant

SWEEP = "sweep.json"
RESULTS = "results.csv"
ACCOUNT = "budget.json"
DEFAULT_SWEEPS_DIR = "sweeps"

#: pending: not started; running; done: ended (any status); skipped: the sweep's money ran
#: out before it started; interrupted: killed or cancelled, to be resumed; crashed: its
#: process died or it could not start (the error says why).
RunState = Literal["pending", "running", "done", "skipped", "interrupted", "crashed"]


class RunEntry(msgspec.Struct, kw_only=True):
    """One run of the matrix and what became of it."""

    run_id: str
    variant: str
    seed: int
    state: RunState = "pending"
    status: str | None = None
    end_reason: str | None = None
    total_usd: Decimal | None = None
    verdict: bool | None = None
    error: str | None = None


class SweepRecord(msgspec.Struct, kw_only=True):
    """``sweep.json``."""

    sweep_id: str
    scenario: str
    scenario_path: str
    runs_dir: str
    budget_usd: Decimal
    jobs: int
    executor: Literal["processes", "tasks"]
    seeds: tuple[int, ...]
    variants: tuple[Variant, ...]
    runs: list[RunEntry]
    created_at: float
    state: str = "running"  # running, finished, budget_exhausted, interrupted
    resumes: int = 0
    #: The NATS server whose workers run the sweep (``sopbus sweep --bus``), else ``None``.
    bus: str | None = None

    def variant(self, vid: str) -> Variant:
        return next(v for v in self.variants if v.id == vid)


class SweepDir:
    """The directory of one sweep."""

    def __init__(self, path: Path):
        self.path = path
        self._lock_fd = -1
        self._summaries: dict[str, RunSummary] = {}  # of ended runs: they stay as they are

    @property
    def sweep_id(self) -> str:
        return self.path.name

    @property
    def account_path(self) -> Path:
        return self.path / ACCOUNT

    def variant_file(self, vid: str) -> Path:
        return self.path / "variants" / f"{vid}.toml"

    def read(self) -> SweepRecord:
        try:
            return msgspec.json.decode((self.path / SWEEP).read_bytes(), type=SweepRecord)
        except FileNotFoundError:
            raise ConfigError(f"{self.path} is not a sweep directory (no {SWEEP} in it)") from None
        except msgspec.DecodeError as exc:
            raise ConfigError(
                f"{self.path / SWEEP} is damaged ({exc}); it cannot be resumed"
            ) from None

    def write(self, record: SweepRecord, *, results: bool = True) -> None:
        """``sweep.json``, and ``results.csv`` unless only a run's start changed."""
        self._replace(SWEEP, msgspec.json.format(encode_json(record), indent=2))
        if results:
            self._replace(RESULTS, results_csv(record, self._summaries).encode())

    def _replace(self, name: str, data: bytes) -> None:
        tmp = self.path / f".{name}.tmp"
        tmp.write_bytes(data)
        os.replace(tmp, self.path / name)

    def lock(self) -> None:
        """Marks the sweep as executing (the kernel drops the lock if this process dies);
        a :class:`~sopbus.bus.ConfigError` when another process holds it."""
        fd = try_lock(self.path)
        if fd is None:
            raise ConfigError(
                f"sweep {self.sweep_id} is still running in another process "
                f"({self.path}); wait for it, or stop it first"
            )
        self._lock_fd = fd

    def unlock(self) -> None:
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1


def ended_as(entry: RunEntry, run_dir: Path) -> bool:
    """Fills ``entry``'s outcome from the run's summary when the run ended on its own (not
    ``cancelled``); whether it did. A run can end just as its sweep is interrupted."""
    summary = read_summary(run_dir)
    if summary is None or summary.status == "cancelled":
        return False
    entry.state, entry.error = "done", None
    entry.status, entry.end_reason = summary.status, summary.end_reason
    entry.total_usd = summary.total_usd
    entry.verdict = summary.passed
    return True


def sweep_dirs(sweeps_dir: Path) -> list[SweepDir]:
    """The sweeps in ``sweeps_dir``, newest first (ids start with their start time)."""
    if not sweeps_dir.is_dir():
        return []
    found = [SweepDir(p) for p in sweeps_dir.iterdir() if (p / SWEEP).is_file()]
    return sorted(found, key=lambda d: d.sweep_id, reverse=True)


def resolve_sweep(ref: str, sweeps_dir: Path) -> SweepDir:
    """The sweep ``ref`` names: an id under ``sweeps_dir`` (or a unique prefix of one),
    ``last``, or a sweep directory."""
    for candidate in (sweeps_dir / ref, Path(ref)):
        if (candidate / SWEEP).is_file():
            return SweepDir(candidate)
    known = sweep_dirs(sweeps_dir)
    if ref == "last" and known:
        return known[0]
    matches = [d for d in known if d.sweep_id.startswith(ref)]
    if len(matches) == 1:
        return matches[0]
    listed = ", ".join(d.sweep_id for d in known[:3]) or "none"
    what = "is ambiguous" if matches else "not found"
    raise ConfigError(
        f"sweep {ref!r} {what} in {sweeps_dir}/ (the newest there: {listed}); "
        f"list them with `sopbus sweeps --sweeps-dir {sweeps_dir}`"
    )


RESULT_COLUMNS = (
    "sweep_id",
    "variant",
    "settings",
    "seed",
    "run_id",
    "state",
    "status",
    "end_reason",
    "verdict",
    "total_usd",
    "llm_calls",
    "prompt_tokens",
    "completion_tokens",
    "rounds",
    "duration_s",
    "error",
)


def results_csv(record: SweepRecord, cache: dict[str, RunSummary] | None = None) -> str:
    """One row per run (``results.csv``); numbers from each run's ``summary.json``
    (``cache`` keeps those of ended runs, so a long sweep does not read them again)."""
    cache = {} if cache is None else cache
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(RESULT_COLUMNS)
    for entry in record.runs:
        summary = cache.get(entry.run_id) or read_summary(Path(record.runs_dir) / entry.run_id)
        if entry.state == "done" and summary is not None:
            cache[entry.run_id] = summary
        verdict = None if summary is None else summary.passed
        figures = (
            ["", "", "", "", "", ""]
            if summary is None
            else [
                summary.total_usd,
                summary.llm_calls,
                summary.prompt_tokens,
                summary.completion_tokens,
                summary.rounds,
                summary.duration_s,
            ]
        )
        writer.writerow(
            [
                record.sweep_id,
                entry.variant,
                record.variant(entry.variant).label,
                entry.seed,
                entry.run_id,
                entry.state,
                entry.status or "",
                entry.end_reason or "",
                "" if verdict is None else str(verdict).lower(),
                *figures,
                entry.error or "",
            ]
        )
    return out.getvalue()
