"""Sweeps: many runs of a scenario (variants x seeds) under one budget.

``_plan`` builds the matrix from ``--set``/``--seeds`` and ``[sweep]``; ``_record`` keeps
``sweeps/<id>/`` (``sweep.json``, ``results.csv``); ``_start`` writes a new sweep or makes
an interrupted one ready again; ``_exec`` runs the matrix ``--jobs`` at a time, in worker
processes (``_worker``) or as trio tasks, each run through ``_job``; ``_stats`` is what
``sopbus sweep-show`` prints. The sweep's shared budget is :mod:`bus.money._account`.

On NATS (``sopbus sweep --bus URL``): ``_dispatch`` queues the matrix and collects the
results, ``_queue`` is what ``sopbus worker`` runs to execute them, ``_wire`` what crosses
the queue (the queue itself is :mod:`bus.nats._sweep`).
"""
