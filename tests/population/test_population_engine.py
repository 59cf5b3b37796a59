"""A population on the bus: one member, agents resolved by address, seeded activation."""

from __future__ import annotations

from pathlib import Path

from sopbus.bus import Environment, Message, load_scenario
from sopbus.bus.population import acting
from sopbus.sops import build_team
from support.populations import small_game


def _env(tmp_path: Path, count: int = 20) -> Environment:
    team = build_team(load_scenario(small_game(tmp_path, count=count)))
    env = Environment("r")
    env.add_all([*team.roles, *team.populations])
    return env


def test_an_agent_is_reached_by_its_address_without_an_entry_of_its_own(tmp_path: Path) -> None:
    env = _env(tmp_path)
    assert env.resolve("Player-17") == "Player" and env.resolve("Player-0") == "Player"
    for bad in ("Player-20", "Player-017", "Player-", "Player--1", "Playe-1"):
        assert env.resolve(bad) is None, bad
    direct = env.publish(Message(cause_by="Note", sent_from="Host", send_to=("Player-3",)))
    wrong = env.publish(Message(cause_by="Note", sent_from="Host", send_to=("Player-20",)))
    assert env.recipients(direct) == ("Player",) and env.recipients(wrong) == ()
    assert env.undelivered == 1


def test_a_broadcast_is_stored_once_for_the_whole_population(tmp_path: Path) -> None:
    env = _env(tmp_path, count=5000)
    env.publish(Message(cause_by="AnnounceRound", sent_from="Host", content="go"))
    assert env.deliveries == 1 and env.with_news() == ["Player"]
    assert len(env.take("Player")) == 1


def test_an_agent_never_gets_its_own_message(tmp_path: Path) -> None:
    team = build_team(load_scenario(small_game(tmp_path)))
    pop = team.populations[0]
    news = [Message(cause_by="Note", sent_from="Player-3", send_to=("Player-3", "Player-4"))]
    shared, direct = pop._sorted_mail(news)
    assert shared == [] and sorted(direct) == [4]


def test_activation_is_seeded_and_the_same_on_every_draw() -> None:
    one = acting(range(1000), 0.1, seed=7, name="Player", round=3)
    assert list(one) == list(acting(range(1000), 0.1, seed=7, name="Player", round=3))
    assert len(one) == 100 and list(one) == sorted(one)
    assert list(one) != list(acting(range(1000), 0.1, seed=7, name="Player", round=4))
    assert list(one) != list(acting(range(1000), 0.1, seed=8, name="Player", round=3))
    assert list(acting([3, 9], None, seed=0, name="P", round=1)) == [3, 9]
    assert len(acting(range(10), 0.01, seed=0, name="P", round=1)) == 1  # at least one


def test_only_agents_with_mail_act_and_only_a_share_with_active(tmp_path: Path) -> None:
    import trio

    from sopbus.bus import Turn

    team = build_team(load_scenario(small_game(tmp_path, count=40, extra="active = 0.25\n")))
    pop = team.populations[0]
    asked: list[str] = []

    class Gateway:
        async def complete(self, request, *, round, attempt=1):  # type: ignore[no-untyped-def]
            from sopbus.bus import Completion, Usage

            asked.append(request.role)
            return Completion(text='{"guess": 30}', usage=Usage(10, 2), model="m", provider="p")

        async def complete_many(self, requests, *, round, crowd, agents, concurrency=4):  # type: ignore[no-untyped-def]
            from sopbus.bus import Answers

            return Answers([await self.complete(r, round=round) for r in requests])

    turn = Turn(run_id="r", round=1, role="Player", gateway=Gateway())
    news = [Message(cause_by="AnnounceRound", sent_from="Host", content="go")]
    (out,) = trio.run(pop.step, news, turn)
    assert len(asked) == 10 and len(set(asked)) == 10
    assert out.payload["acted"] == 10 and out.payload["mean"] == 30.0
    asked.clear()
    direct = [Message(cause_by="Note", sent_from="Host", send_to=("Player-5",))]
    trio.run(pop.step, direct, Turn(run_id="r", round=2, role="Player", gateway=Gateway()))
    assert asked == ["Player-5"]  # one agent has mail: a share of one is that one
    assert pop.table.last[5] == 30.0 and pop.table.turns[5] >= 1


def test_each_agent_prompt_carries_its_own_attributes(tmp_path: Path) -> None:
    team = build_team(load_scenario(small_game(tmp_path)))
    pop = team.populations[0]
    for i in (0, 7):
        system = pop._prompt(i, [], ())[0].content
        attributes = pop.table.attributes(i)
        assert system == (
            f"You are Player-{i}. You are {attributes['persona']}, {attributes['age']} years old."
        )


def test_a_profile_cannot_reach_into_an_attribute(tmp_path: Path) -> None:
    from sopbus.bus.scenario import fill_profile

    assert fill_profile("{a.__class__} {a} {b}", {"a": "x"}) == "{a.__class__} x {b}"
