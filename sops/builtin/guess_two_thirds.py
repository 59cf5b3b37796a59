"""Guess two thirds of the average (the game AgentScope ran with a million agents).

``[sop]`` options::

    rounds = 3      # games the host announces

A ``Host`` announces a round (``AnnounceRound``); every agent of the scenario's population
(``[[populations]]``, watching ``AnnounceRound`` and taking ``Guess``) guesses a whole
number from 0 to 100 from its persona and the last result; the population publishes the
round's sums; the host publishes two thirds of the average as the next announcement's
result. The run ends when the host has announced the last result. The verdict: every game
round had guesses.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec
from pydantic import BaseModel, Field

from sopbus.bus import Message, RunRecord, Verdict
from sopbus.roles import Action, ActionContext, ActionResult, Role

from .. import _sop
from .._sop import SopContext, Team

ANNOUNCE = "AnnounceRound"
GUESS = "Guess"


class GuessOptions(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    rounds: int = 3


class Guess(Action):
    """One agent's guess: a whole number from 0 to 100."""

    instruction = (
        "The game: everyone guesses a whole number from 0 to 100; whoever is closest to two "
        "thirds of the average of all guesses wins. Think as your persona would, use the last "
        "result if there is one, and give your guess."
    )

    class Output(BaseModel):
        guess: int = Field(ge=0, le=100, description="your guess, 0 to 100")


class AnnounceRound(Action):
    """The host's announcement: the next game round, with the last one's result. No model
    is asked: two thirds of an average is arithmetic."""

    instruction = "Announce the next round of the game with the last result."

    def __init__(self, rounds: int = 3):
        super().__init__()
        self.rounds = rounds

    async def run(self, ctx: ActionContext) -> ActionResult:
        sums = [m.payload for m in ctx.news if m.cause_by == GUESS and isinstance(m.payload, dict)]
        game = len(ctx.role.memory.by_cause(GUESS))
        return announcement(game, sums[-1] if sums else None, self.rounds)


def announcement(game: int, sums: dict[str, Any] | None, rounds: int) -> ActionResult:
    """The announcement after ``game`` rounds were guessed, ``sums`` the last one's."""
    mean = sums.get("mean") if sums else None
    target = None if mean is None else round(mean * 2 / 3, 4)
    done = game >= rounds
    said = (
        f"Round {game}: the average guess was {mean}, two thirds of it is {target}."
        if target is not None
        else ""
    )
    nxt = "The game is over." if done else f"Round {game + 1}: guess now."
    payload = {"game": game, "mean": mean, "target": target, "over": done}
    return ActionResult(content=f"{said} {nxt}".strip(), payload=payload)


class Host(Role):
    """Announces the rounds and their results."""

    profile = "Game host"
    goal = "Run the game and publish two thirds of each round's average"
    watch = (GUESS,)
    actions = (AnnounceRound,)


def over(published: Sequence[Message], round: int) -> str | None:
    """The stop condition: the host announced the last result."""
    for m in published:
        if m.cause_by == ANNOUNCE and isinstance(m.payload, dict) and m.payload.get("over"):
            return f"the host announced the result of the last of {m.payload['game']} rounds"
    return None


def build(ctx: SopContext) -> Team:
    o = ctx.options_as(GuessOptions)
    for action in (Guess, AnnounceRound):  # the scenario's registry: its population takes Guess
        if action.name not in ctx.registry.actions:
            ctx.registry.add_action(action)
    host = Host(
        name="Host",
        actions=[AnnounceRound(o.rounds)],
        llm_defaults=ctx.llm_defaults,
        registry=ctx.registry,
    )
    first = announcement(0, None, o.rounds)
    seed = Message(
        cause_by=ANNOUNCE, sent_from="Host", content=first.content, payload=first.payload
    )
    bounds = {"Host": f"the game ends after rounds = {o.rounds}"}
    return Team(roles=[host], seed=[seed], stop=over, verdict=guessed, bounds=bounds)


def guessed(record: RunRecord) -> Verdict:
    """Every round the host announced got guesses: at least one agent's answer fitted the
    schema (a round whose every answer failed, say cut at ``max_tokens``, is no game)."""
    sums = [m.payload for m in record.of(GUESS) if isinstance(m.payload, dict)]
    if not sums:
        return Verdict(passed=False, reason=f"nobody guessed (the run ended: {record.end_reason})")
    empty = [s for s in sums if not s.get("acted")]
    if empty:
        s = empty[0]
        return Verdict(
            passed=False,
            reason=f"{len(empty)} of {len(sums)} rounds had no valid guess (round {s.get('round')}: "
            f"{s.get('failed')} of {s.get('woke')} answers failed)",
        )
    means = ", ".join(str(s.get("mean")) for s in sums)
    return Verdict(passed=True, reason=f"{len(sums)} rounds guessed; mean guesses {means}")


SOP = _sop.SOP(
    name="guess_two_thirds",
    description="Guess two thirds of the average: a host and a population of players "
    "([[populations]]), rounds of guesses and results",
    build=build,
)
