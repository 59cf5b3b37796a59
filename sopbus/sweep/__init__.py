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

from sopbus.bus._util._lazy import lazy_exports

if TYPE_CHECKING:
    from ._exec import WorkerDied as WorkerDied

_WHERE: dict[str, str] = {
    "WorkerDied": "._exec",
}

__getattr__, __dir__, __all__ = lazy_exports(globals(), _WHERE)
