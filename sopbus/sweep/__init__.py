"""Sweeps: many runs of a scenario (variants x seeds) under one budget.

``_plan`` builds the matrix from ``--set``/``--seeds`` and ``[sweep]``; ``_record`` keeps
``sweeps/<id>/`` (``sweep.json``, ``results.csv``); ``_start`` writes a new sweep or makes
an interrupted one ready again; ``_exec`` runs the matrix ``--jobs`` at a time, in worker
processes (``_worker``) or as trio tasks, each run through ``_job``; ``_stats`` is what
``sopbus sweep-show`` prints. The sweep's shared budget is :mod:`sopbus.bus.money._account`.

On NATS (``sopbus sweep --bus URL``): ``_dispatch`` queues the matrix and collects the
results, ``_queue`` is what ``sopbus worker`` runs to execute them, ``_wire`` what crosses
the queue (the queue itself is :mod:`sopbus.bus.nats._sweep`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sopbus.bus import lazy_exports

if TYPE_CHECKING:
    from ._dispatch import drive_on_bus as drive_on_bus
    from ._exec import WorkerDied as WorkerDied
    from ._exec import drive as drive
    from ._page import write_sweep_page as write_sweep_page
    from ._queue import serve_queue as serve_queue
    from ._record import SweepDir as SweepDir
    from ._record import SweepRecord as SweepRecord
    from ._record import ended_as as ended_as
    from ._record import resolve_sweep as resolve_sweep
    from ._record import sweep_dirs as sweep_dirs
    from ._seeds import seeds_note as seeds_note
    from ._start import SweepArgs as SweepArgs
    from ._start import new_sweep as new_sweep
    from ._start import resumed_sweep as resumed_sweep
    from ._stats import rows_csv as rows_csv
    from ._stats import variant_rows as variant_rows

_WHERE: dict[str, str] = {
    "WorkerDied": "._exec",
    "drive": "._exec",
    "SweepDir": "._record",
    "SweepRecord": "._record",
    "resolve_sweep": "._record",
    "ended_as": "._record",
    "sweep_dirs": "._record",
    "SweepArgs": "._start",
    "new_sweep": "._start",
    "resumed_sweep": "._start",
    "seeds_note": "._seeds",
    "variant_rows": "._stats",
    "rows_csv": "._stats",
    "drive_on_bus": "._dispatch",
    "write_sweep_page": "._page",
    "serve_queue": "._queue",
}

__getattr__, __dir__, __all__ = lazy_exports(globals(), _WHERE)
