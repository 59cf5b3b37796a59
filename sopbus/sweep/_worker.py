"""A worker process of a sweep: ``python -m sopbus.sweep._worker``.

It reads one :class:`~sopbus.sweep._job.Job` per line on stdin, runs it, and writes one
:class:`~sopbus.sweep._job.JobResult` per line to its protocol channel (the stdout it was
started with; the process's own stdout is pointed at stderr, so nothing a run prints can
break the protocol). It imports sopbus once and runs job after job, so a sweep of many
short simulator runs does not pay the interpreter's start-up for each.

Stopping: the worker ignores SIGINT (Ctrl-C in a terminal reaches the whole process group;
the coordinator decides) and takes SIGTERM as "cancel the run": the run records its end as
``cancelled``, gives its holds back to the sweep's account, and the worker exits. It dies
with its coordinator (a thread watches its parent), so a ``kill -9`` of ``sopbus sweep``
leaves no run going that ``--resume`` would collide with.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from typing import Any, BinaryIO

import msgspec
import trio

from ._job import Job, JobResult, run_job_guarded

PARENT_ENV = "SOPBUS_SWEEP_PARENT"


def main() -> None:
    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    channel = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    _quiet_logging()
    for line in sys.stdin.buffer:
        job = msgspec.json.decode(line, type=Job)
        result, stopped = trio.run(_guarded, job)
        _send(channel, result)
        if stopped:
            break


async def _guarded(job: Job) -> tuple[JobResult, bool]:
    """The job's result, and whether a SIGTERM cancelled it."""
    box: dict[str, Any] = {}
    with trio.open_signal_receiver(signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:

            async def work() -> None:
                box["result"] = await run_job_guarded(job)
                nursery.cancel_scope.cancel()

            nursery.start_soon(work)
            async for _ in signals:
                box["stopped"] = True
                nursery.cancel_scope.cancel()
                break
    result = box.get("result") or JobResult(
        run_id=job.run_id, state="interrupted", error="cancelled by the sweep (SIGTERM)"
    )
    return result, bool(box.get("stopped"))


def _send(channel: BinaryIO, result: JobResult) -> None:
    channel.write(msgspec.json.encode(result) + b"\n")


def _quiet_logging() -> None:
    from loguru import logger

    logger.remove()  # each run still writes its run.log; the terminal gets warnings only
    logger.add(sys.stderr, level="WARNING", format="{time:HH:mm:ss} {level: <7} {message}")


def _die_with_parent() -> None:
    # A watch on getppid(), not PR_SET_PDEATHSIG: that signal follows the *thread* that
    # started the process, and trio starts processes from its worker threads, which end
    # when idle (the worker would be killed mid-run).
    parent = int(os.environ.get(PARENT_ENV, "0") or 0) or os.getppid()
    if os.getppid() != parent:  # it died already
        os._exit(1)
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(0.1)
    os._exit(1)  # every line a run wrote is flushed already; resume continues it


if __name__ == "__main__":
    main()
