"""An eval's directory: ``evals/<id>/``.

* ``eval.json``: the plan (scenarios, dataset, tasks, epochs, cap) and, once it ends, its
  figures; rewritten whole (``os.replace``) so a killed eval leaves a whole file;
* ``results.jsonl``: one :class:`~sopbus.eval._outcome.TaskResult` a line, appended as each
  task ends (a resume skips every task listed there);
* ``scenarios/<label>.toml``: each scenario as the eval runs it;
* ``runs/``: the run directories (``sopbus show``, ``costs``, ``replay``, ``verify`` read
  them as any run's), judge runs beside the runs they judge;
* ``budget.json``: the eval's shared account, the one cap of every call.
"""

from __future__ import annotations

import os
from decimal import Decimal
from pathlib import Path
from typing import Any

import msgspec

from sopbus.bus import ConfigError, try_lock

from ._outcome import TaskResult

EVAL = "eval.json"
RESULTS = "results.jsonl"
ACCOUNT = "budget.json"
DEFAULT_EVALS_DIR = "evals"


class EvalScenario(msgspec.Struct, frozen=True, kw_only=True):
    """One scenario of the eval: its label in tables, and where it came from."""

    label: str
    name: str
    origin: str


class EvalRecord(msgspec.Struct, kw_only=True):
    """``eval.json``."""

    eval_id: str
    scenarios: tuple[EvalScenario, ...]
    dataset: str
    task_ids: tuple[str, ...]
    epochs: int
    concurrency: int
    budget_usd: Decimal
    worst_case_usd: Decimal
    scorer: str | None
    created_at: float
    state: str = "running"  # running, finished, budget_exhausted, interrupted
    resumes: int = 0
    simulated: bool = False
    replay_of: str | None = None
    figures: dict[str, Any] = {}


class EvalDir:
    """The directory of one eval."""

    def __init__(self, path: Path):
        self.path = path
        self._lock: int | None = None

    @property
    def eval_id(self) -> str:
        return self.path.name

    @property
    def account_path(self) -> Path:
        return self.path / ACCOUNT

    @property
    def runs_dir(self) -> Path:
        return self.path / "runs"

    def scenario_file(self, label: str) -> Path:
        return self.path / "scenarios" / f"{label}.toml"

    def read(self) -> EvalRecord:
        return msgspec.json.decode((self.path / EVAL).read_bytes(), type=EvalRecord)

    def write(self, record: EvalRecord) -> None:
        tmp = self.path / f".{EVAL}.tmp"
        tmp.write_bytes(msgspec.json.format(msgspec.json.encode(record), indent=2) + b"\n")
        os.replace(tmp, self.path / EVAL)

    def results(self) -> list[TaskResult]:
        path = self.path / RESULTS
        if not path.is_file():
            return []
        lines = path.read_bytes().splitlines()
        # A line cut by a kill is the task's, not yet finished: it runs again. A task the
        # cap did not reach, then reached by a resume, has a later line: the later wins.
        latest: dict[tuple[str, str, int], TaskResult] = {}
        for line in lines:
            if (r := _result(line)) is not None:
                latest.pop((r.scenario, r.task_id, r.epoch), None)
                latest[(r.scenario, r.task_id, r.epoch)] = r
        return list(latest.values())

    def append(self, result: TaskResult) -> None:
        with (self.path / RESULTS).open("ab") as out:
            out.write(msgspec.json.encode(result) + b"\n")
            out.flush()
            os.fsync(out.fileno())

    def lock(self) -> None:
        self._lock = try_lock(self.path)
        if self._lock is None:
            raise ConfigError(f"eval {self.eval_id} is running in another process ({self.path})")

    def unlock(self) -> None:
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None


def _result(line: bytes) -> TaskResult | None:
    try:
        return msgspec.json.decode(line, type=TaskResult)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def eval_dirs(evals_dir: Path) -> list[EvalDir]:
    """The evals in ``evals_dir``, newest first."""
    if not evals_dir.is_dir():
        return []
    found = [EvalDir(p) for p in evals_dir.iterdir() if (p / EVAL).is_file()]
    return sorted(found, key=lambda d: d.read().created_at, reverse=True)


def resolve_eval(ref: str, evals_dir: Path) -> EvalDir:
    """The eval ``ref`` names: an id under ``evals_dir`` (or a unique prefix), ``last``,
    or an eval directory."""
    for candidate in (evals_dir / ref, Path(ref)):
        if (candidate / EVAL).is_file():
            return EvalDir(candidate)
    known = eval_dirs(evals_dir)
    if ref == "last" and known:
        return known[0]
    matches = [d for d in known if d.eval_id.startswith(ref)]
    if len(matches) == 1:
        return matches[0]
    listed = ", ".join(d.eval_id for d in known[:3]) or "none"
    what = "is ambiguous" if matches else "not found"
    raise ConfigError(
        f"eval {ref!r} {what} in {evals_dir}/ (the newest there: {listed}); "
        f"list them with `sopbus evals --evals-dir {evals_dir}`"
    )
