"""``Watch`` in a role's ``watch``: what the role holds, how entries merge, and that a
Python team says it to its scenario file as ``{ action = ..., from = [...] }``."""

from __future__ import annotations

import tomllib

import pytest

import sopbus
from sopbus import Action, Role, Watch

POST = Action("Post", "Write a post.")


def test_a_role_holds_every_watched_action_and_the_senders_of_some() -> None:
    bob = Role("Bob", watch=["Kickoff", Watch(POST, senders=["Alice"]), Watch("Post", ["Carol"])])
    assert bob.watch == {"Kickoff", "Post"}
    assert bob.watch_from == {"Post": frozenset({"Alice", "Carol"})}
    assert bob.watch_entries == ("Kickoff", Watch("Post", ["Alice", "Carol"]))
    assert bob.watches("Post", "Alice") and not bob.watches("Post", "Eve")
    assert bob.watches("Kickoff", "Eve")


def test_a_plain_entry_of_the_action_wins() -> None:
    carol = Role("Carol", watch=[Watch("Post", ["Alice"]), "Post"])
    assert carol.watch_from == {} and carol.watches("Post", "Eve")


@pytest.mark.parametrize("senders", ["Alice", 3])
def test_senders_must_be_a_list_of_names(senders: object) -> None:
    with pytest.raises(sopbus.ConfigError, match="expected a list of role names"):
        Watch("Post", senders)  # type: ignore[arg-type]


def test_a_python_team_writes_the_entry_as_its_file_would() -> None:
    team = sopbus.Team(
        name="social",
        roles=[
            Role("Alice", watch=["UserRequirement"], actions=[POST]),
            Role("Bob", watch=["UserRequirement", Watch("Post", ["Alice"])], actions=[POST]),
        ],
    )
    roles = tomllib.loads(team.to_toml())["roles"]
    assert roles[1]["watch"] == ["UserRequirement", {"action": "Post", "from": ["Alice"]}]


def test_a_python_team_whose_sender_is_no_role_is_refused_with_close_names() -> None:
    with pytest.raises(sopbus.ConfigError) as err:
        sopbus.Team(
            name="social",
            roles=[
                Role("Alice", watch=["UserRequirement"], actions=[POST]),
                Role("Bob", watch=[Watch("Post", ["Alcie"])], actions=[POST]),
            ],
        )
    assert "'Alcie'" in str(err.value) and "`Alice`" in str(err.value)
    assert "watch[0].from[0]" in str(err.value)
