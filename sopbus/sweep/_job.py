"""One run of a sweep, executed in the current process: started anew or resumed.

A :class:`Job` says everything a process needs (it crosses a pipe to a worker process as
JSON): the variant's scenario file and the seed, or the run directory to resume, and the
sweep's shared account. A new run gets the id the sweep gave it, so ``sweep.json`` names
its directory before it exists. A resumed run's share of the account is first rebased to
what its ledger will carry over (what it spent, plus the calls it had in flight, counted
as the run's own resume counts them), which also drops the holds its killed process left.

A job of a sweep on NATS (``bus`` set) draws on the sweep's
:class:`~sopbus.bus.nats._account.NatsAccount` instead of the file: ``account`` is its KV bucket.
A run whose job came back from a worker that died, to a worker without its directory,
starts anew with its share of the account rebased to ``spent_before`` (what the dead
attempt spent), so the money that attempt paid stays counted against the cap.
"""

from __future__ import annotations

import os
import traceback
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from decimal import Decimal
from pathlib import Path

import msgspec

from sopbus.bus import SCENARIO, ConfigError
from sopbus.bus.money import AccountShare, FileAccount, SharedAccount
from sopbus.bus.scenario import Scenario, load_scenario, scenario_with_overrides

from ._record import RunState


class Job(msgspec.Struct, frozen=True, kw_only=True):
    """What to run: ``variant_file`` with ``seed`` as run ``run_id``, or, with ``resume``,
    the run directory ``runs_dir/run_id`` again."""

    run_id: str
    runs_dir: str
    account: str
    fix: str
    origin: str
    variant_file: str
    seed: int
    resume: bool = False
    #: A NATS server's URL: ``account`` is then the KV bucket of a NatsAccount there.
    bus: str | None = None
    #: A new run's share of the account to start from (0 unless it starts again).
    spent_before: Decimal = Decimal(0)


class JobResult(msgspec.Struct, kw_only=True):
    """What became of a job (the fields of a :class:`~sopbus.sweep._record.RunEntry`)."""

    run_id: str
    state: RunState
    status: str | None = None
    end_reason: str | None = None
    total_usd: Decimal | None = None
    verdict: bool | None = None
    error: str | None = None


async def run_job(job: Job, account: SharedAccount | None = None) -> JobResult:
    """Runs ``job`` to its end; a configuration error is a ``crashed`` result that says why.
    Cancellation propagates (the run has written its ``cancelled`` summary by then).
    ``account``: the job's account when the caller has it open already (a worker's runs as
    tasks share its connection), else opened from the job."""
    if account is not None:
        return await _run_job(job, account)
    async with job_account(job) as opened:
        return await _run_job(job, opened)


async def _run_job(job: Job, account: SharedAccount) -> JobResult:
    from sopbus._assemble import execute, run_environ, with_whole_url

    pool = AccountShare(account, job.run_id)
    run_dir = Path(job.runs_dir) / job.run_id
    try:
        environ: Mapping[str, str] = (
            run_environ()
        )  # the sweep's working directory (a worker's too): its .env
        if job.resume and (run_dir / SCENARIO).is_file():
            from sopbus.bus.store import plan_resume

            scenario, continuation = plan_resume(run_dir)
            carried = sum((line.cost_usd for line in continuation.carried), Decimal(0))
            await account.rebase(
                job.run_id, carried + sum((c.amount for c in continuation.lost), Decimal(0))
            )
            environ = with_whole_url(environ, scenario, Path(job.origin))
            outcome = await execute(scenario, continuation=continuation, pool=pool, environ=environ)
        else:
            if run_dir.exists():  # it died before its first call (no scenario.toml): anew
                os.replace(run_dir, run_dir.with_name(f"{job.run_id}.dead-{os.getpid()}"))
            await account.rebase(job.run_id, job.spent_before)
            scenario = job_scenario(job)
            environ = with_whole_url(environ, scenario, Path(job.origin))
            outcome = await execute(scenario, run_id=job.run_id, pool=pool, environ=environ)
    except ConfigError as exc:
        return JobResult(run_id=job.run_id, state="crashed", error=str(exc))
    summary = outcome.summary
    return JobResult(
        run_id=job.run_id,
        state="done",
        status=summary.status,
        end_reason=summary.end_reason,
        total_usd=summary.total_usd,
        verdict=summary.passed,
    )


@asynccontextmanager
async def job_account(job: Job) -> AsyncIterator[SharedAccount]:
    """The sweep's account the job draws on: the file, or the NatsAccount on ``job.bus``."""
    if job.bus is None:
        yield FileAccount(Path(job.account), fix=job.fix)
        return
    from sopbus.bus.nats import NatsAccount, open_link

    async with open_link(job.bus, name=f"sopbus run {job.run_id}") as link:
        account = NatsAccount(link, job.account, fix=job.fix)
        await account.open(None)
        yield account


async def run_job_guarded(job: Job, account: SharedAccount | None = None) -> JobResult:
    """:func:`run_job`, with a bug in a run recorded as a ``crashed`` result (its traceback
    on stderr) so that the sweep goes on with its other runs."""
    try:
        return await run_job(job, account)
    except Exception as exc:
        traceback.print_exc()
        return JobResult(run_id=job.run_id, state="crashed", error=f"{type(exc).__name__}: {exc}")


def job_scenario(job: Job) -> Scenario:
    """The variant's scenario with the job's seed, its paths resolved against the original
    scenario file (a Python SOP beside it is found there)."""
    origin = Path(job.origin)
    if not origin.is_file():
        scenario = load_scenario(job.variant_file)
    else:  # the variant names the original's files: checked against the original's folder
        scenario = load_scenario(job.variant_file, base_dir=origin.parent)
        scenario = msgspec.structs.replace(scenario, path=origin)
    return scenario_with_overrides(scenario, seed=job.seed, runs_dir=job.runs_dir)
