"""A population split into shards played by `sopbus worker` processes over NATS (issue 37),
as a user runs it: a real nats-server, the workers and `sopbus run --bus` as subprocesses.

Two workers each play one range of the players; the run's summary (the population's round
sums), its messages and its answered calls are those of the same game in one process. The
run's one cap holds across the shards and the detail says how many agents acted in the
round it ran out in; a shard whose worker is killed mid-round is played again by a standby
worker, its answers given again, not paid again.
"""

from __future__ import annotations

import json
import signal
import subprocess
from collections import Counter
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import trio
from test_nats_crash import events, holder, ledger, wait_for
from test_nats_run import finish, run_dir_of, sopbus, workers

from sopbus.cli._cmd_diff import first_difference, messages
from support.nats_server import NatsServer
from support.populations import small_game

__all__ = ["workers"]  # a fixture of test_nats_run, used here

SHARDS = ("Player_shard0", "Player_shard1")


def game(tmp_path: Path, *, latency_ms: int = 0, **kwargs: Any) -> Path:
    """The small game, its runs in ``tmp_path/runs``; ``latency_ms`` slows every call."""
    path = small_game(tmp_path, **kwargs)
    if latency_ms:
        text = path.read_text().replace(
            "max_tokens = 32", f"max_tokens = 32\nlatency_ms = {latency_ms}"
        )
        path.write_text(text)
    return path


def one_process(tmp_path: Path, **kwargs: Any) -> Path:
    folder = tmp_path / "one"
    folder.mkdir()
    code, out = finish(sopbus("run", str(game(folder, **kwargs)), "--quiet", cwd=folder))
    assert code == 0, out
    return run_dir_of(folder / "runs")


def sharded(url: str, tmp_path: Path, **kwargs: Any) -> subprocess.Popen[bytes]:
    """`sopbus run` of the game with its players in two shards, waiting for workers."""
    folder = tmp_path / "sharded"
    folder.mkdir()
    return sopbus(
        "run",
        str(game(folder, **kwargs)),
        "--quiet",
        "--bus",
        url,
        "--set",
        "populations.Player.shards=2",
        "--wait-workers",
        "30",
        cwd=folder,
    )


def summary(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "summary.json").read_text())


def answered(run_dir: Path) -> Counter[tuple[int, str]]:
    """Each answered call's (round, agent): a batch line (one process) counts its calls."""
    out: Counter[tuple[int, str]] = Counter()
    for x in ledger(run_dir):
        if x["outcome"] != "ok":
            continue
        batch = x.get("batch")
        agents = [f"{x['role']}-{i}" for i in batch["agents"]] if batch else [x["role"]]
        out.update((x["round"], agent) for agent in agents)
    return out


def test_two_workers_play_the_shards_and_the_run_sums_as_in_one_process(
    shared_nats_server: NatsServer,
    workers: Callable[..., subprocess.Popen[bytes]],
    tmp_path: Path,
) -> None:
    for name in ("w1", "w2"):
        workers("--roles", ",".join(SHARDS), "--id", name)
    code, out = finish(sharded(shared_nats_server.url, tmp_path, count=30, rounds=3), timeout=120)
    assert code == 0, out
    run_dir = run_dir_of(tmp_path / "sharded" / "runs")
    local = one_process(tmp_path, count=30, rounds=3)

    rounds = summary(run_dir)["populations"]
    assert rounds == summary(local)["populations"]
    assert [r["acted"] for r in rounds["Player"]] == [30, 30, 30]
    assert first_difference(messages(run_dir), messages(local)) is None
    # every agent's call of every round in the run's one ledger, once
    assert answered(run_dir) == answered(local) and len(answered(run_dir)) == 90
    assert summary(run_dir)["total_usd"] == summary(local)["total_usd"]
    # each worker played one shard: its calls were drawn on the run's account as its holder
    state = trio.run(account_state, shared_nats_server.url, run_dir.name)
    assert state.by_holder["w1"] > 0 and state.by_holder["w2"] > 0
    assert state.spent == Decimal(summary(run_dir)["total_usd"]) and state.held == 0
    code, out = finish(sopbus("verify", str(run_dir), cwd=tmp_path))
    assert code == 0 and "intact" in out, out


def test_the_cap_stops_every_shard_and_says_how_many_agents_acted(
    shared_nats_server: NatsServer,
    workers: Callable[..., subprocess.Popen[bytes]],
    tmp_path: Path,
) -> None:
    # The cap covers one round's worst case (about $0.0079 for 20 agents) but not the 40
    # rounds a long game spends at the actual price (about $0.00056 a round).
    for name in ("w1", "w2"):
        workers("--roles", ",".join(SHARDS), "--id", name)
    proc = sharded(shared_nats_server.url, tmp_path, rounds=40, budget="0.0085")
    code, out = finish(proc, timeout=120)
    assert code == 3, out
    run_dir = run_dir_of(tmp_path / "sharded" / "runs")
    said = summary(run_dir)
    assert said["status"] == "budget_exhausted"
    last = said["populations"]["Player"][-1]
    assert (
        f"{last['acted'] + last['failed']} of 20 agents acted in round {last['round']}"
        in (said["detail"])
    )
    assert "before the cap" in said["detail"] and "next call needs up to" in said["detail"]
    spent = sum((Decimal(x["cost_usd"]) for x in ledger(run_dir)), Decimal(0))
    assert spent == Decimal(said["total_usd"]) <= Decimal("0.0085")
    state = trio.run(account_state, shared_nats_server.url, run_dir.name)
    assert state.spent == spent and state.held == 0 and state.refused >= 1
    refused = [x for x in ledger(run_dir) if x["outcome"] == "refused"]
    assert refused and all(x["role"].startswith("Player-") for x in refused)


def test_a_shard_whose_worker_is_killed_mid_round_is_played_again_by_a_standby(
    shared_nats_server: NatsServer,
    workers: Callable[..., subprocess.Popen[bytes]],
    tmp_path: Path,
) -> None:
    kwargs: dict[str, Any] = {"count": 60, "latency_ms": 100}
    hosts = {
        name: workers("--roles", ",".join(SHARDS), "--lease", "1.5", "--id", name)
        for name in ("w1", "w2", "w3")
    }
    coordinator = sharded(shared_nats_server.url, tmp_path, **kwargs)
    runs = tmp_path / "sharded" / "runs"
    run_dir = wait_for(lambda: runs.is_dir() and next(iter(runs.iterdir()), None), coordinator)
    wait_for(lambda: mid_round(run_dir, range(30)), coordinator)
    killed = holder(shared_nats_server.url, run_dir.name, SHARDS[0])
    assert killed in hosts
    hosts[killed].send_signal(signal.SIGKILL)
    code, out = finish(coordinator, timeout=120)
    assert code == 0, out
    local = one_process(tmp_path, **kwargs)
    assert summary(run_dir)["populations"] == summary(local)["populations"]
    assert first_difference(messages(run_dir), messages(local)) is None
    assert holder(shared_nats_server.url, run_dir.name, SHARDS[0]) != killed
    # every agent answered once a round: the dead worker's answers were given again, not
    # asked again; its calls in flight are ledgered lost
    assert answered(run_dir) == answered(local)
    lost = [x for x in ledger(run_dir) if x["outcome"] == "lost"]
    assert all(int(x["role"].rsplit("-", 1)[1]) < 30 for x in lost)
    spent = Decimal(summary(run_dir)["total_usd"])
    paid_lost = sum((Decimal(x["cost_usd"]) for x in lost), Decimal(0))
    assert spent == Decimal(summary(local)["total_usd"]) + paid_lost


def mid_round(run_dir: Path, agents: range) -> bool:
    """Some of shard 0's agents have answered in round 1, and the round is not over."""
    seen = events(run_dir)
    called = sum(
        e.get("kind") == "llm_called"
        and e["round"] == 1
        and e["role"].startswith("Player-")
        and int(e["role"].rsplit("-", 1)[1]) in agents
        for e in seen
    )
    over = any(
        e.get("kind") == "message_published" and e["message"].get("sent_from") == "Player"
        for e in seen
    )
    return called >= 5 and not over


async def account_state(url: str, run_id: str) -> Any:
    from sopbus.bus.nats import NatsAccount, open_link
    from sopbus.bus.nats._claims import bucket_name

    async with open_link(url) as link:
        account = NatsAccount(link, bucket_name(run_id))
        await account.open(None)
        return await account.state()


def test_an_unsplit_population_plays_in_the_run_process_over_nats(
    shared_nats_server: NatsServer, tmp_path: Path
) -> None:
    folder = tmp_path / "unsplit"
    folder.mkdir()
    done = sopbus(
        "run",
        str(game(folder, count=12)),
        "--quiet",
        "--bus",
        shared_nats_server.url,
        "--wait-workers",
        "0.3",
        cwd=folder,
    )
    code, out = finish(done)
    assert code == 0, out
    run_dir = run_dir_of(folder / "runs")
    local = one_process(tmp_path, count=12)
    assert summary(run_dir)["populations"] == summary(local)["populations"]
    assert first_difference(messages(run_dir), messages(local)) is None
