"""Running a sweep's matrix, ``jobs`` runs at a time, under the sweep's one budget.

Two executors, chosen by what bounds a run:

* ``processes`` (the simulator and replays): a run is CPU-bound Python, so only
  processes use more than one core. A pool of long-lived worker processes
  (:mod:`sopbus.sweep._worker`) each imports sopbus once and takes run after run over a
  pipe; one job per line each way.
* ``tasks`` (a real provider): a run mostly waits on HTTP, so runs are trio tasks in this
  process. Many runs in flight cost no extra interpreter each (memory, start-up), and the
  event loop interleaves their calls as it does the calls of one run.

Either way every call of every run reserves against the sweep's shared account
(:mod:`sopbus.bus.money._file_account`), which serialises the processes with a file lock. Runs
start in matrix order; once the account has refused a reservation, the runs not started
are skipped (runs already going continue while their calls fit). Interrupted runs of a
resumed sweep are always continued: their share of the money is already spent.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
import trio

from sopbus.bus import SopbusError
from sopbus.bus.money import FileAccount, money

from ._job import Job, JobResult, run_job_guarded
from ._record import RunEntry, SweepDir, SweepRecord
from ._worker import PARENT_ENV

RunOne = Callable[[Job], Awaitable[JobResult]]
Say = Callable[[str], None]


class WorkerDied(SopbusError):
    """A worker process ended without answering (killed, out of memory, a crash)."""


async def drive(sdir: SweepDir, record: SweepRecord, say: Say) -> None:
    """Runs every run of ``record`` that is not done; updates ``sweep.json`` as they go."""
    account = FileAccount(sdir.account_path)
    slots = trio.Semaphore(record.jobs)
    todo = [e for e in record.runs if e.state == "interrupted"] + [
        e for e in record.runs if e.state == "pending"
    ]
    async with _executor(record) as run_one, trio.open_nursery() as nursery:
        for entry in todo:
            await slots.acquire()
            if entry.state == "pending" and account.read().refused:
                slots.release()
                entry.state = "skipped"
                continue
            job = _job(sdir, record, entry)
            entry.state = "running"
            sdir.write(record, results=False)
            nursery.start_soon(_one, sdir, record, entry, job, run_one, slots, say)
    sdir.write(record)


async def _one(
    sdir: SweepDir,
    record: SweepRecord,
    entry: RunEntry,
    job: Job,
    run_one: RunOne,
    slots: trio.Semaphore,
    say: Say,
) -> None:
    try:
        result = await run_one(job)
    except WorkerDied as exc:
        result = JobResult(run_id=entry.run_id, state="crashed", error=str(exc))
    finally:
        slots.release()
    for field in ("state", "status", "end_reason", "total_usd", "verdict", "error"):
        setattr(entry, field, getattr(result, field))
    sdir.write(record)
    say(progress_line(record, entry))


def progress_line(record: SweepRecord, entry: RunEntry) -> str:
    ended = sum(e.state in ("done", "crashed") for e in record.runs)
    reason = f" ({entry.end_reason})" if entry.end_reason != entry.status else ""
    what = (
        f"{entry.status}{reason} {money(entry.total_usd or 0)}"
        if entry.state == "done"
        else f"{entry.state}: {entry.error}"
    )
    return (
        f"[{ended}/{len(record.runs)}] {entry.variant} seed {entry.seed}: {what} "
        f"- run {entry.run_id}"
    )


def _job(sdir: SweepDir, record: SweepRecord, entry: RunEntry) -> Job:
    return Job(
        run_id=entry.run_id,
        runs_dir=record.runs_dir,
        account=str(sdir.account_path),
        fix=f"raise the sweep's budget: sopbus sweep --resume {record.sweep_id} --budget USD",
        origin=record.scenario_path,
        variant_file=str(sdir.variant_file(entry.variant)),
        seed=entry.seed,
        resume=entry.state == "interrupted",
    )


class _executor:
    """The executor of ``record`` as an async context: yields the function that runs one
    job; on exit (or cancellation) every worker process is stopped."""

    def __init__(self, record: SweepRecord):
        self._pool = WorkerPool() if record.executor == "processes" else None

    async def __aenter__(self) -> RunOne:
        return self._pool.run if self._pool is not None else run_job_guarded

    async def __aexit__(self, *exc: Any) -> None:
        if self._pool is not None:
            with trio.CancelScope(shield=True):
                await self._pool.aclose()


class WorkerPool:
    """Worker processes, started as jobs need them and kept for the next job."""

    def __init__(self) -> None:
        self._idle: list[_Worker] = []
        self._all: set[_Worker] = set()

    async def run(self, job: Job) -> JobResult:
        worker = self._idle.pop() if self._idle else await self._start()
        try:
            result = await worker.ask(job)
        except BaseException:
            self._all.discard(worker)
            with trio.CancelScope(shield=True):
                await worker.stop()
            raise
        self._idle.append(worker)
        return result

    async def _start(self) -> _Worker:
        worker = _Worker(
            await trio.lowlevel.open_process(
                [sys.executable, "-m", "sopbus.sweep._worker"],
                stdin=-1,
                stdout=-1,
                env={
                    **os.environ,
                    PARENT_ENV: str(os.getpid()),
                    "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
                },
            )
        )
        self._all.add(worker)
        return worker

    async def aclose(self) -> None:
        for worker in list(self._all):
            await worker.stop()
        self._all.clear()
        self._idle.clear()


class _Worker:
    def __init__(self, process: trio.Process):
        self.process = process
        self._buffer = b""

    async def ask(self, job: Job) -> JobResult:
        assert self.process.stdin is not None
        try:
            await self.process.stdin.send_all(msgspec.json.encode(job) + b"\n")
            line = await self._line()
        except trio.Cancelled:
            with trio.CancelScope(shield=True):
                await self.stop()  # SIGTERM: the run records its end as cancelled
            raise
        except trio.BrokenResourceError:
            line = None
        if line is None:
            code = await self.process.wait()
            raise WorkerDied(f"the worker process running it ended with exit code {code}")
        return msgspec.json.decode(line, type=JobResult)

    async def _line(self) -> bytes | None:
        assert self.process.stdout is not None
        while b"\n" not in self._buffer:
            chunk = await self.process.stdout.receive_some(65536)
            if not chunk:
                return None
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    async def stop(self) -> None:
        """Asks the worker to cancel its run and exit; kills it if it takes too long."""
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
        with trio.move_on_after(30):  # a cancelled run writes its summary in milliseconds
            await self.process.wait()
        if self.process.returncode is None:
            self.process.kill()
            await self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                await stream.aclose()
