from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import msgspec
from rich.console import Console

from sopbus.bus import (
    Budget,
    BudgetExhausted,
    ChatMessage,
    Gateway,
    JsonlWriter,
    LedgerLine,
    LLMRequest,
    PriceBook,
    SimProvider,
    cost_report,
    ledger_csv,
    load_ledger,
    render_table,
    report_json,
    reprice,
    without_wall_clock,
)

PRICES = PriceBook.load()


async def make_run(run_dir: Path, cap: str = "0.05") -> Gateway:
    calls = [
        ("Alice", "WritePRD", "gpt-4o"),
        ("Bob", "WriteDesign", "gpt-4o-mini"),
        ("Bob", "WriteDesign", "gpt-4o-mini"),
        ("Carol", "WriteCode", "gpt-4o"),
    ]
    with JsonlWriter(run_dir / "costs.jsonl") as writer:
        gw = Gateway(SimProvider(seed=5), PRICES, Budget(Decimal(cap)), sink=writer.write)
        for i, (role, action, model) in enumerate(calls):
            request = LLMRequest(
                messages=(ChatMessage("user", f"step {i} of a snake game"),),
                model=model,
                max_tokens=400 if i < 3 else 20000,
                role=role,
                action=action,
            )
            try:
                await gw.complete(request, round=i)
            except BudgetExhausted:
                pass
    return gw


async def test_report_groups_by_role_action_model_and_sums_to_the_gateway(tmp_path: Path) -> None:
    gw = await make_run(tmp_path)
    lines = load_ledger(tmp_path)
    assert [line.outcome for line in lines] == [
        "ok",
        "ok",
        "ok",
        "refused",
    ]  # 20000 tokens of gpt-4o > $0.05
    report = cost_report(lines, run_id="r1")
    assert report["total_usd"] == gw.stats().total_usd == lines[-1].total_usd
    assert (report["run_id"], report["budget_usd"], report["calls"]) == ("r1", Decimal("0.05"), 3)
    assert report["outcomes"] == {"ok": 3, "refused": 1}
    assert set(report["by_role"]) == {"Alice", "Bob", "Carol"}
    bob = report["by_role"]["Bob"]
    assert bob["calls"] == 2 and bob["cost_usd"] == lines[1].cost_usd + lines[2].cost_usd
    assert bob["prompt_tokens"] == lines[1].prompt_tokens + lines[2].prompt_tokens
    assert report["by_action"]["WriteCode"] == {
        "calls": 0,
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "cost_usd": Decimal(0),
        "outcomes": {"refused": 1},
    }
    assert sum(e["cost_usd"] for e in report["by_model"].values()) == report["total_usd"]
    decoded = msgspec.json.decode(report_json(report))
    assert (
        decoded["total_usd"] == str(report["total_usd"])
        and decoded["by_model"]["gpt-4o"]["calls"] == 1
    )


async def test_money_is_stored_as_decimal_strings(tmp_path: Path) -> None:
    await make_run(tmp_path)
    first = msgspec.json.decode((tmp_path / "costs.jsonl").read_bytes().splitlines()[0])
    assert isinstance(first["cost_usd"], str) and Decimal(first["cost_usd"]) > 0
    assert list(first)[-4:] == ["latency_ms", "t", "_prev", "_h"]  # then the chain fields
    assert "t" not in without_wall_clock(load_ledger(tmp_path)[0])


async def test_reprice_on_another_model(tmp_path: Path) -> None:
    await make_run(tmp_path)
    lines = load_ledger(tmp_path)
    on_gpt4 = reprice(lines, "gpt-4", PRICES)  # 30 in / 60 out per 1M
    for before, after in zip(lines, on_gpt4):
        expected = (before.prompt_tokens * 30 + before.completion_tokens * 60) / Decimal(10**6)
        assert after.model == "gpt-4" and after.cost_usd == expected
    assert on_gpt4[-1].total_usd == sum(line.cost_usd for line in on_gpt4) > lines[-1].total_usd
    same = [reprice([line], line.model, PRICES)[0].cost_usd for line in lines]
    assert same == [line.cost_usd for line in lines]


async def test_table_and_csv(tmp_path: Path) -> None:
    await make_run(tmp_path)
    lines = load_ledger(tmp_path)
    console = Console(width=120, record=True, color_system=None)
    console.print(render_table(cost_report(lines)))
    text = console.export_text()
    assert "by role" in text and "WriteDesign" in text and "of $0.05" in text and "3 calls" in text
    csv = ledger_csv(lines).splitlines()
    assert csv[0] == ",".join(LedgerLine.__struct_fields__) and len(csv) == 5
    fields = LedgerLine.__struct_fields__
    refused = dict(zip(fields, csv[4].split(","), strict=True))
    assert (refused["outcome"], refused["estimated"], refused["resume"]) == (
        "refused",
        "false",
        "0",
    )


def test_an_empty_or_missing_ledger(tmp_path: Path) -> None:
    assert load_ledger(tmp_path) == []
    report = cost_report([], budget=Decimal("2"))
    assert (report["total_usd"], report["budget_usd"], report["calls"], report["by_role"]) == (
        0,
        2,
        0,
        {},
    )


def test_reprice_keeps_lines_counted_at_their_reservation() -> None:
    def line(outcome: str, cost: str, estimated: bool = False) -> LedgerLine:
        return LedgerLine(
            seq=1,
            round=1,
            role="Bob",
            action="WriteDesign",
            provider="openai",
            model="gpt-4o-mini",
            prompt_tokens=0,
            completion_tokens=0,
            cached_tokens=0,
            cost_usd=Decimal(cost),
            total_usd=Decimal(cost),
            budget_usd=Decimal(1),
            attempt=1,
            outcome=outcome,  # type: ignore[arg-type]
            estimated=estimated,
            latency_ms=0.0,
            t=0.0,
        )

    lines = [line("error", "0.002", estimated=True), line("lost", "0.003"), line("error", "0")]
    repriced = reprice(lines, "gpt-4o", PRICES)
    assert [ln.cost_usd for ln in repriced] == [Decimal("0.002"), Decimal("0.003"), Decimal(0)]
    assert repriced[-1].total_usd == Decimal("0.005")


def ledger_line(outcome: str = "ok", cost: str = "0.001", **fields: object) -> LedgerLine:
    base: dict[str, object] = {
        "seq": 1,
        "round": 1,
        "role": "Edward",
        "action": "WriteTest",
        "provider": "openai",
        "model": "gpt-4o-mini",
        "prompt_tokens": 10,
        "completion_tokens": 5,
        "cached_tokens": 0,
        "cost_usd": Decimal(cost),
        "total_usd": Decimal(cost),
        "budget_usd": Decimal(1),
        "attempt": 1,
        "outcome": outcome,
        "latency_ms": 0.0,
        "t": 0.0,
    }
    return LedgerLine(**{**base, **fields})  # type: ignore[arg-type]


def test_an_actions_subjects_are_grouped_under_it_and_sum_to_it() -> None:
    lines = [
        ledger_line(cost="0.001", subject="tests/test_a.py"),
        ledger_line(cost="0.002", subject="tests/test_b.py"),
        ledger_line("error", cost="0.003", subject="tests/test_b.py", estimated=True),
        ledger_line(action="DebugError"),
    ]
    report = cost_report(lines)
    tests = report["by_action"]["WriteTest"]
    assert (tests["calls"], tests["cost_usd"]) == (3, Decimal("0.006"))
    assert {name: e["cost_usd"] for name, e in tests["subjects"].items()} == {
        "tests/test_a.py": Decimal("0.001"),
        "tests/test_b.py": Decimal("0.005"),
    }
    assert tests["subjects"]["tests/test_b.py"]["outcomes"] == {"ok": 1, "estimated": 1}
    assert "subjects" not in report["by_action"]["DebugError"]
    assert report["outcomes"] == {"ok": 3, "estimated": 1}
    assert report["by_role"]["Edward"]["cost_usd"] == Decimal("0.007")


def test_a_ledger_written_before_subjects_reads_with_none() -> None:
    old = msgspec.json.encode(ledger_line())
    assert b"subject" not in old  # an empty subject is omitted, as older ledgers lack it
    line = msgspec.json.decode(old, type=LedgerLine)
    assert (line.subject, line.what, line.shown_outcome) == ("", "WriteTest", "ok")
    named = ledger_line(subject="tests/test_a.py")
    assert named.what == "WriteTest (tests/test_a.py)"
