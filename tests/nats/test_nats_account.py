"""The shared account on NATS KV (bus/nats/_account.py) against a real nats-server.

The behaviour FileAccount has (tests/money/test_shared_account.py) is checked on both accounts
through the async protocol, so the two stay interchangeable. Then what only NATS has: an
account created once by whoever comes first, reservers in several processes on one key
(with a control run that writes blindly, no compare-and-swap, to show that the checks catch
lost updates), and the leases that give a killed holder's money back.
"""

from __future__ import annotations

import json
import os
import random
import secrets
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from sopbus.bus import Budget, BudgetExhausted, ConfigError, Gateway, LedgerLine
from sopbus.bus.money._account import AccountShare, AccountState, Hold, SharedAccount
from sopbus.bus.money._file_account import FileAccount
from sopbus.bus.nats import Link, open_link
from sopbus.bus.nats._account import NatsAccount
from support.accounts import PRICES, Answering, Hanging
from support.accounts import request as llm_request
from support.nats_server import NatsServer, server_env
from support.paths import ROOT

MakeAccount = Callable[[Decimal, str], Awaitable[SharedAccount]]


def bucket() -> str:
    return f"ACCT_{secrets.token_hex(6)}"


@pytest.fixture
async def link(shared_nats_server: NatsServer) -> AsyncIterator[Link]:
    async with open_link(shared_nats_server.url) as opened:
        yield opened


async def new_nats_account(link: Link, cap: Decimal, fix: str = "raise the budget") -> NatsAccount:
    account = NatsAccount(link, bucket(), fix=fix)
    await account.open(cap)
    return account


# -- the behaviour both accounts share --------------------------------------------------


@pytest.fixture(params=["file", "nats"])
async def make_account(request: pytest.FixtureRequest, tmp_path: Path, link: Link) -> MakeAccount:
    """A factory of new accounts of either kind: ``await make(cap, fix)``."""

    async def make(cap: Decimal, fix: str) -> SharedAccount:
        if request.param == "file":
            return FileAccount.create(tmp_path / f"{secrets.token_hex(4)}.json", cap, fix=fix)
        return await new_nats_account(link, cap, fix)

    return make


async def test_a_refusal_names_the_amounts_and_the_fix(make_account: MakeAccount) -> None:
    account = await make_account(Decimal("0.05"), "raise it with X")
    await account.settle(await account.reserve("a", Decimal("0.03")), Decimal("0.03"))
    with pytest.raises(BudgetExhausted) as info:
        await account.reserve("b", Decimal("0.021"))
    assert str(info.value) == (
        "next call needs up to $0.021; $0.02 left of the shared $0.05 ($0.03 "
        "spent, $0.00 held by calls in flight of all runs); raise it with X"
    )
    state = await account.state()
    assert state.refused == 1 and state.held == 0


async def test_a_rebase_sets_a_holders_spend_and_drops_its_holds(make_account: MakeAccount) -> None:
    account = await make_account(Decimal(1), "")
    await account.settle(await account.reserve("killed", Decimal("0.2")), Decimal("0.1"))
    await account.reserve("killed", Decimal("0.3"))  # in flight when its process died
    kept = await account.reserve("alive", Decimal("0.1"))
    await account.rebase("killed", Decimal("0.4"))  # its ledger: 0.1 spent + 0.3 lost
    state = await account.state()
    assert (state.spent, state.held) == (Decimal("0.4"), Decimal("0.1"))
    assert state.by_holder == {"killed": Decimal("0.4")}
    await account.settle(kept, Decimal("0.05"))
    assert (await account.state()).by_holder == {"killed": Decimal("0.4"), "alive": Decimal("0.05")}
    with pytest.raises(RuntimeError, match="is not held"):
        await account.release(kept)  # closed twice


@settings(max_examples=25, deadline=None)
@given(
    cap=st.integers(0, 1000),
    ops=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 300)), max_size=30),
)
def test_the_nats_account_keeps_the_books_of_a_reference_model(
    shared_nats_server: NatsServer, cap: int, ops: list[tuple[int, int]]
) -> None:
    async def play() -> None:
        async with open_link(shared_nats_server.url) as link:
            account = await new_nats_account(link, Decimal(cap))
            holds: list[Hold] = []
            spent, held, refused = 0, 0, 0
            for kind, amount in ops:
                if kind == 0 or not holds:
                    try:
                        holds.append(await account.reserve("r", Decimal(amount)))
                        assert spent + held + amount <= cap
                        held += amount
                    except BudgetExhausted:
                        assert spent + held + amount > cap
                        refused += 1
                else:
                    hold = holds.pop(amount % len(holds))
                    actual = int(hold.amount) * (kind - 1) // 2  # release, half, all
                    await account.settle(hold, Decimal(actual))
                    held -= int(hold.amount)
                    spent += actual
            state = await account.state()
            assert (state.spent, state.held, state.refused) == (spent, held, refused)
            assert state.left == cap - spent - held >= 0

    trio.run(play)


# -- opening: created once, joined by the others ----------------------------------------


async def test_a_worker_joins_with_no_cap_and_a_different_cap_is_refused(link: Link) -> None:
    name = bucket()
    await NatsAccount(link, name).open(Decimal("2.5"))
    joined = NatsAccount(link, name)
    await joined.open(None)
    assert (await joined.state()).cap == Decimal("2.5")
    await NatsAccount(link, name).open(Decimal("2.50"))  # the same cap, written otherwise
    with pytest.raises(
        ConfigError,
        match=rf"{name}/budget .* already exists with a cap of \$2.50, "
        r"not \$3.00: join it without a cap",
    ):
        await NatsAccount(link, name).open(Decimal(3))
    with pytest.raises(ConfigError, match=r"no shared account at .*creates it with the cap"):
        await NatsAccount(link, bucket()).open(None)
    with pytest.raises(RuntimeError, match="open"):
        await NatsAccount(link, name).state()


async def test_of_processes_opening_at_once_exactly_one_creates_the_account(
    shared_nats_server: NatsServer,
) -> None:
    name, outcomes = bucket(), dict[int, str]()

    async def opener(i: int) -> None:  # a link each: separate connections, as processes have
        async with open_link(shared_nats_server.url) as link:
            try:
                await NatsAccount(link, name).open(Decimal(i + 1))
                outcomes[i] = "created"
            except ConfigError:
                outcomes[i] = "refused"

    async with trio.open_nursery() as nursery:
        for i in range(6):
            nursery.start_soon(opener, i)
    (winner,) = [i for i, outcome in outcomes.items() if outcome == "created"]
    async with open_link(shared_nats_server.url) as link:
        account = NatsAccount(link, name)
        await account.open(None)
        assert (await account.state()).cap == winner + 1


async def test_a_new_cap_restarts_the_refusal_count(link: Link) -> None:
    account = await new_nats_account(link, Decimal("0.01"))
    with pytest.raises(BudgetExhausted):
        await account.reserve("a", Decimal("0.02"))
    await account.set_cap(Decimal("0.05"))
    await account.reserve("a", Decimal("0.02"))
    state = await account.state()
    assert (state.cap, state.held, state.refused) == (Decimal("0.05"), Decimal("0.02"), 0)


# -- a run's gateway drawing on the account --------------------------------------------


def gateway_on(
    account: NatsAccount, provider: object, run: str
) -> tuple[Gateway, list[LedgerLine]]:
    lines: list[LedgerLine] = []
    gateway = Gateway(
        provider,  # type: ignore[arg-type]
        PRICES,
        Budget(Decimal(run)),
        sink=lines.append,
        pool=AccountShare(account, "run-1"),
    )
    return gateway, lines


async def test_a_call_settles_in_the_run_and_in_the_shared_account(link: Link) -> None:
    account = await new_nats_account(link, Decimal(1))
    gateway, lines = gateway_on(account, Answering(), run="1")
    await gateway.complete(llm_request(), round=1)
    state = await account.state()
    assert state.by_holder == {"run-1": Decimal("0.020")} == {"run-1": gateway.budget.spent}
    assert state.held == 0 and [line.outcome for line in lines] == ["ok"]


async def test_the_shared_cap_refuses_a_call_the_runs_cap_allows(link: Link) -> None:
    account = await new_nats_account(link, Decimal("0.02"), fix="raise --budget")
    gateway, lines = gateway_on(account, Answering(), run="10")
    with pytest.raises(BudgetExhausted, match=r"left of the shared .*raise --budget"):
        await gateway.complete(llm_request(max_tokens=100), round=1)
    assert [line.outcome for line in lines] == ["refused"]
    assert gateway.budget.reserved == 0 and (await account.state()).refused == 1


async def test_a_cancelled_call_gives_its_hold_back(link: Link) -> None:
    account = await new_nats_account(link, Decimal(1))
    gateway, lines = gateway_on(account, Hanging(), run="1")
    with trio.move_on_after(0.3):
        await gateway.complete(llm_request(), round=1)
    state = await account.state()
    assert (state.held, state.spent) == (0, 0)
    assert [line.outcome for line in lines] == ["error"]


async def test_calls_cancelled_at_any_moment_leave_nothing_held(link: Link) -> None:
    account = await new_nats_account(link, Decimal(1))
    gateway, lines = gateway_on(account, Answering(), run="1")
    for i in range(40):  # cancelled while reserving, while asking, while settling, or not at all
        with trio.move_on_after(i * 0.0002):
            await gateway.complete(llm_request(), round=1)
    state = await account.state()
    assert state.held == 0 and state.spent == gateway.budget.spent > 0
    assert {line.outcome for line in lines} >= {"ok"}


# -- leases ------------------------------------------------------------------------------


async def test_lapsed_leases_release_their_holds_and_nothing_else(link: Link) -> None:
    account = await new_nats_account(link, Decimal(1))
    unleased = await account.reserve("never-beats", Decimal("0.1"))
    await account.heartbeat("long", 60)
    short = await account.reserve("short", Decimal("0.2"))
    await account.settle(await account.reserve("short", Decimal("0.1")), Decimal("0.05"))
    await account.reserve("long", Decimal("0.3"))
    await account.heartbeat("short", 0.5)
    assert await account.release_lapsed() == []
    await trio.sleep(0.6)
    assert await account.release_lapsed() == ["short"]
    assert await account.release_lapsed() == []  # its lease is forgotten with its holds
    state = await account.state()
    assert (state.held, state.spent) == (Decimal("0.4"), Decimal("0.05"))  # nothing spent by it
    with pytest.raises(RuntimeError, match="lease lapsed"):
        await account.settle(short, Decimal("0.2"))  # it was alive after all: too late
    await account.release(unleased)
    assert (await account.state()).held == Decimal("0.3")


# -- several processes on one key --------------------------------------------------------

RESERVER = textwrap.dedent("""
    import json, random, sys
    from decimal import Decimal
    import trio
    from sopbus.bus import BudgetExhausted
    from sopbus.bus.nats import open_link
    from sopbus.bus.nats._account import NatsAccount

    url, name, holder, seed, tasks, mode = sys.argv[1:7]
    refusals = vanished = 0
    settled = []

    def blind(link):
        # The control: read, change, overwrite -- no compare-and-swap.
        async def swap_key(kv, key, change, **_):
            async def go(nc, js):
                new, result = change((await kv.get(key)).value)
                if new is not None:
                    await kv.put(key, new)
                return result
            return await link.call(go)
        link.swap_key = swap_key

    async def reserver(account, rng):
        global refusals, vanished
        while refusals < 20:
            amount = Decimal(rng.randint(1, 400)) / 10000
            try:
                hold = await account.reserve(holder, amount)
            except BudgetExhausted:
                refusals += 1
                continue
            await trio.sleep(rng.random() / 500)
            actual = amount * rng.randint(0, 4) / 4 if rng.random() < 0.8 else Decimal(0)
            try:
                await account.settle(hold, actual)
            except RuntimeError:  # the hold was lost by a blind write
                vanished += 1
                continue
            settled.append(str(actual))

    async def main():
        async with open_link(url) as link:
            if mode == "blind":
                blind(link)
            account = NatsAccount(link, name)
            await account.open(None)
            print("ready", flush=True)
            sys.stdin.readline()
            async with trio.open_nursery() as nursery:
                for i in range(int(tasks)):
                    nursery.start_soon(reserver, account, random.Random(int(seed) * 100 + i))
        print(json.dumps({"settled": settled, "vanished": vanished, "refusals": refusals}))

    trio.run(main)
""")


@dataclass
class Outcome:
    cap: Decimal
    reports: dict[str, Any]  # holder -> what its process reported
    samples: list[AccountState]  # the watcher's, in order
    final: AccountState


def run_reservers(
    server: NatsServer, tmp_path: Path, seed: int, mode: str, processes: int = 3, tasks: int = 16
) -> Outcome:
    """``processes`` reserver processes of ``tasks`` trio tasks each on one new account,
    started together, while this process samples the account's state."""
    rng = random.Random(seed)
    cap, name = Decimal(rng.randint(10, 25)) / 10, bucket()
    script = tmp_path / "reserver.py"
    script.write_text(RESERVER)

    async def watch() -> Outcome:
        async with open_link(server.url) as link:
            account = NatsAccount(link, name)
            await account.open(cap)
            holders = [f"p{seed}-{p}" for p in range(processes)]
            procs = [
                subprocess.Popen(
                    [
                        sys.executable,
                        str(script),
                        server.url,
                        name,
                        holder,
                        str(seed * 10 + p),
                        str(tasks),
                        mode,
                    ],
                    cwd=ROOT,
                    env=server_env(),
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    text=True,
                )
                for p, holder in enumerate(holders)
            ]
            try:
                for proc in procs:  # all connected and opened: start them together
                    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
                for proc in procs:
                    assert proc.stdin is not None
                    proc.stdin.write("go\n")
                    proc.stdin.flush()
                samples = []
                with trio.fail_after(120):
                    while any(proc.poll() is None for proc in procs):
                        samples.append(await account.state())
                        await trio.sleep(0.003)
                reports = {}
                for holder, proc in zip(holders, procs):
                    out, _ = proc.communicate(timeout=10)
                    assert proc.returncode == 0
                    reports[holder] = json.loads(out)
            finally:
                for proc in procs:
                    proc.kill()
                    proc.communicate()
            return Outcome(cap, reports, samples, await account.state())

    return trio.run(watch)


def violations(outcome: Outcome) -> list[str]:
    """What a correct shared account can never show (empty when all is well)."""
    found = []
    for i, sample in enumerate(outcome.samples):
        if sample.spent + sample.held > outcome.cap:
            found.append(
                f"sample {i}: {sample.spent} spent + {sample.held} held > cap {outcome.cap}"
            )
        if i and sample.spent < outcome.samples[i - 1].spent:
            found.append(f"sample {i}: spend went down to {sample.spent}")
    final, reported = outcome.final, Decimal(0)
    for holder, report in outcome.reports.items():
        theirs = sum(map(Decimal, report["settled"]), Decimal(0))
        reported += theirs
        if final.by_holder.get(holder, Decimal(0)) != theirs:
            found.append(
                f"{holder} settled {theirs}, the account says {final.by_holder.get(holder)}"
            )
        if report["vanished"]:
            found.append(f"{holder}: {report['vanished']} holds vanished before they were settled")
    refusals = sum(report["refusals"] for report in outcome.reports.values())
    if final.refused != refusals:
        found.append(f"{refusals} refusals met, the account counted {final.refused}")
    if final.spent != reported or final.spent > outcome.cap:
        found.append(f"final spend {final.spent} != the settled {reported} or > cap {outcome.cap}")
    if final.held:
        found.append(f"{final.held} still held after every call settled")
    return found


@pytest.mark.slow
def test_reservers_in_several_processes_never_pass_the_cap(
    shared_nats_server: NatsServer, tmp_path: Path
) -> None:
    outcome = run_reservers(shared_nats_server, tmp_path, seed=1, mode="cas")
    assert violations(outcome) == []
    assert len(outcome.samples) > 20  # the watcher saw the account while it changed
    assert all(report["refusals"] >= 20 for report in outcome.reports.values())  # all met the cap
    fullest = min(sample.left for sample in outcome.samples)
    assert fullest < Decimal("0.04")  # ... when it was full: within one reservation of the cap


@pytest.mark.slow
def test_the_control_without_compare_and_swap_fails_those_checks(
    shared_nats_server: NatsServer, tmp_path: Path
) -> None:
    outcome = run_reservers(shared_nats_server, tmp_path, seed=2, mode="blind")
    assert violations(outcome) != []  # lost updates: the checks above can fail


# -- a holder killed with money held -----------------------------------------------------

HOLDER = textwrap.dedent("""
    import sys
    from decimal import Decimal
    import trio
    from sopbus.bus.nats import open_link
    from sopbus.bus.nats._account import NatsAccount

    url, name, lease = sys.argv[1], sys.argv[2], float(sys.argv[3])

    async def main():
        async with open_link(url) as link:
            account = NatsAccount(link, name)
            await account.open(None)
            await account.heartbeat("doomed", lease)
            for amount in ("0.1", "0.2", "0.3"):
                await account.reserve("doomed", Decimal(amount))
            print("ready", flush=True)
            while True:
                await trio.sleep(lease / 8)
                await account.heartbeat("doomed", lease)

    trio.run(main)
""")


@pytest.mark.slow
async def test_a_killed_holders_holds_are_released_after_its_lease_and_not_before(
    shared_nats_server: NatsServer, link: Link, tmp_path: Path
) -> None:
    lease = 2.0
    account = await new_nats_account(link, Decimal(1))
    mine = await account.reserve("survivor", Decimal("0.15"))
    script = tmp_path / "holder.py"
    script.write_text(HOLDER)
    with subprocess.Popen(
        [sys.executable, str(script), shared_nats_server.url, account.bucket, str(lease)],
        cwd=ROOT,
        env=server_env(),
        stdout=subprocess.PIPE,
        text=True,
    ) as proc:
        try:
            assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
            alive_until = time.time() + lease * 1.25
            while time.time() < alive_until:  # its heartbeats keep it alive past its first lease
                assert await account.release_lapsed() == []
                await trio.sleep(0.1)
        finally:
            os.kill(proc.pid, signal.SIGKILL)
    assert (await account.state()).held == Decimal("0.75")
    until = await lease_of(link, account, "doomed")  # its last heartbeat's lease
    assert until > time.time()  # a lease was still running when it died
    while True:
        asked = time.time()
        released = await account.release_lapsed()
        answered = time.time()
        # The account reads its clock somewhere between asked and answered: a call that was
        # over before the lease ended must release nothing, and the one that releases must
        # have ended after it (asked alone may fall a moment before the lease's end).
        if answered < until:
            assert released == [], "released before the lease ended"
        if released:
            break
        assert asked < until + 3, "the lease lapsed and the holds stayed"
        await trio.sleep(0.05)
    assert released == ["doomed"] and answered >= until  # after the lease, not before
    state = await account.state()
    assert (state.held, state.spent) == (
        Decimal("0.15"),
        0,
    )  # the survivor's hold alone, nothing spent
    await account.settle(mine, Decimal("0.1"))
    assert (await account.state()).by_holder == {"survivor": Decimal("0.1")}


async def lease_of(link: Link, account: NatsAccount, holder: str) -> float:
    """A holder's lease as the account stores it (read past the protocol, for the test)."""

    async def get(nc: Any, js: Any) -> bytes:
        kv = await js.key_value(account.bucket)
        return bytes((await kv.get(account.key)).value)

    return float(json.loads(await link.call(get))["leases"][holder])
