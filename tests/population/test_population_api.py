"""``sopbus.Team`` takes populations as a scenario file's ``[[populations]]`` tables."""

from __future__ import annotations

from pathlib import Path

import sopbus


def test_a_team_in_python_runs_a_population(tmp_path: Path) -> None:
    team = sopbus.Team(
        name="guessers",
        sop="guess_two_thirds",
        sop_options={"rounds": 1},
        max_rounds=2,
        runs_dir=tmp_path,
        populations=[
            {
                "name": "Player",
                "count": 5,
                "watch": ["AnnounceRound"],
                "actions": ["Guess"],
                "profile": "You are {persona}.",
                "attributes": {"persona": ["a saver", "a gambler"]},
            }
        ],
    )
    outcome = team.run()
    assert outcome.summary.populations is not None
    (only,) = outcome.summary.populations["Player"]
    assert only["acted"] == 5 and outcome.summary.llm_calls == 5
    assert "[[populations]]" in team.to_toml()
