"""A rumour on a follower graph (the shape of OASIS's information-spread runs).

``[sop]`` options::

    post = "..."          # the rumour: the text of the one seeded post
    seed = "Person-0"     # the agent that posts it (default: the population's first agent)

The scenario's population (``[[populations]]`` with a ``graph``, watching ``Post`` and
taking ``React``) holds the agents and whom each follows. The seed agent posts the rumour;
the post reaches its followers' feeds only. Each round the agents with new posts in their
feeds (or a seeded share, ``active``) read the newest ones and ignore, like or repost; a
repost reaches the reposter's own followers the next round. The run ends when a round
makes no new post (idle) or at ``max_rounds``; the summary keeps, per round, the choices
and the agents reached and adopting (the adoption curve). The verdict: the post was read.
"""

from __future__ import annotations

from typing import Literal

import msgspec
from pydantic import BaseModel, Field

from sopbus.bus import ConfigError, Message, RunRecord, Scenario, Verdict
from sopbus.bus.scenario import PopulationSpec
from sopbus.roles import Action

from .. import _sop
from .._sop import SopContext, Team

POST = "Post"
REACT = "React"
RUMOUR = (
    "BREAKING: the city will close every public library next month to save money. "
    "Share before it is deleted!"
)


class RumorOptions(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    post: str = RUMOUR
    seed: str | None = None


class Post(Action):
    """A post to one's followers. The seeded post and the reposts are made by the bus, not
    asked of a model; the action names what a population on a graph watches."""

    instruction = "Write a short post for the people who follow you."


class React(Action):
    """What an agent does with its feed: ignore the newest post, like it, or repost it."""

    instruction = (
        "Above is your feed: the newest posts of the people you follow. Decide what you do "
        "with the newest post, as your persona would: ignore it, like it, or repost it to "
        "the people who follow you."
    )
    default_max_tokens = 32

    class Output(BaseModel):
        choice: Literal["ignore", "like", "repost"] = Field(
            description="ignore the post, like it, or repost it to your followers"
        )


def build(ctx: SopContext) -> Team:
    o = ctx.options_as(RumorOptions)
    for action in (Post, React):  # the scenario's registry: its population takes React
        if action.name not in ctx.registry.actions:
            ctx.registry.add_action(action)
    pop = _population(ctx.scenario)
    seed = o.seed if o.seed is not None else f"{pop.name}-0"
    _check_seed(ctx.scenario, pop, seed)
    first = Message(cause_by=POST, sent_from=seed, content=o.post)
    return Team(roles=[], seed=[first], verdict=spread)


def _population(scenario: Scenario) -> PopulationSpec:
    graphed = [p for p in scenario.populations if p.graph is not None]
    if not graphed:
        raise ConfigError(
            f"{scenario.path}: the SOP rumor_spread needs a population on a follower graph - "
            f'at `$.populations`: add [[populations]] with graph = {{ generator = "small_world", '
            f'k = 10, p = 0.1 }}, watch = ["{POST}"] and actions = ["{REACT}"]'
        )
    return graphed[0]


def _check_seed(scenario: Scenario, pop: PopulationSpec, seed: str) -> None:
    prefix, _, number = seed.rpartition("-")
    if prefix == pop.name and number.isdigit() and str(int(number)) == number:
        if int(number) < pop.count:
            return
    raise ConfigError(
        f"{scenario.path}: [sop] seed names {seed!r}, which is no agent of {pop.name} - at "
        f"`$.sop.seed`: name one of {pop.name}-0 ... {pop.name}-{pop.count - 1}"
    )


def spread(record: RunRecord) -> Verdict:
    """The post was read; the reason says how far it spread."""
    sums = [m.payload for m in record.of(REACT) if isinstance(m.payload, dict)]
    if not sums:
        return Verdict(
            passed=False, reason=f"nobody read the post (the run ended: {record.end_reason})"
        )
    last = sums[-1]
    return Verdict(
        passed=True,
        reason=f"{len(sums)} rounds read; the post reached {last['reached']} agents and "
        f"{last['adopters']} adopted it ({last['adoption']:.1%})",
    )


SOP = _sop.SOP(
    name="rumor_spread",
    description="A rumour on a follower graph: one seeded post, agents that ignore, like or "
    "repost what their feeds show ([[populations]] with a graph), the adoption curve",
    build=build,
)
