"""The sweep's shared account (bus/money/_file_account.py): the cap holds across processes.

The property test runs reservers in several real processes at once, each with several
trio tasks, all hammering one account file with reservations of random sizes until the
cap refuses them; each reserver settles at the full amount or releases at random and
reports what it settled. A lost update (no lock, or a stale read) would make the file's
spend disagree with the reports or pass the cap.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import textwrap
import time
from decimal import Decimal
from pathlib import Path

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from sopbus.bus import (
    Budget,
    BudgetExhausted,
    Completion,
    Gateway,
    LedgerLine,
    LLMRequest,
    ProviderError,
)
from sopbus.bus.money._account import AccountShare, Hold
from sopbus.bus.money._file_account import FileAccount
from support.accounts import PRICES, Answering, Hanging, request
from support.paths import ROOT

RESERVER = textwrap.dedent("""
    import json, os, random, sys, time
    from decimal import Decimal
    import trio
    from sopbus.bus import BudgetExhausted
    from sopbus.bus.money._file_account import FileAccount

    path, seed, tasks = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    account = FileAccount(__import__("pathlib").Path(path))
    settled = []
    refusals = 0

    # Each process books once, says so, and waits for all the others to have booked too:
    # the race starts together. Without this a process starved while it starts (its
    # imports take seconds on a loaded machine) met a full account and booked nothing.
    first = Decimal(random.Random(seed).randint(1, 400)) / 10000
    account.settle_now(account.reserve_now(f"p{seed}", first), first)
    settled.append(first)
    open(f"{path}.ready.{seed}", "w").close()
    while not os.path.exists(f"{path}.go"):
        time.sleep(0.01)

    async def reserver(rng):
        global refusals
        while refusals < 20:
            amount = Decimal(rng.randint(1, 400)) / 10000
            try:
                hold = await account.reserve(f"p{seed}", amount)
            except BudgetExhausted:
                refusals += 1
                continue
            await trio.sleep(rng.random() / 1000)
            if rng.random() < 0.8:
                await account.settle(hold, amount)
                settled.append(amount)
            else:
                await account.release(hold)

    async def main():
        async with trio.open_nursery() as nursery:
            for i in range(tasks):
                nursery.start_soon(reserver, random.Random(seed * 100 + i))

    trio.run(main)
    print(json.dumps([str(a) for a in settled]))
""")


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
def test_reservers_in_several_processes_never_pass_the_cap(seed: int, tmp_path: Path) -> None:
    rng = random.Random(seed)
    cap = Decimal(rng.randint(20, 60)) / 10
    path = tmp_path / "budget.json"
    FileAccount.create(path, cap)
    script = tmp_path / "reserver.py"
    script.write_text(RESERVER)
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(path), str(seed * 10 + p), "6"],
            cwd=ROOT,
            stdout=subprocess.PIPE,
        )
        for p in range(4)
    ]
    ready = [tmp_path / f"budget.json.ready.{seed * 10 + p}" for p in range(4)]
    deadline = time.monotonic() + 300  # a bound on a starved start, not a speed test
    while not all(r.exists() for r in ready) and time.monotonic() < deadline:
        assert not any(p.poll() for p in procs), "a reserver died before the start line"
        time.sleep(0.01)
    (tmp_path / "budget.json.go").touch()
    assert all(r.exists() for r in ready), "a reserver did not book its first reservation"
    reported: list[Decimal] = []
    for proc in procs:
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0
        reported += [Decimal(a) for a in json.loads(out)]

    state = FileAccount(path).read()
    assert state.spent == sum(reported, Decimal(0))  # no settlement was lost
    assert state.spent <= cap
    assert state.held == 0
    assert state.refused >= 4 * 20  # every process met the cap
    assert cap - state.spent < Decimal("0.04")  # ... and it was the cap that stopped them
    assert set(state.by_holder) == {f"p{seed * 10 + p}" for p in range(4)}


@settings(max_examples=60, deadline=None)
@given(
    cap=st.integers(0, 1000),
    ops=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 300)), max_size=40),
)
def test_the_account_keeps_the_books_of_a_reference_model(
    tmp_path_factory: pytest.TempPathFactory, cap: int, ops: list[tuple[int, int]]
) -> None:
    path = tmp_path_factory.mktemp("acct") / "budget.json"
    account = FileAccount.create(path, Decimal(cap))
    holds: list[Hold] = []
    spent, held, refused = 0, 0, 0
    for kind, amount in ops:
        if kind == 0 or not holds:
            try:
                holds.append(account.reserve_now("r", Decimal(amount)))
                assert spent + held + amount <= cap
                held += amount
            except BudgetExhausted:
                assert spent + held + amount > cap
                refused += 1
        else:
            hold = holds.pop(amount % len(holds))
            actual = int(hold.amount) * (kind - 1)  # 1: release, 2: settle at the full amount
            account.settle_now(hold, Decimal(actual))
            held -= int(hold.amount)
            spent += actual
    state = account.read()
    assert (state.spent, state.held, state.refused) == (spent, held, refused)
    assert state.left == cap - spent - held >= 0


def test_a_refusal_names_the_amounts_and_the_fix(tmp_path: Path) -> None:
    account = FileAccount.create(tmp_path / "budget.json", Decimal("0.05"), fix="raise it with X")
    account.settle_now(account.reserve_now("a", Decimal("0.03")), Decimal("0.03"))
    with pytest.raises(BudgetExhausted) as info:
        account.reserve_now("b", Decimal("0.021"))
    assert str(info.value) == (
        "next call needs up to $0.021; $0.02 left of the shared $0.05 ($0.03 "
        "spent, $0.00 held by calls in flight of all runs); raise it with X"
    )
    assert account.read().refused == 1 and account.read().held == 0


def test_a_rebase_sets_a_holders_spend_and_drops_its_holds(tmp_path: Path) -> None:
    account = FileAccount.create(tmp_path / "budget.json", Decimal(1))
    account.settle_now(account.reserve_now("killed", Decimal("0.2")), Decimal("0.1"))
    account.reserve_now("killed", Decimal("0.3"))  # in flight when its process died
    kept = account.reserve_now("alive", Decimal("0.1"))
    account.rebase_now("killed", Decimal("0.4"))  # its ledger: 0.1 spent + 0.3 lost
    state = account.read()
    assert (state.spent, state.held) == (Decimal("0.4"), Decimal("0.1"))
    assert state.by_holder == {"killed": Decimal("0.4")}
    account.settle_now(kept, Decimal("0.05"))
    assert account.read().by_holder == {"killed": Decimal("0.4"), "alive": Decimal("0.05")}


def shared_gateway(
    tmp_path: Path, provider: object, *, sweep: str, run: str
) -> tuple[Gateway, FileAccount, list[LedgerLine]]:
    account = FileAccount.create(tmp_path / "budget.json", Decimal(sweep))
    lines: list[LedgerLine] = []
    gateway = Gateway(
        provider,  # type: ignore[arg-type]
        PRICES,
        Budget(Decimal(run)),
        sink=lines.append,
        pool=AccountShare(account, "run-1"),
    )
    return gateway, account, lines


async def test_a_call_settles_in_the_run_and_in_the_sweep(tmp_path: Path) -> None:
    gateway, account, lines = shared_gateway(tmp_path, Answering(), sweep="1", run="1")
    await gateway.complete(request(), round=1)
    state = account.read()
    assert state.by_holder == {"run-1": Decimal("0.020")} == {"run-1": gateway.budget.spent}
    assert state.held == 0 and [line.outcome for line in lines] == ["ok"]


async def test_the_sweeps_cap_refuses_a_call_the_runs_cap_allows(tmp_path: Path) -> None:
    gateway, account, lines = shared_gateway(tmp_path, Answering(), sweep="0.02", run="10")
    with pytest.raises(BudgetExhausted, match="left of the shared"):
        await gateway.complete(request(max_tokens=100), round=1)
    assert [line.outcome for line in lines] == ["refused"]
    assert gateway.budget.reserved == 0 and account.read().refused == 1


async def test_the_runs_cap_refusing_gives_the_sweeps_hold_back(tmp_path: Path) -> None:
    gateway, account, lines = shared_gateway(tmp_path, Answering(), sweep="10", run="0.02")
    with pytest.raises(BudgetExhausted, match=r"raise \[run\].budget_usd"):
        await gateway.complete(request(max_tokens=100), round=1)
    state = account.read()
    assert (state.held, state.spent, state.refused) == (0, 0, 0)
    assert [line.outcome for line in lines] == ["refused"]


async def test_a_cancelled_call_gives_its_hold_back(tmp_path: Path) -> None:
    gateway, account, lines = shared_gateway(tmp_path, Hanging(), sweep="1", run="1")
    with trio.move_on_after(0.2):
        await gateway.complete(request(), round=1)
    state = account.read()
    assert (state.held, state.spent) == (0, 0)
    assert gateway.budget.reserved == 0 and [line.outcome for line in lines] == ["error"]


class CutMidStream:
    """A provider whose answer breaks off: the attempt may have been billed."""

    name = "cut"

    async def complete(self, request: LLMRequest) -> Completion:
        await trio.sleep(0)
        raise ProviderError("the stream ended early", maybe_billed=True)


async def test_an_attempt_that_may_have_been_billed_costs_its_reservation_in_the_sweep_too(
    tmp_path: Path,
) -> None:
    gateway, account, lines = shared_gateway(tmp_path, CutMidStream(), sweep="1", run="1")
    with pytest.raises(ProviderError):
        await gateway.complete(request(), round=1)
    (line,) = lines
    assert line.outcome == "error" and line.estimated and line.cost_usd > 0
    assert account.read().by_holder == {"run-1": line.cost_usd} == {"run-1": gateway.budget.spent}
    assert account.read().held == 0
