"""The sweep process of ``sopbus sweep SCENARIO --bus nats://HOST:PORT``: the matrix goes onto
a JetStream work queue, ``sopbus worker`` processes anywhere execute it, the results come
back here (:mod:`sopbus.bus.nats._sweep` is the queue, :mod:`sopbus.sweep._queue` the workers).

In order: open the sweep's :class:`~sopbus.bus.nats._account.NatsAccount` with the sweep's cap (in
the KV bucket ``SOPBUS_SWEEP_<id>``), create the queue and announce the sweep, queue every
run in matrix order, then read the workers' events until every run has ended or was
skipped, writing ``sweep.json`` and ``results.csv`` as they come (a run whose worker
reported ``started`` is ``running``). Every half lease the holds of runs whose worker
went silent are released (their jobs go to another worker). At the end, or when
interrupted, the account's state is copied into the sweep's ``budget.json`` (so
``sopbus sweeps`` and ``sopbus sweep-show`` work without the server) and the queue, the
notice and the account are removed from the server: the workers cancel the runs of the
sweep still going (an interrupted sweep on NATS is not resumed; start it again).

Run directories stay on the workers. When a run's directory is not where the sweep's
``runs_dir`` says (another machine), the sweep writes ``<runs_dir>/<run id>/summary.json``
(what the worker reported) and ``worker.json`` (which worker, and where the run directory
is on it), so the sweep's tables read every run; on a filesystem the worker shares, a link
to the worker's run directory stands there instead (``show``, ``costs``, reports work).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

import msgspec
import trio

from sopbus.bus import encode_summary
from sopbus.bus.money import AccountState
from sopbus.bus.nats import (
    MAX_DELIVER,
    SWEEP,
    Link,
    NatsAccount,
    Puller,
    Received,
    SweepNotice,
    delete_bucket,
    delete_queue,
    exhausted_job,
    exhausted_subject,
    open_link,
    open_sweep,
    submit,
    withdraw_notice,
)

from ._exec import progress_line
from ._record import RunEntry, SweepDir, SweepRecord
from ._wire import QueuedRun, RunEvent, encode

Say = Callable[[str], None]
WORKER_FILE = "worker.json"
FINAL = ("done", "skipped", "crashed")
#: How long an interrupted sweep waits for its workers to report the runs they cancel.
_WIND_UP_S = 10.0


async def drive_on_bus(
    sdir: SweepDir, record: SweepRecord, say: Say, url: str, lease_s: float
) -> None:
    """Runs the sweep's pending runs on the workers of the server at ``url``."""
    notice = SweepNotice(
        sweep_id=record.sweep_id,
        account_bucket=f"SOPBUS_SWEEP_{record.sweep_id}",
        executor=record.executor,
        lease_s=lease_s,
        fix="raise the sweep's budget (sopbus sweep --budget USD)",
    )
    async with open_link(url, name=f"sopbus sweep {record.sweep_id}") as link:
        account = NatsAccount(link, notice.account_bucket, fix=notice.fix)
        await account.open(record.budget_usd)
        try:
            await open_sweep(link, notice)
            await submit(
                link,
                record.sweep_id,
                [(e.run_id, _queued(sdir, record, e)) for e in record.runs if e.state == "pending"],
            )
            say(f"queued on {url}; start workers with `sopbus worker --bus {url}` on any machine")
            async with (
                trio.open_nursery() as nursery,
                link.subscribe(exhausted_subject(record.sweep_id)) as exhausted,
            ):
                nursery.start_soon(_release_lapsed, account, lease_s)
                await _collect(link, sdir, record, say, exhausted=exhausted)
                nursery.cancel_scope.cancel()
        finally:
            # Also when interrupted: the books as they stand, then the sweep withdrawn (its
            # workers cancel their runs of it). Bounded: a server gone must not hang Ctrl-C.
            with trio.CancelScope(shield=True), trio.move_on_after(_WIND_UP_S + 10):
                await _wind_up(link, sdir, record, notice, account, say)
    sdir.write(record)


def _queued(sdir: SweepDir, record: SweepRecord, entry: RunEntry) -> bytes:
    return encode(
        QueuedRun(
            run_id=entry.run_id,
            variant=entry.variant,
            seed=entry.seed,
            scenario=sdir.variant_file(entry.variant).read_text(),
            origin=record.scenario_path,
        )
    )


async def _collect(
    link: Link,
    sdir: SweepDir,
    record: SweepRecord,
    say: Say,
    until: tuple[str, ...] = ("pending", "running"),
    exhausted: trio.MemoryReceiveChannel[Received] | None = None,
) -> None:
    """Applies the workers' events to ``record`` until no run is in a state of ``until``;
    and the server's advisories on ``exhausted``: a run whose job was delivered
    ``MAX_DELIVER`` times and never reported is ``crashed``."""
    events = Puller(link, record.sweep_id, SWEEP)
    by_id = {e.run_id: e for e in record.runs}
    try:
        while any(e.state in until for e in record.runs):
            for taken in await events.take(64, wait=1.0):
                event = msgspec.json.decode(taken.data, type=RunEvent)
                entry = by_id.get(event.run_id)
                if entry is not None and entry.state not in FINAL:
                    _apply(sdir, record, entry, event, say)
                await events.ack(taken)
            while exhausted is not None:
                try:
                    advisory = exhausted.receive_nowait()
                except trio.WouldBlock:
                    break
                await _given_up(link, sdir, record, by_id, advisory.data, say)
    finally:
        with trio.CancelScope(shield=True):
            await events.close()


async def _given_up(
    link: Link,
    sdir: SweepDir,
    record: SweepRecord,
    by_id: dict[str, RunEntry],
    advisory: bytes,
    say: Say,
) -> None:
    """A job the queue gave up on (every worker that took it went silent): its run crashed."""
    job = await exhausted_job(link, record.sweep_id, advisory)
    entry = by_id.get(msgspec.json.decode(job, type=QueuedRun).run_id) if job else None
    if entry is None or entry.state in FINAL:
        return
    entry.state = "crashed"
    entry.error = (
        f"its job was delivered {MAX_DELIVER} times and every worker that took it went "
        f"silent before reporting it (killed by the run? out of memory?); see the "
        f"workers' logs, then run it alone"
    )
    sdir.write(record)
    say(progress_line(record, entry))


def _apply(sdir: SweepDir, record: SweepRecord, entry: RunEntry, event: RunEvent, say: Say) -> None:
    if event.kind == "started" or event.result is None:
        entry.state = "running"
        sdir.write(record, results=False)
        return
    for name in ("state", "status", "end_reason", "total_usd", "verdict", "error"):
        setattr(entry, name, getattr(event.result, name))
    if event.summary is not None:
        _place(Path(record.runs_dir) / entry.run_id, event)
    sdir.write(record)
    if entry.state != "skipped":  # as locally: the end says how many were skipped
        say(progress_line(record, entry) + f" on {event.worker}")


def _place(local: Path, event: RunEvent) -> None:
    """Makes the run's summary readable at ``local`` (see the module docstring)."""
    remote = Path(event.run_dir)
    if local.resolve() == remote.resolve():
        return  # the worker wrote it here: one filesystem, one runs directory
    if local.is_symlink():  # an earlier attempt's, on another worker: this one is newer
        local.unlink()
    elif (local / WORKER_FILE).is_file():
        shutil.rmtree(local)
    elif local.exists():
        return  # a run directory of this machine's own: not the sweep's to replace
    local.parent.mkdir(parents=True, exist_ok=True)
    if (remote / "summary.json").is_file():  # the worker's filesystem is ours
        os.symlink(remote, local, target_is_directory=True)
        return
    local.mkdir()
    assert event.summary is not None  # _apply places only the reports that carry one
    (local / "summary.json").write_bytes(encode_summary(event.summary))
    (local / WORKER_FILE).write_text(
        json.dumps(
            {"worker": event.worker, "run_dir": str(remote), "ledger_usd": str(event.ledger_usd)},
            indent=2,
        )
    )


async def _wind_up(
    link: Link,
    sdir: SweepDir,
    record: SweepRecord,
    notice: SweepNotice,
    account: NatsAccount,
    say: Say,
) -> None:
    """Withdraws the sweep, waits (a little) for the workers to report the runs of it they
    cancel, copies the books, then deletes the queue and the account."""
    try:
        await withdraw_notice(link, notice.sweep_id)
        with trio.move_on_after(_WIND_UP_S):
            await _collect(link, sdir, record, say, until=("running",))
        _copy_account(sdir, await account.state())
    finally:
        await delete_queue(link, notice.sweep_id)
        await delete_bucket(link, notice.account_bucket)


async def _release_lapsed(account: NatsAccount, lease_s: float) -> None:
    """Gives back the holds of runs whose worker stopped renewing their lease."""
    while True:
        await trio.sleep(lease_s / 2)
        await account.release_lapsed()


def _copy_account(sdir: SweepDir, state: AccountState) -> None:
    """The NatsAccount's final state into ``budget.json`` (created with the cap by
    :func:`~sopbus.sweep._start.new_sweep`), per run."""
    from sopbus.bus.money import FileAccount

    book = FileAccount(sdir.account_path)
    for holder, spent in state.by_holder.items():
        book.rebase_now(holder, Decimal(spent))
