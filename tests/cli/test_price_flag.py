"""``--price INPUT,OUTPUT``: a model no price source knows (a local one) runs, validates
and sweeps without an edited copy of the scenario, priced exactly as the flag says.

End to end against the tests' OpenAI-compatible server on 127.0.0.1: the ledger's costs are
the tokens times the flag's price, and the price is recorded in the run's scenario.toml.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest

from sopbus._assemble._execute import scenario_as_run
from sopbus.bus import ConfigError, load_scenario, scenario_with_overrides
from support.cli import sopbus
from support.openai_server import Answer, OpenAIServer
from support.teams import pipeline

MODEL = "unknown-local"
SCENARIO = pipeline(
    ("Wes", "Write"),
    ("Pia", "Polish"),
    name="local",
    run={"budget_usd": 1.0},
    llm={"provider": "openai", "model": "gpt-4o-mini", "max_tokens": 1000},
)
FIX = "expected INPUT,OUTPUT in USD per 1M tokens, e.g. --price 0.15,0.60 (0,0 for a local model)"
ENV = {"OPENAI_API_KEY": "x"}


@pytest.fixture
def scenario(tmp_path: Path) -> Path:
    path = tmp_path / "local.toml"
    path.write_text(SCENARIO)
    return path


def run_local(tmp_path: Path, scenario: Path, server: OpenAIServer, price: str) -> list[dict]:
    server.script(
        Answer("a draft", prompt_tokens=50, completion_tokens=300),
        Answer("a polished haiku", prompt_tokens=60, completion_tokens=500, cached_tokens=0),
    )
    done = sopbus(
        "run", scenario, "--provider", "openai", "--base-url", server.base_url,
        "--model", MODEL, "--price", price, "--runs-dir", tmp_path / "runs", "--quiet",
        cwd=tmp_path, env=ENV,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert f"[prices.{MODEL}]" in (run_dir / "scenario.toml").read_text().replace('"', "")
    lines = [json.loads(x) for x in (run_dir / "costs.jsonl").read_text().splitlines()]
    assert [x["outcome"] for x in lines] == ["ok", "ok"]
    assert {x["model"] for x in lines} == {MODEL}
    assert {x["price_source"] for x in lines} == {"command-line"}
    return lines


@pytest.mark.slow
def test_a_local_model_priced_0_0_runs_and_ledgers_nothing(
    tmp_path: Path, scenario: Path, openai_server: OpenAIServer
) -> None:
    lines = run_local(tmp_path, scenario, openai_server, "0,0")
    assert [Decimal(x["cost_usd"]) for x in lines] == [0, 0]
    assert Decimal(lines[-1]["total_usd"]) == 0


@pytest.mark.slow
def test_the_ledger_costs_tokens_times_the_flags_price(
    tmp_path: Path, scenario: Path, openai_server: OpenAIServer
) -> None:
    lines = run_local(tmp_path, scenario, openai_server, "1,2")
    expected = [
        (Decimal(x["prompt_tokens"]) * 1 + Decimal(x["completion_tokens"]) * 2) / 1_000_000
        for x in lines
    ]
    assert [Decimal(x["cost_usd"]) for x in lines] == expected
    assert [(x["prompt_tokens"], x["completion_tokens"]) for x in lines] == [(50, 300), (60, 500)]
    assert Decimal(lines[-1]["total_usd"]) == Decimal("0.00171")


def test_validate_checks_the_model_of_the_command_line(tmp_path: Path) -> None:
    model = ("software_company", "--provider", "openai", "--model", "my-local-model")
    missing = sopbus("validate", *model, cwd=tmp_path, env=ENV)
    assert missing.returncode == 2
    assert "no price for model 'my-local-model'" in missing.stderr
    assert "--price INPUT,OUTPUT" in missing.stderr
    priced = sopbus("validate", *model, "--price", "0,0", cwd=tmp_path, env=ENV)
    assert priced.returncode == 0, priced.stderr
    assert "openai my-local-model" in priced.stdout
    assert "my-local-model: $0.00 in, $0.00 out per 1M tokens (--price" in priced.stdout


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("0.15,abc", f"--price 0.15,abc: {FIX}"),
        ("1", f"--price 1: {FIX}"),
        ("1,2,3,4", f"--price 1,2,3,4: {FIX}"),
        ("-1,2", "--price -1,2: a price cannot be negative"),
        ("1,inf", f"--price 1,inf: {FIX}"),
    ],
)
@pytest.mark.parametrize("command", ["run", "validate", "sweep"])
def test_a_bad_price_is_a_usage_error_naming_the_flag(
    tmp_path: Path, scenario: Path, command: str, value: str, says: str
) -> None:
    done = (
        sopbus(command, scenario, f"--price={value}", "--runs-dir", tmp_path / "runs", cwd=tmp_path)
        if command != "validate"
        else sopbus(command, scenario, f"--price={value}", cwd=tmp_path)
    )
    assert done.returncode == 2
    assert says in done.stderr
    assert not (tmp_path / "runs").exists()
    assert not (tmp_path / "sweeps").exists()


def test_the_python_api_takes_a_price_over_the_files_entry(scenario: Path) -> None:
    base = load_scenario(scenario)
    priced = scenario_with_overrides(base, model=MODEL, price=("0.5", 1))
    assert priced.prices[MODEL].input == Decimal("0.5")
    assert priced.prices[MODEL].output == 1
    assert priced.priced_by_flag == {MODEL}
    again = scenario_with_overrides(priced, price=(0, 0, 0))
    assert again.prices[MODEL].output == 0
    assert "[prices.unknown-local]" in scenario_as_run(again).replace('"', "")
    filed = scenario.with_name("filed.toml")
    filed.write_text(SCENARIO + f'\n[prices."{MODEL}"]\ninput = 5\noutput = 9\n')
    assert load_scenario(filed).prices[MODEL].input == 5
    wins = scenario_with_overrides(load_scenario(filed), model=MODEL, price="1,2")
    assert (wins.prices[MODEL].input, wins.prices[MODEL].output) == (1, 2)
    with pytest.raises(ConfigError, match="cannot be negative"):
        scenario_with_overrides(base, price=(-1, 0))


def test_a_sweep_prices_the_scenarios_model_in_every_variant(tmp_path: Path) -> None:
    path = tmp_path / "local.toml"
    path.write_text(SCENARIO.replace('"gpt-4o-mini"', f'"{MODEL}"'))
    unpriced = sopbus("sweep", path, "--seeds", "1", "--set", "llm.provider=sim", cwd=tmp_path)
    assert unpriced.returncode == 2
    assert "--price" in unpriced.stderr
    done = sopbus(
        "sweep", path, "--seeds", "1", "--set", "llm.provider=sim", "--price", "0,0",
        "--runs-dir", tmp_path / "runs", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (sweep,) = (tmp_path / "sweeps").iterdir()
    assert MODEL in (sweep / "scenario.toml").read_text().split("[prices.")[1]
