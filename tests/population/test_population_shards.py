"""A population's shards in one process (no NATS): each plays its range of the agents that
act, and the shards' answers merged are the round of the whole population. The split is
refused where it cannot run (no --bus) or makes an empty shard."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
import trio

from sopbus.bus import (
    Completion,
    ConfigError,
    LLMRequest,
    Message,
    Turn,
    Usage,
    load_scenario,
)
from sopbus.bus.population import RoundTally
from sopbus.roles import PopulationShard, shard_range, shard_tally
from sopbus.sops import build_team
from support.cli import sopbus
from support.populations import small_game
from support.scripted_gateway import InOrder


class Guesses(InOrder):
    """A gateway whose agent ``i`` guesses ``i % 101`` (a float for odd ones)."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def complete(self, request: LLMRequest, *, round: int, attempt: int = 1) -> Completion:
        self.asked.append(request.role)
        i = int(request.role.rsplit("-", 1)[1])
        guess = i % 101 if i % 2 == 0 else (i % 100) + 0.1
        text = msgspec.json.encode({"guess": guess}).decode()
        return Completion(text=text, usage=Usage(10, 2), model="m", provider="p")


NEWS = [
    Message(cause_by="AnnounceRound", sent_from="Host", content="go"),
    Message(cause_by="Note", sent_from="Host", send_to=("Player-40",)),
]


def _turn(gateway: Guesses) -> Turn:
    return Turn(run_id="r", round=1, role="Player", gateway=gateway)


@pytest.mark.parametrize("shards", [2, 3, 7])
def test_the_shards_merged_are_the_whole_round(tmp_path: Path, shards: int) -> None:
    path = small_game(tmp_path, count=45, extra="active = 0.5\n")
    whole_gateway, part_gateway = Guesses(), Guesses()
    (whole,) = trio.run(
        build_team(load_scenario(path)).populations[0].step, NEWS, _turn(whole_gateway)
    )
    population = build_team(load_scenario(path)).populations[0]
    merged = RoundTally(0, *population.bounds)
    for k in range(shards):
        shard = PopulationShard(population, k, shards)
        before = len(part_gateway.asked)
        (answer,) = trio.run(shard.step, NEWS, _turn(part_gateway))
        tally, stopped = shard_tally([answer], shard.name)
        mine = {f"Player-{i}" for i in shard_range(45, k, shards)}
        assert stopped is None and set(part_gateway.asked[before:]) <= mine
        if tally is None:  # none of its agents acts this round
            continue
        merged.merge(tally)
    assert merged.as_dict(1) | {"field": "guess"} == whole.payload
    assert sorted(part_gateway.asked) == sorted(whole_gateway.asked)  # each agent once


def test_shard_ranges_cover_the_agents_once() -> None:
    for count, shards in [(10, 3), (7, 7), (100_000, 2), (5, 1)]:
        ranges = [shard_range(count, k, shards) for k in range(shards)]
        assert [i for r in ranges for i in r] == list(range(count))
        assert max(map(len, ranges)) - min(map(len, ranges)) <= 1


def test_more_shards_than_agents_is_refused_with_the_field(tmp_path: Path) -> None:
    path = small_game(tmp_path, count=3, extra="shards = 4\n")
    with pytest.raises(ConfigError, match=r"\$\.populations\[0\]\.shards: 4 shards of 3 agents"):
        build_team(load_scenario(path))


def test_shards_without_a_bus_exit_2_saying_to_give_one(tmp_path: Path) -> None:
    done = sopbus("run", small_game(tmp_path), "--set", "populations.Player.shards=2", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "$.populations[0].shards" in done.stderr and "--bus nats://" in done.stderr
    assert not (tmp_path / "runs").exists()
