"""scenarios/flower_shop.toml: three roles declared in TOML, each with its own kind of output."""

from __future__ import annotations

import itertools
import json
import subprocess
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from sopbus.bus import read_events, read_jsonl
from support.cli import ARGV
from support.paths import ROOT


@pytest.mark.slow
def test_the_flower_shop_handles_the_order_in_three_kinds_of_output(tmp_path: Path) -> None:
    done = subprocess.run(
        [*ARGV, "run", "scenarios/flower_shop.toml", "--runs-dir", str(tmp_path), "--quiet"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    (run_dir,) = tmp_path.iterdir()
    summary: dict[str, Any] = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["max_rounds"] == 10
    assert summary["rounds"] <= 10 and Decimal(str(summary["budget_usd"])) == 10
    events: list[dict[str, Any]] = list(read_events(run_dir / "events.jsonl"))
    messages = [
        e["message"] for e in events if e["kind"] in ("message_published", "message_undelivered")
    ]
    by_role: dict[str, set[str]] = {}
    for m in messages:
        by_role.setdefault(m["sent_from"], set()).add(m["cause_by"])
    # the order, then two more customer messages injected in rounds 4 and 7
    assert (
        next(m["content"] for m in messages if m["cause_by"] == "UserRequirement") == "一束红玫瑰"
    )
    assert by_role["OrderDesk"] == {"RecordOrder"}
    assert by_role["StockKeeper"] == {"AdjustInventory"}
    assert by_role["CustomerService"] == {"ReplyToCustomer"}
    kinds = {m["cause_by"]: set(m["payload"]) for m in messages if m["payload"]}
    assert kinds["RecordOrder"] >= {"order_id", "items", "total_cny"}
    assert kinds["AdjustInventory"] >= {"changes", "stock_left"}
    assert kinds["ReplyToCustomer"] >= {"reply", "ready_by"}
    replies = [m["payload"]["reply"] for m in messages if m["cause_by"] == "ReplyToCustomer"]
    assert len(replies) == 3 and "157" in replies[-1]
    # every call is a cost line, and the running total grows with each one
    lines: list[dict[str, Any]] = list(read_jsonl(run_dir / "costs.jsonl"))
    totals = [Decimal(str(line["total_usd"])) for line in lines]
    assert len(totals) == 9
    assert all(a < b for a, b in itertools.pairwise(totals))
    assert totals[-1] == Decimal(str(summary["total_usd"])) <= 10
