"""``sopbus run`` of a shipped scenario on the anthropic provider, as a user runs it (a
subprocess), against the Anthropic-compatible server of support.anthropic_server: the
ledger's tokens are the server's, its costs Claude's prices exactly (cache reads and writes
each at theirs), and the cap refuses a call before it is sent."""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from sopbus.bus import PriceBook, Usage
from support.anthropic_server import AnthropicServer
from support.cli import sopbus
from support.fitting_answers import anthropic_answer

pytestmark = pytest.mark.slow

MODEL = "claude-haiku-4-5"
PRICE = PriceBook.load().price(MODEL)
KEY = "sk-ant-e2e-secret-key-123"


@pytest.fixture
def server() -> Iterator[AnthropicServer]:
    with AnthropicServer() as running:
        running.script(anthropic_answer)
        yield running


def run(server: AnthropicServer, tmp_path: Path, *flags: str) -> tuple[int, list[dict[str, Any]]]:
    done = sopbus(
        "run",
        "flower_shop",
        "--provider",
        "anthropic",
        "--base-url",
        server.base_url,
        "--model",
        MODEL,
        "--runs-dir",
        "runs",
        "--quiet",
        *flags,
        cwd=tmp_path,
        env={"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": None},
    )
    (costs,) = (tmp_path / "runs").glob("*/costs.jsonl")
    lines = [json.loads(line) for line in costs.read_text().splitlines()]
    for path in (tmp_path / "runs").rglob("*"):
        if path.is_file():
            assert KEY not in path.read_text(errors="replace"), path
    assert KEY not in done.stdout + done.stderr
    return done.returncode, lines


def test_a_run_ledgers_the_servers_tokens_at_claudes_prices_exactly(
    server: AnthropicServer, tmp_path: Path
) -> None:
    code, lines = run(server, tmp_path, "--budget", "1")
    assert code == 0
    answered = [ln for ln in lines if ln["outcome"] == "ok"]
    assert len(answered) == len(server.requests) == len(lines) >= 3
    for line, reported in zip(answered, server.usages, strict=True):
        usage = Usage(
            reported["input_tokens"]
            + reported["cache_creation_input_tokens"]
            + reported["cache_read_input_tokens"],
            reported["output_tokens"],
            reported["cache_read_input_tokens"],
            reported["cache_creation_input_tokens"],
        )
        assert (
            line["prompt_tokens"],
            line["completion_tokens"],
            line["cached_tokens"],
            line.get("cache_write_tokens", 0),
        ) == (
            usage.prompt_tokens,
            usage.completion_tokens,
            usage.cached_tokens,
            usage.cache_write_tokens,
        )
        assert Decimal(line["cost_usd"]) == PRICE.cost(usage)
        assert (line["provider"], line["model"], line["price_source"]) == (
            "anthropic",
            MODEL,
            "genai-prices",
        )
    # Each role's system turn is written once and read by its later calls.
    assert sum(ln["cached_tokens"] for ln in lines) > 0
    assert sum(ln.get("cache_write_tokens", 0) for ln in lines) > 0
    total = sum(Decimal(ln["cost_usd"]) for ln in lines)
    assert Decimal(lines[-1]["total_usd"]) == total

    shown = sopbus("costs", "last", "--json", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    report = json.loads(shown.stdout)
    assert report["cache"] == {
        "cached_tokens": sum(ln["cached_tokens"] for ln in lines),
        "cache_write_tokens": sum(ln.get("cache_write_tokens", 0) for ln in lines),
    }
    assert Decimal(report["total_usd"]) == total
    table = sopbus("costs", "last", cwd=tmp_path).stdout
    assert f"prompt cache: {report['cache']['cached_tokens']:,} prompt tokens read" in table


def test_the_cap_refuses_the_call_it_cannot_cover_before_sending_it(
    server: AnthropicServer, tmp_path: Path
) -> None:
    code, lines = run(server, tmp_path, "--budget", "0.012")
    assert code == 3  # budget exhausted
    *answered, refused = lines
    assert refused["outcome"] == "refused" and all(ln["outcome"] == "ok" for ln in answered)
    assert len(server.requests) == len(answered) >= 1  # the refused call never reached it
    spent = sum((Decimal(ln["cost_usd"]) for ln in answered), Decimal(0))
    assert Decimal(refused["reserved_usd"]) > Decimal("0.012") - spent
    assert spent <= Decimal("0.012")
    summary = json.loads(next((tmp_path / "runs").glob("*/summary.json")).read_text())
    assert summary["end_reason"] == "budget_exhausted"
