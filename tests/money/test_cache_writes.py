"""Prompt tokens written to a provider's cache: their own price, their own ledger field.

Anthropic bills a cache write at 1.25 times the input price and a cache read at a tenth of
it; both are part of the prompt. These tests pin how :class:`Usage`, :class:`Price`, the
price book, the ledger and the cost report carry them, and that what did not report them
reads and bills as before.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import genai_prices
import msgspec
import pytest
from rich.console import Console

from sopbus.bus import (
    ConfigError,
    LedgerLine,
    LLMRequest,
    Price,
    PriceBook,
    Usage,
    cost_report,
    render_table,
    reprice,
)
from sopbus.bus.llm._overrun import impossible_usage, overrun_cost
from sopbus.bus.llm._plausible import plausible_usage
from sopbus.bus.money import Tier
from sopbus.bus.scenario import load_scenario

SONNET = Price(
    Decimal(3),
    Decimal(15),
    Decimal("0.3"),
    tiers=(
        Tier(
            above=200_000,
            input=Decimal(6),
            output=Decimal("22.5"),
            cached_input=Decimal("0.6"),
            cache_write=Decimal("7.5"),
        ),
    ),
    cache_write=Decimal("3.75"),
)


def test_cache_writes_bill_at_their_price_and_reads_at_theirs() -> None:
    # 1,000 prompt tokens: 600 read from the cache, 300 written to it, 100 plain input.
    usage = Usage(
        prompt_tokens=1000, completion_tokens=50, cached_tokens=600, cache_write_tokens=300
    )
    expected = (100 * 3 + 600 * Decimal("0.3") + 300 * Decimal("3.75") + 50 * 15) / Decimal(10**6)
    assert SONNET.cost(usage) == expected == Decimal("0.002355")
    # Past the tier the whole call bills at the tier's rates, the cache write's included.
    long = Usage(prompt_tokens=300_000, completion_tokens=0, cache_write_tokens=300_000)
    assert SONNET.cost(long) == Decimal("2.25")
    assert SONNET.write_rate(200_001) == Decimal("7.5") and SONNET.write_rate(10) == Decimal("3.75")


def test_without_a_cache_write_price_writes_bill_as_input_and_old_usage_as_before() -> None:
    plain = Price(Decimal("2.5"), Decimal(10), Decimal("1.25"))
    assert plain.cost(Usage(1000, 0, 0, 400)) == plain.cost(Usage(1000, 0)) == Decimal("0.0025")
    assert plain.worst_case(1000, 100) == Decimal("0.0035")  # as before cache writes existed
    assert Usage(10, 2) == Usage(10, 2, 0, 0)


def test_the_worst_case_covers_a_prompt_written_wholly_to_the_cache() -> None:
    assert SONNET.worst_case(1000, 100) == (1000 * Decimal("3.75") + 100 * 15) / Decimal(10**6)
    for written in (0, 500, 1000):
        usage = Usage(1000, 100, cached_tokens=1000 - written, cache_write_tokens=written)
        assert SONNET.cost(usage) <= SONNET.worst_case(1000, 100)


@pytest.mark.parametrize("model", ["claude-sonnet-4-5", "claude-haiku-4-5", "claude-opus-4-1"])
def test_claude_is_priced_as_genai_prices_bills_cache_reads_and_writes(model: str) -> None:
    price = PriceBook.load().price(model)
    assert price.cache_write is not None and price.cache_write > price.input > price.cached_input
    usage = Usage(
        prompt_tokens=5000, completion_tokens=300, cached_tokens=3000, cache_write_tokens=1500
    )
    library = genai_prices.calc_price(
        genai_prices.Usage(
            input_tokens=5000, cache_read_tokens=3000, cache_write_tokens=1500, output_tokens=300
        ),
        model,
    )
    assert price.cost(usage) == library.total_price
    assert "cache write," not in " ".join(PriceBook.load().quote(model).notes)  # it is billed


def test_a_scenario_prices_cache_writes_and_a_bad_price_names_the_place(tmp_path: Path) -> None:
    book = PriceBook.load({"my-claude": {"input": 1, "output": 5, "cache_write": "1.25"}})
    assert book.price("my-claude") == Price(
        Decimal(1), Decimal(5), Decimal(1), cache_write=Decimal("1.25")
    )
    with pytest.raises(ConfigError, match=r"cache_write must be a price of 0 or more, got -1"):
        PriceBook.load({"x": {"input": 1, "output": 1, "cache_write": -1}})
    path = tmp_path / "s.toml"
    path.write_text(
        '[scenario]\nname = "s"\nidea = "x"\nsop = "software_company"\n'
        '[prices."my-claude"]\ninput = 1\noutput = 5\ncache_write = -2\n'
    )
    with pytest.raises(ConfigError, match=r'price -2 - at `\$.prices."my-claude".cache_write`'):
        load_scenario(path)


def line(**fields: object) -> LedgerLine:
    base: dict[str, object] = {
        "seq": 1,
        "round": 1,
        "role": "Ada",
        "action": "WriteDesign",
        "provider": "anthropic",
        "model": "claude-sonnet-4-5",
        "prompt_tokens": 1000,
        "completion_tokens": 50,
        "cached_tokens": 600,
        "cost_usd": Decimal("0.002355"),
        "total_usd": Decimal("0.002355"),
        "budget_usd": Decimal(1),
        "attempt": 1,
        "outcome": "ok",
        "latency_ms": 0.0,
        "t": 0.0,
    }
    return LedgerLine(**{**base, **fields})  # type: ignore[arg-type]


def test_the_ledger_omits_zero_cache_writes_so_old_lines_read_as_before() -> None:
    old = msgspec.json.encode(line())
    assert b"cache_write_tokens" not in old
    assert msgspec.json.decode(old, type=LedgerLine).cache_write_tokens == 0
    written = msgspec.json.encode(line(cache_write_tokens=300))
    assert b'"cache_write_tokens":300' in written


def test_reprice_and_the_cost_report_carry_cache_writes() -> None:
    lines = [line(cache_write_tokens=300)]
    (same,) = reprice(
        lines,
        "claude-sonnet-4-5",
        PriceBook.load(
            {
                "claude-sonnet-4-5": {
                    "input": 3,
                    "output": 15,
                    "cached_input": "0.3",
                    "cache_write": "3.75",
                }
            }
        ),
    )
    assert same.cost_usd == Decimal("0.002355")
    report = cost_report(lines)
    assert report["cache"] == {"cached_tokens": 600, "cache_write_tokens": 300}
    console = Console(width=100, record=True)
    console.print(render_table(report))
    text = console.export_text()
    assert "prompt cache: 600 prompt tokens read from it" in text and "300 written to it" in text
    assert "cache" not in cost_report([line(cached_tokens=0)])


REQUEST = LLMRequest(messages=(), model="claude-sonnet-4-5", max_tokens=100)


def test_cache_writes_above_the_uncached_prompt_are_not_believed() -> None:
    usage = Usage(1000, 0, cached_tokens=800, cache_write_tokens=900)
    booked, why = plausible_usage(usage, REQUEST, "", bound=1000, counted=1000)
    assert booked == Usage(1000, 0, 800, 0)
    assert why == "cache_write_tokens=900 above the 200 prompt tokens not read from the cache"
    honest = Usage(1000, 0, cached_tokens=800, cache_write_tokens=200)
    assert plausible_usage(honest, REQUEST, "", bound=1000, counted=1000) == (honest, None)


def test_a_negative_cache_write_count_is_an_overrun_counted_at_the_reservation() -> None:
    usage = Usage(100, 10, 0, -5)
    reserved = SONNET.worst_case(100, 100)
    why = impossible_usage(usage, REQUEST, cost=SONNET.cost(usage), reserved=reserved)
    assert why == "negative token counts (cache_write_tokens=-5)"
    assert overrun_cost(SONNET, usage, reserved) == (reserved, True)
