"""Prices for the models people use: genai-prices behind the scenario's ``[prices]`` and
``bus/money/prices.toml``, the source of each price in the ledger, ``sopbus prices``.

Costs are checked against genai-prices' own ``calc_price`` on the same usage, so a mistake
in turning its data into a :class:`~sopbus.bus.Price` (tiers, cached tokens) shows.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import genai_prices
import pytest

from sopbus._assemble import execute
from sopbus.bus import ConfigError, PriceBook, Usage, load_ledger, load_scenario
from sopbus.bus.money import usd
from support.cli import sopbus
from support.teams import pipeline


def team(runs: Path | str, model: str, extra: str = "") -> str:
    return pipeline(
        ("Wes", "Write"),
        ("Rae", "Read"),
        name="priced",
        run={"runs_dir": str(runs), "budget_usd": 1.0},
        llm={"model": model, "max_tokens": 200},
        role_llm={"Rae": {"model": "gemini-2.5-flash"}},
        extra=extra,
    )


def library_cost(model: str, usage: Usage, at: datetime | None = None) -> Decimal:
    """What genai-prices itself says ``usage`` costs on ``model``."""
    found = genai_prices.calc_price(
        genai_prices.Usage(
            input_tokens=usage.prompt_tokens,
            cache_read_tokens=usage.cached_tokens,
            output_tokens=usage.completion_tokens,
        ),
        model,
        genai_request_timestamp=at,
    )
    return found.total_price


@pytest.mark.parametrize(
    "model, provider",
    [
        ("claude-sonnet-4-5", "anthropic"),
        ("claude-3-5-haiku-latest", "anthropic"),
        ("gemini-2.5-pro", "google"),
        ("gemini-2.0-flash", "google"),
    ],
)
def test_claude_and_gemini_are_priced_by_genai_prices_as_it_prices_them(
    model: str, provider: str
) -> None:
    quote = PriceBook.load().quote(model)
    assert (quote.source, quote.provider, quote.matched) == ("genai-prices", provider, model)
    for usage in (Usage(1_000, 500, 200), Usage(12_345, 678, 0), Usage(250_000, 4_000, 50_000)):
        assert quote.price.cost(usage) == library_cost(model, usage) > 0


def test_a_long_prompt_is_billed_at_the_tier_and_reserved_at_it() -> None:
    # Rates come from the installed genai-prices data (they change with its releases):
    # Claude Sonnet 4.5 has one long-context tier, dearer than the base, at 200k.
    price = PriceBook.load().price("claude-sonnet-4-5")
    (tier,) = price.tiers
    assert tier.above == 200_000 and tier.input > price.input and tier.output > price.output
    at_the_edge, past_it = Usage(200_000, 1_000), Usage(200_001, 1_000)
    assert price.cost(at_the_edge) == (price.input * 200_000 + price.output * 1_000) / 10**6
    assert price.cost(past_it) == (tier.input * 200_001 + tier.output * 1_000) / 10**6
    for usage in (at_the_edge, past_it):
        assert price.cost(usage) == library_cost("claude-sonnet-4-5", usage)
    # The reservation for a prompt that may pass the tier is at the tier's rates: its
    # dearest prompt rate, the cache write's (a prompt may be written to the cache whole).
    assert tier.cache_write is not None and tier.cache_write > tier.input
    assert (
        price.worst_case(300_000, 1_000)
        == (tier.cache_write * 300_000 + tier.output * 1_000) / 10**6
    )
    assert price.worst_case(300_000, 1_000) > (tier.input * 300_000 + tier.output * 1_000) / 10**6
    assert price.worst_case(300_000, 1_000) >= price.cost(Usage(300_000, 1_000, 100_000))


def test_a_price_that_changes_with_the_hour_is_taken_at_its_peak() -> None:
    # DeepSeek's off-peak discount, or whichever model the installed data gives hours to.
    from genai_prices import data_snapshot, types

    hourly = [
        m.id
        for p in data_snapshot.get_snapshot().providers
        if p.id == "deepseek"
        for m in p.models
        if isinstance(m.prices, list)
        and any(isinstance(c.constraint, types.TimeOfDateConstraint) for c in m.prices)
    ]
    if not hourly:
        pytest.skip("the installed genai-prices gives no DeepSeek model prices by the hour")
    model = hourly[0]
    usage = Usage(10_000, 2_000, 1_000)
    day = [datetime(2026, 11, 30, h, m, 1, tzinfo=UTC) for h in range(24) for m in (0, 15, 30, 45)]
    costs = {library_cost(model, usage, at) for at in day}
    assert len(costs) > 1  # the price does change during the day
    for at in day:  # whenever the run starts, peak hours or not
        quote = PriceBook.load(at=at).quote(model)
        assert quote.source == "genai-prices" and quote.provider == "deepseek"
        assert any("time of day" in note for note in quote.notes), at
        assert quote.price.cost(usage) == max(costs), at


def test_the_scenario_comes_first_then_sopbus_then_the_library() -> None:
    book = PriceBook.load({"claude-sonnet-4-5": {"input": 1, "output": 2}})
    assert book.quote("claude-sonnet-4-5").source == "scenario"
    assert book.price("claude-sonnet-4-5").output == Decimal("2")
    # gpt-4o-mini is in both prices.toml and the library; prices.toml wins.
    assert book.quote("gpt-4o-mini").source == "sopbus"
    assert PriceBook.load(library=False).models == PriceBook.load().models


def test_the_endpoint_picks_the_provider_that_serves_the_model() -> None:
    by_name = PriceBook.load().quote("claude-sonnet-4-5")
    on_google = PriceBook.load(endpoint="https://europe-west1-aiplatform.googleapis.com/v1").quote(
        "claude-sonnet-4-5"
    )
    assert (by_name.provider, on_google.provider) == ("anthropic", "google")
    assert "endpoint" in on_google.how and "anthropic" in on_google.also
    hosted = PriceBook.load().quote("llama-3.3-70b-versatile")  # only hosts list Llama
    assert hosted.source == "genai-prices" and hosted.provider == "groq"


def test_a_model_no_source_knows_is_a_config_error_with_close_names_and_the_fix() -> None:
    with pytest.raises(ConfigError) as info:
        PriceBook.load().price("claude-sonet-4-5")
    message = str(info.value)
    assert "no price for model 'claude-sonet-4-5'" in message
    assert "genai-prices " + genai_prices.__version__ in message and "claude-sonnet-4-5" in message
    assert '[prices."claude-sonet-4-5"] input = ..., output = ...' in message
    with pytest.raises(ConfigError, match=r"in the scenario's \[prices\] and sopbus's price list;"):
        PriceBook.load(library=False).price("claude-sonnet-4-5")


async def test_each_ledger_line_names_the_source_that_priced_its_call(tmp_path: Path) -> None:
    # Wes calls claude, Rae gemini: both priced by the library.
    path = tmp_path / "team.toml"
    path.write_text(team(tmp_path / "runs", "claude-sonnet-4-5"))
    outcome = await execute(load_scenario(path), environ={})
    lines = load_ledger(outcome.run_dir)
    assert [(ln.role, ln.model, ln.price_source) for ln in lines] == [
        ("Wes", "claude-sonnet-4-5", "genai-prices"),
        ("Rae", "gemini-2.5-flash", "genai-prices"),
    ]
    for line in lines:
        usage = Usage(line.prompt_tokens, line.completion_tokens, line.cached_tokens)
        assert line.cost_usd == library_cost(line.model, usage) > 0
    assert '"price_source":"genai-prices"' in (outcome.run_dir / "costs.jsonl").read_text()

    path.write_text(
        team(
            runs=tmp_path / "runs",
            model="gpt-4o-mini",
            extra='[prices."gemini-2.5-flash"]\ninput = 1\noutput = 2',
        )
    )
    outcome = await execute(load_scenario(path), environ={})
    assert [ln.price_source for ln in load_ledger(outcome.run_dir)] == ["sopbus", "scenario"]


async def test_an_unknown_model_stops_the_run_before_it_starts(tmp_path: Path) -> None:
    path = tmp_path / "team.toml"
    path.write_text(team(tmp_path / "runs", "house-model-7"))
    with pytest.raises(ConfigError, match=f"{path}: no price for model 'house-model-7'"):
        await execute(load_scenario(path), environ={})
    assert not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_sopbus_prices_shows_a_claude_models_rates_and_why() -> None:
    done = sopbus("prices", "claude-sonnet-4-5")
    assert done.returncode == 0, done.stderr
    price = PriceBook.load().price("claude-sonnet-4-5")  # the installed library's rates
    (tier,) = price.tiers
    lines = done.stdout.splitlines()
    assert lines[0] == "claude-sonnet-4-5: USD per 1M tokens"
    assert lines[1].split() == ["input", "output", "cached", "input"]
    assert lines[2].split() == [
        "base",
        *(usd(r) for r in (price.input, price.output, price.cached_input)),
    ]
    assert lines[3].split() == [
        "prompt",
        ">",
        f"{tier.above:,}",
        *(usd(r) for r in (tier.input, tier.output, tier.cached_input)),
    ]
    assert f"source:  genai-prices {genai_prices.__version__}" in done.stdout
    assert "matched: claude-sonnet-4-5 (Claude Sonnet 4.5) of Anthropic [anthropic]" in done.stdout


@pytest.mark.slow
def test_sopbus_prices_json_list_and_unknown_model(tmp_path: Path) -> None:
    done = sopbus("prices", "gemini-2.5-pro", "--json")
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    assert (record["source"], record["provider"], Decimal(record["price"]["input"])) == (
        "genai-prices",
        "google",
        PriceBook.load().price("gemini-2.5-pro").input,
    )
    assert record["library_version"] == genai_prices.__version__

    listed = sopbus("prices")
    assert listed.returncode == 0 and "gpt-4o-mini" in listed.stdout and "sopbus" in listed.stdout
    assert f"genai-prices {genai_prices.__version__} knows" in listed.stdout

    scenario = tmp_path / "s.toml"
    scenario.write_text(
        team(
            runs="runs", model="gpt-4o-mini", extra='[prices."gpt-4o-mini"]\ninput = 9\noutput = 9'
        )
    )
    mine = sopbus("prices", "gpt-4o-mini", "--scenario", str(scenario))
    assert mine.returncode == 0 and "source:  scenario" in mine.stdout and "9.00" in mine.stdout

    unknown = sopbus("prices", "house-model-7")
    assert unknown.returncode == 2 and unknown.stdout == ""
    assert (
        "no price for model 'house-model-7'" in unknown.stderr and "Traceback" not in unknown.stderr
    )


def test_sopbus_prices_names_commands_and_pages_never_a_path_inside_the_package() -> None:
    # A user cannot open bus/money/prices.toml (it is inside the installed package); what
    # they can use is a command (`sopbus prices`) and the docs.
    shipped = sopbus("prices", "gpt-4o-mini")
    library = sopbus("prices", "claude-sonnet-4-5")
    listed = sopbus("prices")
    unknown = sopbus("prices", "house-model-7")
    assert [shipped.returncode, library.returncode, listed.returncode, unknown.returncode] == [
        0,
        0,
        0,
        2,
    ]
    assert "source:  sopbus: sopbus's price list, shipped with the package" in shipped.stdout
    assert "`sopbus prices MODEL` shows what a model costs" in unknown.stderr
    for done in (shipped, library, listed, unknown):
        text = done.stdout + done.stderr
        assert "bus/money" not in text and "prices.toml" not in text, text
