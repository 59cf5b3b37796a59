"""What crosses a sweep's work queue (:mod:`sopbus.bus.nats._sweep`) as msgspec JSON.

A :class:`QueuedRun` carries everything a worker on another machine needs to execute the
run: the variant's scenario as text (files it names are absolute paths of the sweep's
machine: found when the worker shares its filesystem, a configuration error otherwise), the
seed and the run id the sweep gave it. A :class:`RunEvent` comes back: ``started`` when a
worker begins the run, ``ended`` with the :class:`~sopbus.sweep._job.JobResult` and what
the sweep's record needs of the run directory, which stays on the worker.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Literal

import msgspec

from sopbus.bus import RunSummary

from ._job import JobResult


class QueuedRun(msgspec.Struct, frozen=True, kw_only=True):
    """One run of the matrix, as a job on the queue."""

    run_id: str
    variant: str
    seed: int
    #: The variant's scenario file (``sweeps/<id>/variants/<v>.toml``), as text.
    scenario: str
    #: The original scenario file on the sweep's machine (its folder resolves the
    #: variant's relative names when the worker sees it too).
    origin: str


class RunEvent(msgspec.Struct, kw_only=True):
    """A worker's news of one run."""

    kind: Literal["started", "ended"]
    run_id: str
    #: ``host:pid`` of the worker.
    worker: str
    #: The run directory on the worker's machine (absolute).
    run_dir: str
    #: With ``ended``: what became of the run.
    result: JobResult | None = None
    #: With ``ended``: the run's ``summary.json`` (``None`` when it never began).
    summary: RunSummary | None = None
    #: With ``ended``: the sum of the run's cost ledger.
    ledger_usd: Decimal | None = None


encode = msgspec.json.Encoder(decimal_format="string").encode
