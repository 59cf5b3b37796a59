"""``[[populations]]`` in a scenario file: the schema, its checks, and ``--set`` over it."""

from __future__ import annotations

from pathlib import Path

import pytest

from sopbus.bus import ConfigError, load_scenario
from sopbus.bus.store import with_settings
from sopbus.sops import build_team
from support.populations import small_game


def test_the_shipped_game_declares_one_population(tmp_path: Path) -> None:
    scenario = load_scenario(small_game(tmp_path))
    (pop,) = scenario.populations
    assert (pop.name, pop.count, pop.watch, pop.actions) == (
        "Player",
        20,
        ("AnnounceRound",),
        ("Guess",),
    )
    team = build_team(scenario)
    assert [p.name for p in team.populations] == ["Player"] and team.populations[0].size == 20


def test_set_names_a_population_by_its_name(tmp_path: Path) -> None:
    scenario = load_scenario(small_game(tmp_path))
    changed = with_settings(scenario, ("populations.Player.count=1000000",), at_round=0)
    assert changed.populations[0].count == 1_000_000
    with pytest.raises(ConfigError, match=r"no entry named 'Playr'.*did you mean 'Player'"):
        with_settings(scenario, ("populations.Playr.count=5",), at_round=0)


@pytest.mark.parametrize("active", ["0", "1.5", "-0.1"])
def test_active_outside_zero_one_is_refused_with_its_path(tmp_path: Path, active: str) -> None:
    path = small_game(tmp_path, extra=f"active = {active}\n")
    with pytest.raises(ConfigError) as caught:
        load_scenario(path)
    text = str(caught.value)
    assert str(path) in text and "$.populations[0].active" in text and "outside (0, 1]" in text


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ('"int 80..18"', "low bound is above"),
        ('"integer 1..2"', "is not a spec"),
        ("[]", "empty list of choices"),
    ],
)
def test_a_bad_attribute_spec_names_its_place(tmp_path: Path, spec: str, says: str) -> None:
    path = small_game(tmp_path)
    text = path.read_text().replace('age = "int 18..80"', f"age = {spec}")
    path.write_text(text)
    with pytest.raises(ConfigError, match=rf"{says}.*\$\.populations\[0\]\.attributes\.age"):
        load_scenario(path)


def test_a_profile_field_that_is_no_attribute_is_refused(tmp_path: Path) -> None:
    path = small_game(tmp_path)
    path.write_text(path.read_text().replace("{age} years", "{height} cm"))
    with pytest.raises(ConfigError, match=r"profile.*\{height\}.*no attribute"):
        load_scenario(path)


def test_a_watched_action_that_does_not_exist_gets_a_suggestion(tmp_path: Path) -> None:
    path = small_game(tmp_path)
    path.write_text(
        path.read_text().replace('watch = ["AnnounceRound"]', 'watch = ["AnnounceRond"]')
    )
    with pytest.raises(ConfigError, match=r"populations\[0\]\.watch\[0\].*AnnounceRound"):
        build_team(load_scenario(path))


def test_attributes_are_drawn_the_same_for_the_same_seed(tmp_path: Path) -> None:
    one = build_team(load_scenario(small_game(tmp_path))).populations[0].table
    two = build_team(load_scenario(small_game(tmp_path))).populations[0].table
    assert [one.attributes(i) for i in range(20)] == [two.attributes(i) for i in range(20)]
    assert {one.attributes(i)["persona"] for i in range(20)} > {one.attributes(0)["persona"]}
    assert all(18 <= one.attributes(i)["age"] <= 80 for i in range(20))
