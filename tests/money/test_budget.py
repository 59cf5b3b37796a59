from decimal import Decimal
from typing import Any

import pytest

from sopbus.bus import Budget, BudgetExhausted, ChatMessage, LLMRequest
from sopbus.bus.llm._request import with_schema_instruction
from sopbus.bus.llm._tokens import SCHEMA_OVERHEAD, count_prompt, count_text, prompt_upper_bound


def test_reserve_settle_release_keep_the_books() -> None:
    budget = Budget(Decimal("1.00"))
    a = budget.reserve(Decimal("0.40"))
    b = budget.reserve(Decimal("0.60"))  # exactly at the cap is allowed
    assert (budget.reserved, budget.left) == (Decimal("1.00"), Decimal(0))
    budget.settle(a, Decimal("0.10"))
    budget.release(b)
    assert (budget.spent, budget.reserved, budget.left) == (Decimal("0.10"), 0, Decimal("0.90"))


def test_a_reservation_past_the_cap_is_refused_with_the_numbers_and_the_fix() -> None:
    budget = Budget(Decimal("0.05"))
    budget.settle(budget.reserve(Decimal("0.03")), Decimal("0.03"))
    with pytest.raises(BudgetExhausted) as info:
        budget.reserve(Decimal("0.021"))
    assert str(info.value).startswith("next call needs up to $0.021; $0.02 left of $0.05")
    assert "raise [run].budget_usd or --budget" in str(info.value)
    assert budget.reserved == 0  # nothing held by the refused call


def test_a_reservation_closes_once() -> None:
    budget = Budget(Decimal(1))
    reservation = budget.reserve(Decimal("0.5"))
    budget.release(reservation)
    with pytest.raises(RuntimeError):
        budget.settle(reservation, Decimal("0.5"))
    assert budget.reserved == 0 and budget.spent == 0


def _request(model: str, schema: dict[str, Any] | None = None) -> LLMRequest:
    return LLMRequest(
        messages=(
            ChatMessage("system", "You are an architect."),
            ChatMessage("user", "Design a key-value store with 日本語 notes."),
        ),
        model=model,
        schema=schema,
    )


@pytest.mark.parametrize("model", ["gpt-4o", "gpt-3.5-turbo", "llama-3-70b"])
def test_the_prompt_bound_is_above_the_simulated_count(model: str) -> None:
    schema = {"type": "object", "properties": {"name": {"type": "string"}}}
    for request in (_request(model), _request(model, schema)):
        assert prompt_upper_bound(request) >= count_prompt(request)


def test_the_bound_of_an_unknown_tokenizer_counts_bytes() -> None:
    request = _request("llama-3-70b")
    content_bytes = sum(len(m.content.encode()) for m in request.messages)
    assert prompt_upper_bound(request) >= content_bytes
    assert prompt_upper_bound(_request("gpt-4o")) < content_bytes


def test_prompt_mode_instruction_fits_the_schema_overhead() -> None:
    schema = {"type": "object", "properties": {"name": {"type": "string"}}}
    request = _request("gpt-4o", schema)
    written = with_schema_instruction(request)
    added = count_text(written[0].content, "gpt-4o") - count_text(
        request.messages[0].content, "gpt-4o"
    )
    schema_tokens = count_text(
        '{"type":"object","properties":{"name":{"type":"string"}}}', "gpt-4o"
    )
    assert 0 < added - schema_tokens <= SCHEMA_OVERHEAD
