from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import msgspec
import pytest

from sopbus.bus import (
    Budget,
    ChatMessage,
    ConfigError,
    Gateway,
    LedgerLine,
    LLMRequest,
    PriceBook,
    RecordingProvider,
    ReplayProvider,
    SimProvider,
    request_key,
)

PRICES = PriceBook.load()


def ask(text: str, role: str = "Alice", action: str = "WritePRD") -> LLMRequest:
    return LLMRequest(
        messages=(ChatMessage("user", text),),
        model="gpt-4o",
        role=role,
        action=action,
        schema={"type": "object", "properties": {"title": {"type": "string"}}},
    )


def test_the_key_covers_what_the_model_sees_and_not_who_asks() -> None:
    base = ask("plan a game")
    assert request_key(base) == request_key(ask("plan a game", role="Bob", action="Other"))
    assert request_key(base) != request_key(ask("plan a gam"))
    assert request_key(base) != request_key(msgspec.structs.replace(base, max_tokens=5))
    assert request_key(base) != request_key(msgspec.structs.replace(base, output_mode="prompt"))
    reordered = msgspec.structs.replace(
        base, schema={"properties": {"title": {"type": "string"}}, "type": "object"}
    )
    assert request_key(base) == request_key(reordered)  # dict order is not meaning


async def test_a_recorded_run_replays_the_same_answers_for_free(tmp_path: Path) -> None:
    cassette = tmp_path / "run.jsonl"
    requests = [ask("plan a game"), ask("design it", role="Bob"), ask("plan a game")]
    recorded: list[LedgerLine] = []
    async with RecordingProvider(SimProvider(seed=3), cassette) as recorder:
        gw = Gateway(recorder, PRICES, Budget(Decimal(1)), sink=recorded.append)
        originals = [await gw.complete(r, round=1) for r in requests]
    assert len(cassette.read_text().splitlines()) == 3

    replayed: list[LedgerLine] = []
    gw = Gateway(ReplayProvider(cassette), PRICES, Budget(Decimal(0)), sink=replayed.append)
    answers = [await gw.complete(r, round=1) for r in requests]
    assert [a.text for a in answers] == [o.text for o in originals]
    assert all(a.replayed for a in answers)
    assert [
        (line.outcome, line.prompt_tokens, line.completion_tokens, line.cost_usd)
        for line in replayed
    ] == [("replayed", o.prompt_tokens, o.completion_tokens, Decimal(0)) for o in recorded]
    assert gw.stats().total_usd == 0 and sum(line.cost_usd for line in recorded) > 0


async def test_one_key_asked_twice_replays_in_recorded_order(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    async with RecordingProvider(SimProvider(seed=1), cassette) as recorder:
        first = await recorder.complete(ask("same"))
    async with RecordingProvider(SimProvider(seed=2), cassette) as recorder:  # appends
        second = await recorder.complete(ask("same"))
    assert first.text != second.text
    replay = ReplayProvider(cassette)
    texts = [(await replay.complete(ask("same"))).text for _ in range(3)]
    assert texts == [first.text, second.text, second.text]


async def test_a_missing_answer_names_the_action_and_the_cassette(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    async with RecordingProvider(SimProvider(), cassette) as recorder:
        await recorder.complete(ask("plan a game"))
    with pytest.raises(ConfigError) as info:
        await ReplayProvider(cassette).complete(ask("plan a different game", action="WriteDesign"))
    assert "'WriteDesign'" in str(info.value) and str(cassette) in str(info.value)
    with pytest.raises(ConfigError, match="does not exist"):
        ReplayProvider(tmp_path / "none.jsonl")
