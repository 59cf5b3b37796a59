"""``sopbus sweep SCENARIO [--seeds N | --seed A..B] [--set key=v1,v2 ...] [--jobs N]
[--budget USD] [--runs-dir DIR]``, and ``sopbus sweep --resume ID``.

Runs every variant (the product of the ``--set`` values, and of ``[sweep.set]`` in the
file) with every seed, ``--jobs`` at a time, each an ordinary run directory, all under one
budget (``--budget``, else ``[sweep].budget_usd``, else the runs' caps added up). Prints a
line per run as it ends and a table per variant at the end. Exit codes: 0 every run ran,
1 a run could not be executed, 2 a usage or configuration error, 3 the sweep's budget ran
out and runs were skipped, 130 interrupted (resume with ``--resume ID``).
See :mod:`sopbus.sweep`.

With ``--bus nats://HOST:PORT [--lease SECONDS]`` the runs go onto a JetStream work queue and
``sopbus worker --bus URL`` processes on any machine execute them, all under the sweep's
budget in a NATS KV key (:mod:`sopbus.sweep._dispatch`); the run directories stay on
the workers.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from ._args import positive_int
from ._flags import (
    BUDGET,
    BUS,
    JOBS,
    LEASE,
    PRICE_OF_FILE,
    RUNS_DIR_OVERRIDE,
    SCENARIO,
    SEED,
    SETTINGS,
    SWEEPS_DIR,
    Flag,
    add,
)

if TYPE_CHECKING:
    from sopbus.sweep import SweepDir, SweepRecord

NAME = "sweep"
HELP = "run a scenario's variants x seeds, --jobs at a time, under one budget"


SEEDS = Flag("--seeds", metavar="N", type=positive_int, help="seeds 0 to N-1")
# One seed or a range: not run's --seed (an int), which this one keeps the name of.
SEED_RANGE = Flag(
    "--seed", metavar="A..B", help="seeds A to B (inclusive), or one seed", homonym_of=SEED
)
RESUME = Flag(
    "--resume",
    metavar="ID",
    help="continue an interrupted sweep: keep finished runs, resume interrupted ones, start "
    "the missing ones",
)


def configure(parser: argparse.ArgumentParser) -> None:
    scenario = SCENARIO.but(
        nargs="?", help="a scenario file (TOML); its [sweep] table may declare the matrix"
    )
    settings = SETTINGS.but(
        metavar="KEY=V1,V2",
        help="values to try for a dotted key of the scenario (repeatable; the variants are "
        "every combination)",
    )
    add(parser, scenario, SEEDS, SEED_RANGE, settings, JOBS)
    add(parser, BUDGET.but(help="the whole sweep's budget cap"), RUNS_DIR_OVERRIDE)
    add(parser, PRICE_OF_FILE, SWEEPS_DIR.but(help="where sweep directories go (default: sweeps)"))
    bus = BUS.but(
        help="run on NATS: queue the runs on the JetStream server at URL (nats://HOST:PORT) "
        "for `sopbus worker --bus URL` processes"
    )
    add(parser, bus, LEASE, RESUME)


def run(args: argparse.Namespace) -> int:
    from sopbus.bus import ConfigError

    if args.bus is not None and not args.bus.startswith(("nats://", "tls://")):
        # Said before the sweep directory is written (run and worker probe the server).
        raise ConfigError(
            f"--bus {args.bus!r}: expected a NATS server's URL, such as nats://127.0.0.1:4222"
        )
    if args.resume is not None:
        sdir, record = _resumed(args)
    elif args.scenario is None:
        raise ConfigError("sopbus sweep needs a SCENARIO file, or --resume ID")
    else:
        sdir, record = _planned(args)
    try:
        return _execute(sdir, record, args.lease)
    finally:
        sdir.unlock()


def _resumed(args: argparse.Namespace) -> tuple[SweepDir, SweepRecord]:
    """``--resume ID``: the sweep as it was planned; only --jobs and --budget may change."""
    from sopbus.bus import ConfigError
    from sopbus.sweep import resolve_sweep, resumed_sweep

    planned = (
        ("SCENARIO", args.scenario),
        ("--seeds", args.seeds),
        ("--seed", args.seed),
        ("--set", args.settings),
        ("--runs-dir", args.runs_dir),
        ("--price", args.price),
    )
    given = [name for name, value in planned if value]
    if given:
        raise ConfigError(
            f"--resume continues the sweep as it was planned; drop "
            f"{', '.join(given)} (only --jobs and --budget may change)"
        )
    sdir = resolve_sweep(args.resume, args.sweeps_dir)
    return sdir, resumed_sweep(sdir, jobs=args.jobs, budget=args.budget_usd)


def _planned(args: argparse.Namespace) -> tuple[SweepDir, SweepRecord]:
    from sopbus._examples import scenario_path
    from sopbus.sweep import SweepArgs, new_sweep

    return new_sweep(
        SweepArgs(
            scenario=scenario_path(args.scenario),
            seeds=args.seeds,
            seed=args.seed,
            settings=tuple(args.settings),
            jobs=args.jobs,
            budget=args.budget_usd,
            runs_dir=None if args.runs_dir is None else str(args.runs_dir),
            sweeps_dir=args.sweeps_dir,
            bus=args.bus,
            price=args.price,
        )
    )


def _say(line: str) -> None:
    from ._fit import wrapped
    from ._runref import line_width

    # Wrapped at the terminal's width, its later lines indented: a run's id stays whole.
    print(wrapped(line, line_width()), file=sys.stderr, flush=True)


def _execute(sdir: SweepDir, record: SweepRecord, lease_s: float) -> int:
    import trio

    from sopbus._assemble import configure_logging
    from sopbus.bus import ConfigError
    from sopbus.bus.money import money
    from sopbus.sweep import drive

    configure_logging(quiet=True)
    todo = sum(e.state in ("pending", "interrupted") for e in record.runs)
    where = f"on the workers of {record.bus}" if record.bus else f"{record.jobs} at a time"
    _say(
        f"sweep {record.sweep_id}: {len(record.variants)} variant(s) x {len(record.seeds)} "
        f"seed(s), {todo} run(s) to go, {where} ({record.executor}), "
        f"budget {money(record.budget_usd)}"
    )
    try:
        if record.bus is not None:
            from sopbus.bus.nats import NatsUnavailable
            from sopbus.sweep import drive_on_bus

            try:
                trio.run(drive_on_bus, sdir, record, _say, record.bus, lease_s)
            except NatsUnavailable as exc:
                raise ConfigError(str(exc)) from None
        else:
            trio.run(drive, sdir, record, _say)
    except BaseException as exc:
        if not _interrupted(exc):
            raise
        return _stopped(sdir, record)
    return _finished(sdir, record)


def _interrupted(exc: BaseException) -> bool:
    if isinstance(exc, BaseExceptionGroup):
        return exc.subgroup(KeyboardInterrupt) is not None
    return isinstance(exc, KeyboardInterrupt)


def _stopped(sdir: SweepDir, record: SweepRecord) -> int:
    from pathlib import Path

    from sopbus.sweep import ended_as

    for entry in record.runs:
        if entry.state == "running" and not ended_as(entry, Path(record.runs_dir) / entry.run_id):
            entry.state = "interrupted"
    record.state = "interrupted"
    sdir.write(record)
    ended = sum(e.state == "done" for e in record.runs)
    if record.bus is not None:
        _say(
            f"sopbus: interrupted: {ended} of {len(record.runs)} runs ended; the sweep was "
            f"withdrawn from the workers of {record.bus} (their runs of it are cancelled)"
        )
        return 130
    _say(
        f"sopbus: interrupted: {ended} of {len(record.runs)} runs ended; continue with "
        f"`sopbus sweep --resume {record.sweep_id}`"
    )
    return 130


def _finished(sdir: SweepDir, record: SweepRecord) -> int:
    from sopbus.bus.money import FileAccount, money
    from sopbus.cli._runref import console
    from sopbus.sweep import seeds_note, variant_rows

    from ._cmd_sweep_show import print_variants
    from ._fit import hanging

    skipped = sum(e.state == "skipped" for e in record.runs)
    crashed = [e for e in record.runs if e.state == "crashed"]
    record.state = "budget_exhausted" if skipped else "finished"
    sdir.write(record)
    state = FileAccount(sdir.account_path).read()
    out = console()
    print_variants(out, record, variant_rows(record), state.spent)
    if skipped:
        print(
            hanging(
                "",
                f"the sweep's budget ran out: {skipped} run(s) skipped (spent "
                f"{money(state.spent)} of {money(state.cap)}); raise it with "
                f"`sopbus sweep --resume {record.sweep_id} --budget USD`",
                out.width,
            )
        )
    for entry in crashed:
        print(hanging("", f"run {entry.run_id} could not be executed: {entry.error}", out.width))
    note = seeds_note(record)
    if note:
        print(note)
    print(hanging("sweep directory: ", str(sdir.path), out.width))
    return 1 if crashed else 3 if skipped else 0
