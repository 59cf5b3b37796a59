"""The price of a population before a call: the worst case of one round and of the run.

Agents x attempts x the worst cost of one attempt (its prompt bounded from above as the
gateway bounds it, plus ``max_tokens`` of answer, each repair quoting a whole answer more),
at the model's price. ``validate`` and ``run`` state it; ``run`` does not start when the
cap cannot cover one round.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, NamedTuple

from sopbus.bus import ConfigError, Scenario
from sopbus.bus.llm import prompt_upper_bound
from sopbus.bus.money import PriceBook, money

_REPAIR_TOKENS = 256  # a repair's own words besides the quoted answer


class Worst(NamedTuple):
    """One population's worst case: agents per round, attempts per agent, one attempt's
    worst cost, and the totals; ``first_agents`` and ``first_usd`` are its first round's
    (fewer on a follower graph, where only the seeded posts' readers act)."""

    name: str
    agents: int
    attempts: int
    call_usd: Decimal
    round_usd: Decimal
    run_usd: Decimal
    first_agents: int
    first_usd: Decimal


def worst_cases(scenario: Scenario, team: Any, prices: PriceBook) -> list[Worst]:
    """The worst case of each population of ``team`` (at most ``max_rounds`` rounds)."""
    out = []
    for pop in team.populations:
        request = pop.sample_request()
        price = prices.price(request.model)
        bound, answer = prompt_upper_bound(request), request.max_tokens
        attempts = 1 + pop.action.max_repairs
        per_agent = sum(
            (
                price.worst_case(bound + k * (answer + _REPAIR_TOKENS), answer)
                for k in range(attempts)
            ),
            Decimal(0),
        )
        agents, first = pop.woken(), pop.first_woken(getattr(team, "seed", ()))
        one_round = per_agent * agents
        out.append(
            Worst(
                pop.name,
                agents,
                attempts,
                per_agent,
                one_round,
                one_round * scenario.run.max_rounds,
                first,
                per_agent * first,
            )
        )
    return out


def worst_lines(worst: list[Worst], budget: Decimal) -> list[str]:
    """What ``validate`` and ``run`` say of the worst cases."""
    return [
        f"population {w.name}: worst case {money(w.round_usd)} a round ({w.agents:,} agents x "
        f"{w.attempts} attempts x {money(w.call_usd / w.attempts)}), {money(w.run_usd)} for the "
        f"whole run{_first(w)}; the cap is {money(budget)}"
        for w in worst
    ]


def _first(w: Worst) -> str:
    if w.first_agents == w.agents:
        return ""
    return f", {money(w.first_usd)} for its first round ({w.first_agents:,} agents)"


def refuse_short_cap(scenario: Scenario, worst: list[Worst]) -> None:
    """A :class:`~sopbus.bus.ConfigError` when the cap cannot cover one round of a
    population, before any call is made or any run directory created."""
    cap = scenario.run.budget_usd
    for w in worst:
        if w.first_usd > cap:
            fits = int(cap / w.call_usd) if w.call_usd else w.agents
            first = "" if w.first_agents == w.agents else f" ({w.first_agents:,} agents)"
            raise ConfigError(
                f"{scenario.path}: $.run.budget_usd: the cap {money(cap)} cannot cover one round "
                f"of population {w.name}: its first round's worst case{first} is "
                f"{money(w.first_usd)}, {money(w.first_usd - cap)} more; raise budget_usd to at "
                f"least {money(w.first_usd)}, lower count or active (the cap covers {fits:,} "
                f"agents), or lower max_tokens"
            )
