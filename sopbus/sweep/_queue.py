"""The worker's side of sweeps on NATS: :func:`serve_queue`, what ``sopbus worker --bus URL``
runs to take sweep runs from their work queues (:mod:`sopbus.bus.nats._sweep`).

A worker looks for announced sweeps, takes up to ``jobs`` runs at a time from their queues
(oldest sweep first), and executes each as the local sweep does: in a worker process of its
own (:mod:`sopbus.sweep._worker`) for the simulator and replays, as a trio task for a real
provider. Every call of the run draws on the sweep's :class:`~sopbus.bus.nats._account.NatsAccount`.
The run directory is written under the worker's ``runs_dir``; the sweep gets the run's
summary and ledger total in the ``ended`` event (:mod:`sopbus.sweep._wire`).

What makes a job safe to lose a worker:

* The job is acked only once its ``ended`` event is on the stream. While the run goes, the
  worker tells the queue it is still working (every third of the sweep's lease) and renews
  the run's lease in the account, so a killed worker's job goes to another worker after the
  lease, and the sweep releases the holds of the dead attempt (``release_lapsed``).
* A job delivered again is looked up in this worker's ``runs_dir`` first: a run that ended
  here (the worker died before reporting it) is reported from its summary, not run again; a
  run that began here (a worker restarted on the same machine, or run directories on a
  shared filesystem) is resumed from its recording as ``sopbus sweep --resume`` does, so no
  answered call is paid twice. A run whose directory is elsewhere (another machine) starts
  again from its first call: the calls the dead attempt made are paid again, and what it
  spent stays booked in the sweep's account (``spent_before``), so the cap holds; the new
  run directory's ledger shows the new attempt only.
* A new run (first delivery) is skipped, as in a local sweep, once the account has refused
  a reservation: its ``ended`` event says ``skipped`` and no directory is made.

A sweep withdrawn while its runs go (its process was interrupted) has them cancelled
here within a second, each reported ``interrupted``. ``stop`` set: no more jobs are taken and the runs going are cancelled (each writes its
``cancelled`` summary); their jobs are given back to the queue at once, and a worker that
takes one again here resumes it.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Awaitable
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import msgspec
import trio
from loguru import logger

from sopbus.bus import read_summary
from sopbus.bus.nats import WORKERS, Link, NatsAccount, Puller, SweepNotice, Taken, notices, report

from ._exec import WorkerDied, WorkerPool
from ._job import Job, JobResult, run_job_guarded
from ._record import RunEntry, ended_as
from ._wire import QueuedRun, RunEvent, encode

#: How often the worker looks for sweeps announced or withdrawn.
_LOOK_EVERY_S = 1.0


@dataclass
class _Sweep:
    """A sweep this worker takes jobs from."""

    notice: SweepNotice
    jobs: Puller
    account: NatsAccount
    variants: dict[str, Path] = field(default_factory=dict)
    #: Set when the sweep's notice is gone (it ended or was interrupted): its runs stop.
    withdrawn: trio.Event = field(default_factory=trio.Event)


async def serve_queue(
    link: Link, *, jobs: int, runs_dir: Path, stop: trio.Event | None = None
) -> None:
    """Takes sweep runs from the queues on ``link``'s server, ``jobs`` at a time, until
    ``stop`` is set (or the caller cancels). See the module docstring."""
    runs_dir = runs_dir.resolve()
    server = _Server(link, runs_dir, jobs)
    logger.info("taking sweep runs from {}, {} at a time, into {}", link.url, jobs, runs_dir)
    try:
        async with trio.open_nursery() as nursery:
            if stop is not None:
                nursery.start_soon(_cancel_on, stop, nursery.cancel_scope)
            await server.serve(nursery)
    finally:
        with trio.CancelScope(shield=True):
            await server.aclose()


async def _cancel_on(stop: trio.Event, scope: trio.CancelScope) -> None:
    await stop.wait()
    scope.cancel()


class _Server:
    def __init__(self, link: Link, runs_dir: Path, jobs: int):
        self.link, self.runs_dir = link, runs_dir
        self.slots = trio.Semaphore(jobs)
        self.sweeps: dict[str, _Sweep] = {}
        self.pool = WorkerPool()
        self.worker = f"{socket.gethostname()}:{os.getpid()}"

    async def serve(self, nursery: trio.Nursery) -> None:
        nursery.start_soon(self._watch)
        while True:
            await self.slots.acquire()
            found = await self._next()
            nursery.start_soon(self._serve_one, *found)

    async def _next(self) -> tuple[_Sweep, Taken]:
        """The next job of any announced sweep (waits until there is one)."""
        while True:
            for sweep in list(self.sweeps.values()):
                try:
                    taken = await sweep.jobs.take(1, wait=0.5)
                except Exception as exc:  # withdrawn while we asked, or the server away:
                    # the watch forgets a withdrawn sweep; its runs here must not stop for a hiccup
                    logger.debug("sweep {}: no job taken: {}", sweep.notice.sweep_id, exc)
                    await trio.sleep(_LOOK_EVERY_S / 2)
                    continue
                if taken:
                    return sweep, taken[0]
            if not self.sweeps:
                await trio.sleep(_LOOK_EVERY_S / 2)

    async def _watch(self) -> None:
        while True:
            try:
                await self._look()
            except Exception as exc:  # the server away for a moment: look again
                logger.warning(
                    "cannot list the sweeps on {}: {}: {}", self.link.url, type(exc).__name__, exc
                )
            await trio.sleep(_LOOK_EVERY_S)

    async def _look(self) -> None:
        """Binds the sweeps announced since the last look; forgets the withdrawn ones."""
        current = {n.sweep_id: n for n in await notices(self.link)}
        for gone in set(self.sweeps) - set(current):
            await self._forget(gone)
        for sweep_id, notice in current.items():
            if sweep_id not in self.sweeps:
                account = NatsAccount(self.link, notice.account_bucket, fix=notice.fix)
                await account.open(None)
                self.sweeps[sweep_id] = _Sweep(
                    notice, Puller(self.link, sweep_id, WORKERS), account
                )
                logger.info("working for sweep {}", sweep_id)

    async def _forget(self, sweep_id: str) -> None:
        sweep = self.sweeps.pop(sweep_id, None)
        if sweep is not None:
            sweep.withdrawn.set()
            await _quietly(sweep.jobs.close())
            logger.info("sweep {} withdrawn", sweep_id)

    async def _serve_one(self, sweep: _Sweep, taken: Taken) -> None:
        try:
            run = msgspec.json.decode(taken.data, type=QueuedRun)
            event = None
            async with trio.open_nursery() as keep:
                keep.start_soon(self._keep_alive, sweep, taken, run.run_id)
                keep.start_soon(_cancel_on, sweep.withdrawn, keep.cancel_scope)
                event = await self._execute(sweep, run, taken.delivered)
                keep.cancel_scope.cancel()
            if event is None:
                event = self._ended(
                    self.runs_dir / run.run_id,
                    JobResult(
                        run_id=run.run_id, state="interrupted", error="the sweep was withdrawn"
                    ),
                )
                logger.warning(
                    "sweep {} was withdrawn: run {} cancelled", sweep.notice.sweep_id, run.run_id
                )
            await report(
                self.link,
                sweep.notice.sweep_id,
                f"{run.run_id}/ended/{taken.delivered}",
                encode(event),
            )
            await sweep.jobs.ack(taken)
            logger.info("sweep {} run {}: {}", sweep.notice.sweep_id, run.run_id, _said(event))
        except trio.Cancelled:
            with trio.CancelScope(shield=True):
                await _quietly(sweep.jobs.give_back(taken))
            raise
        except Exception as exc:  # the sweep was withdrawn, or the server went away
            logger.warning(
                "sweep {}: a job could not be reported ({}: {}); the queue gives it "
                "to a worker again after the lease",
                sweep.notice.sweep_id,
                type(exc).__name__,
                exc,
            )
        finally:
            self.slots.release()

    async def _keep_alive(self, sweep: _Sweep, taken: Taken, run_id: str) -> None:
        lease = sweep.notice.lease_s
        while True:
            await _quietly(sweep.account.heartbeat(run_id, lease))
            await _quietly(sweep.jobs.working(taken))
            await trio.sleep(lease / 3)

    async def _execute(self, sweep: _Sweep, run: QueuedRun, delivered: int) -> RunEvent:
        run_dir = self.runs_dir / run.run_id
        entry = RunEntry(run_id=run.run_id, variant=run.variant, seed=run.seed)
        if ended_as(entry, run_dir):  # it ended here; the worker died before reporting it
            result = JobResult(
                run_id=run.run_id,
                state="done",
                status=entry.status,
                end_reason=entry.end_reason,
                total_usd=entry.total_usd,
                verdict=entry.verdict,
            )
            return self._ended(run_dir, result)
        state = await sweep.account.state()
        fresh = delivered == 1 and not run_dir.exists()
        if fresh and state.refused:
            return self._ended(run_dir, JobResult(run_id=run.run_id, state="skipped"))
        with trio.CancelScope(shield=True):  # a publish is quick; a cancelled one leaves noise
            await report(
                self.link,
                sweep.notice.sweep_id,
                f"{run.run_id}/started/{delivered}",
                encode(
                    RunEvent(
                        kind="started", run_id=run.run_id, worker=self.worker, run_dir=str(run_dir)
                    )
                ),
            )
        resume = (run_dir / "scenario.toml").is_file()
        job = Job(
            run_id=run.run_id,
            runs_dir=str(self.runs_dir),
            account=sweep.notice.account_bucket,
            bus=self.link.url,
            fix=sweep.notice.fix,
            origin=run.origin,
            variant_file=str(self._variant_file(sweep, run)),
            seed=run.seed,
            resume=resume,
            spent_before=Decimal(0)
            if fresh or resume
            else state.by_holder.get(run.run_id, Decimal(0)),
        )
        return self._ended(run_dir, await self._run(sweep, job))

    async def _run(self, sweep: _Sweep, job: Job) -> JobResult:
        if sweep.notice.executor != "processes":
            return await run_job_guarded(job, sweep.account)
        try:
            return await self.pool.run(job)
        except WorkerDied as exc:
            return JobResult(run_id=job.run_id, state="crashed", error=str(exc))

    def _variant_file(self, sweep: _Sweep, run: QueuedRun) -> Path:
        """The variant's scenario, written once per sweep beside the worker's runs."""
        path = sweep.variants.get(run.variant)
        if path is None:
            path = self.runs_dir / ".sweeps" / sweep.notice.sweep_id / f"{run.variant}.toml"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(run.scenario)
            sweep.variants[run.variant] = path
        return path

    def _ended(self, run_dir: Path, result: JobResult) -> RunEvent:
        from sopbus.bus import read_jsonl
        from sopbus.bus.money import LedgerLine

        costs = run_dir / "costs.jsonl"
        ledger = (
            sum((line.cost_usd for line in read_jsonl(costs, LedgerLine)), Decimal(0))
            if costs.is_file()
            else None
        )
        return RunEvent(
            kind="ended",
            run_id=result.run_id,
            worker=self.worker,
            run_dir=str(run_dir),
            result=result,
            summary=read_summary(run_dir),
            ledger_usd=ledger,
        )

    async def aclose(self) -> None:
        await self.pool.aclose()
        for sweep in self.sweeps.values():
            await _quietly(sweep.jobs.close())


def _said(event: RunEvent) -> str:
    result = event.result
    if result is None:
        return event.kind
    return f"{result.state} {result.status or ''} {result.error or ''}".strip()


async def _quietly(step: Awaitable[Any]) -> None:
    """Awaits ``step``; a failure (the sweep withdrawn, the server away) is logged only."""
    try:
        await step
    except Exception as exc:
        logger.debug("ignored: {}: {}", type(exc).__name__, exc)
