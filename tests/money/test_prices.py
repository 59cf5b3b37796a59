from decimal import Decimal

import pytest

from sopbus.bus import ConfigError, Price, PriceBook, Usage

REQUIRED = (
    "gpt-4o",
    "gpt-4o-mini",
    "gpt-4.1",
    "gpt-4.1-mini",
    "gpt-4.1-nano",
    "o3",
    "o4-mini",
    "gpt-3.5-turbo",
    "gpt-4-turbo",
    "gpt-5",
    "gpt-5-mini",
)


def test_packaged_prices_cover_the_common_models_and_are_exact_decimals() -> None:
    book = PriceBook.load()
    for model in REQUIRED:
        price = book.price(model)
        assert price.input > 0 and price.output > price.input
    assert book.price("gpt-4o-mini") == Price(Decimal("0.15"), Decimal("0.60"), Decimal("0.075"))
    assert "sim" not in book


def test_cost_bills_cached_prompt_tokens_at_the_cached_price() -> None:
    price = PriceBook.load().price("gpt-4o")  # 2.50 in, 1.25 cached, 10.00 out per 1M
    usage = Usage(prompt_tokens=1000, completion_tokens=100, cached_tokens=400)
    assert price.cost(usage) == Decimal("0.0015") + Decimal("0.0005") + Decimal("0.001")
    assert price.worst_case(1000, 100) == Decimal("0.0025") + Decimal("0.001")


def test_a_model_without_cached_price_bills_cached_tokens_as_input() -> None:
    price = PriceBook.load().price("gpt-4-turbo")
    assert price.cached_input == price.input
    assert price.cost(Usage(100, 0, 100)) == price.cost(Usage(100, 0, 0))


def test_overrides_add_and_replace_models_and_zero_is_a_price() -> None:
    book = PriceBook.load(
        {
            "local-llama": {"input": 0, "output": 0},
            "gpt-4o": {"input": "1", "output": 2.5, "cached_input": 0.1},
        }
    )
    assert book.price("local-llama").cost(Usage(10**6, 10**6)) == Decimal(0)
    assert book.price("gpt-4o") == Price(Decimal("1"), Decimal("2.5"), Decimal("0.1"))


def test_unknown_model_names_close_models_and_the_fix() -> None:
    with pytest.raises(ConfigError) as info:
        PriceBook.load().price("gpt-4o-mni")
    message = str(info.value)
    assert "'gpt-4o-mni'" in message and "gpt-4o-mini" in message
    assert '[prices."gpt-4o-mni"] input = ..., output = ...' in message


@pytest.mark.parametrize(
    "entry, fragment",
    [
        ({"input": 1}, "no output price"),
        ({"input": -1, "output": 1}, "0 or more"),
        ({"input": True, "output": 1}, "must be a number"),
        ({"input": "cheap", "output": 1}, "must be a number"),
        ({"input": 1, "output": 1, "cache": 1}, "unknown key(s) cache"),
    ],
)
def test_bad_override_is_a_config_error_naming_the_place(
    entry: dict[str, object], fragment: str
) -> None:
    with pytest.raises(ConfigError) as info:
        PriceBook.load({"m": entry})
    assert fragment in str(info.value) and '[prices."m"]' in str(info.value)
