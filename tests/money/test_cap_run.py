"""The cap over a whole run: many roles calling concurrently, random sizes, random caps.

The gateway's own property test (test_gateway.py) checks the budget alone; this one checks
what a user sees: the run's end reason, summary.json and costs.jsonl agree, and the spend
never passes the cap.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from tempfile import TemporaryDirectory

import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sopbus.bus import (
    Budget,
    ChatMessage,
    Environment,
    Gateway,
    LLMRequest,
    Message,
    PriceBook,
    RunStore,
    SimProvider,
    Turn,
    read_jsonl,
    run_team,
)

PRICES = PriceBook.load({})
WORDS = "alpha beta gamma delta epsilon zeta theta kappa lambda sigma".split()


class Caller:
    """Watches ``Go``; each turn asks the model its calls one after another, then says ``Go``."""

    def __init__(self, name: str, calls: Sequence[tuple[int, int]]):
        self.name, self.aliases, self.watch = name, (), frozenset({"Go"})
        self.calls = calls

    async def step(self, news: Sequence[Message], turn: Turn) -> Sequence[Message]:
        for words, max_tokens in self.calls:
            text = " ".join(WORDS[: 1 + words % 10]) * (1 + words)
            await turn.ask(
                LLMRequest(
                    messages=(ChatMessage("user", text),),
                    model="gpt-4o-mini",
                    max_tokens=max_tokens,
                    action="Talk",
                )
            )
        return [Message(cause_by="Go", sent_from=self.name)]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    team=st.lists(
        st.lists(st.tuples(st.integers(0, 30), st.integers(1, 4000)), min_size=1, max_size=4),
        min_size=1,
        max_size=12,
    ),
    cap=st.decimals(min_value=0, max_value=Decimal("0.05"), places=6),
    seed=st.integers(0, 99),
)
def test_a_run_never_spends_past_its_cap_and_its_files_agree(
    team: list[list[tuple[int, int]]], cap: Decimal, seed: int
) -> None:
    with TemporaryDirectory() as tmp:
        run_dir = Path(tmp)
        store = RunStore(run_dir, "run")
        env = Environment("run", log=store.log)
        env.add_all(Caller(f"r{i}", calls) for i, calls in enumerate(team))
        gw = Gateway(
            SimProvider(seed=seed, latency_ms=(0, 300)), PRICES, Budget(cap), sink=store.record_call
        )

        async def main() -> str:
            result = await run_team(
                env,
                max_rounds=4,
                gateway=gw,
                store=store,
                seed=[Message(cause_by="Go", sent_from="Boss")],
            )
            return result.end_reason

        end_reason = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
        store.close()
        summary = json.loads((run_dir / "summary.json").read_text())
        lines = list(read_jsonl(run_dir / "costs.jsonl"))

    ledger_total = sum((Decimal(line["cost_usd"]) for line in lines), Decimal(0))
    refused = [line for line in lines if line["outcome"] == "refused"]
    assert Decimal(str(summary["total_usd"])) == ledger_total <= cap
    assert all(Decimal(line["total_usd"]) <= cap for line in lines)
    assert summary["llm_calls"] == len(lines) - len(refused)
    assert summary["end_reason"] == end_reason
    # A refused call ends the run as budget_exhausted; a run that ran out of rounds refused nothing.
    assert (end_reason == "budget_exhausted") == bool(refused)
    if not refused:  # one role alone never hears its own Go, so it goes idle after one turn
        assert end_reason == ("max_rounds" if len(team) > 1 else "idle")
    # one refusal per role at most: a refused role publishes nothing more, and no new round starts
    assert len({line["role"] for line in refused}) == len(refused)
