"""Traces for OpenTelemetry tools: `sopbus run --otel` and `sopbus export-otel` send the run
as a span tree over OTLP/HTTP to a real collector on 127.0.0.1 that decodes the protobuf."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from sopbus.bus import read_jsonl

pytest.importorskip("opentelemetry.sdk", reason="install the extra: pip install -e '.[otel]'")
from support.cli import sopbus
from support.otlp_server import Collected, otlp_collector
from support.tool_runs import PRICE, tool_run

pytestmark = pytest.mark.slow


def _sopbus(*args: Any, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    unset: dict[str, str | None] = {k: None for k in os.environ if k.startswith("OTEL_")}
    return sopbus(*args, env={**unset, **(env or {})})


def _run_dir(runs: Path) -> Path:
    (found,) = [p for p in runs.iterdir() if p.is_dir()]
    return found


def _by_id(spans: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {s["span_id"]: s for s in spans}


def _check_tree(spans: list[dict[str, Any]], run_dir: Path, mode: str) -> None:
    summary = json.loads((run_dir / "summary.json").read_text())
    ledger = [line for line in read_jsonl(run_dir / "costs.jsonl") if line["outcome"] != "refused"]
    ledger = [line for line in ledger if line["provider"] != "tool"]  # a tool's span has it
    events = list(read_jsonl(run_dir / "events.jsonl"))
    assert len({s["trace_id"] for s in spans}) == 1
    ids = _by_id(spans)
    (root,) = [s for s in spans if not s["parent"]]
    assert root["name"] == f"sopbus run {summary['scenario']}"
    assert root["attributes"]["sopbus.run_id"] == summary["run_id"]
    assert Decimal(root["attributes"]["sopbus.total_usd"]) == Decimal(str(summary["total_usd"]))
    rounds = [s for s in spans if s["name"].startswith("round ")]
    assert len(rounds) == sum(
        e["kind"] == "round_ended" for e in events
    )  # round_started may be left out
    assert all(ids[r["parent"]] is root for r in rounds)
    turns = [s for s in spans if s["name"].startswith("turn ")]
    want_parent = "round " if mode == "rounds" else "sopbus run"
    assert turns and all(ids[t["parent"]]["name"].startswith(want_parent) for t in turns)
    calls = [s for s in spans if s["name"].startswith("chat ")]
    assert len(calls) == len(ledger)
    for call in calls:
        turn = ids[call["parent"]]
        assert turn["name"] == f"turn {call['attributes']['sopbus.role']}"
        assert call["start"] >= turn["start"] - 1_000_000 and call["end"] <= turn["end"] + 1_000_000
        attrs = call["attributes"]
        assert attrs["gen_ai.system"] and attrs["gen_ai.request.model"]
        assert Decimal(attrs["sopbus.budget_usd"]) == Decimal(str(summary["budget_usd"]))
    assert (
        sum(c["attributes"]["gen_ai.usage.input_tokens"] for c in calls) == summary["prompt_tokens"]
    )
    assert (
        sum(c["attributes"]["gen_ai.usage.output_tokens"] for c in calls)
        == summary["completion_tokens"]
    )
    tools = [s for s in spans if s["attributes"].get("gen_ai.operation.name") == "execute_tool"]
    assert sum(Decimal(c["attributes"]["sopbus.cost_usd"]) for c in calls + tools) == Decimal(
        str(summary["total_usd"])
    )


def test_run_with_otel_sends_the_run_as_one_trace(
    tmp_path: Path, otlp: tuple[str, Collected]
) -> None:
    endpoint, got = otlp
    done = _sopbus(
        "run",
        "scenarios/software_company.toml",
        "--otel",
        "--quiet",
        "--runs-dir",
        tmp_path,
        env={"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint},
    )
    assert done.returncode == 0, done.stderr
    assert set(got.paths) == {"/v1/traces"}
    assert got.resources[0]["service.name"] == "sopbus"
    _check_tree(got.spans, _run_dir(tmp_path), "rounds")


def test_the_endpoint_variable_alone_turns_export_on_in_events_mode(
    tmp_path: Path, otlp: tuple[str, Collected]
) -> None:
    endpoint, got = otlp
    done = _sopbus(
        "run",
        "scenarios/flower_shop.toml",
        "--mode",
        "events",
        "--quiet",
        "--runs-dir",
        tmp_path,
        env={"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint},
    )
    assert done.returncode == 0, done.stderr
    _check_tree(got.spans, _run_dir(tmp_path), "events")


def test_export_otel_sends_a_finished_run_and_the_same_run_is_the_same_trace(
    tmp_path: Path,
) -> None:
    assert (
        _sopbus("run", "scenarios/flower_shop.toml", "--quiet", "--runs-dir", tmp_path).returncode
        == 0
    )
    run_dir = _run_dir(tmp_path)
    sent = []
    for _ in range(2):
        with otlp_collector() as (endpoint, got):
            done = _sopbus("export-otel", run_dir, "--endpoint", endpoint)
        assert done.returncode == 0, done.stderr
        assert f"{len(got.spans)} spans sent" in done.stdout
        sent.append(sorted((s["span_id"], s["parent"], s["name"], s["start"]) for s in got.spans))
    _check_tree(got.spans, run_dir, "rounds")
    assert sent[0] == sent[1]


def test_a_collector_that_is_down_costs_a_warning_not_the_run(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port with nothing listening
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    done = _sopbus(
        "run",
        "scenarios/flower_shop.toml",
        "--otel",
        "--quiet",
        "--runs-dir",
        tmp_path,
        env={
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
            "OTEL_EXPORTER_OTLP_TIMEOUT": "1",
        },
    )
    assert done.returncode == 0
    assert "trace not exported" in done.stderr
    assert json.loads((_run_dir(tmp_path) / "summary.json").read_text())["status"] == "completed"


async def test_each_tool_call_is_an_execute_tool_span_of_its_turn(tmp_path: Path) -> None:
    run_dir = await tool_run(tmp_path)
    with otlp_collector() as (endpoint, got):
        done = _sopbus("export-otel", run_dir, "--endpoint", endpoint)
    assert done.returncode == 0, done.stderr
    _check_tree(got.spans, run_dir, "rounds")
    ids = _by_id(got.spans)
    called = [e for e in read_jsonl(run_dir / "events.jsonl") if e["kind"] == "tool_called"]
    tools = sorted(
        (s for s in got.spans if s["name"].startswith("execute_tool ")),
        key=lambda s: s["attributes"]["gen_ai.tool.call.id"],
    )
    assert [s["attributes"]["gen_ai.tool.call.id"] for s in tools] == sorted(
        e["data"]["call"] for e in called
    )
    by_call = {e["data"]["call"]: e for e in called}
    for span in tools:
        attrs = span["attributes"]
        event = by_call[attrs["gen_ai.tool.call.id"]]
        assert span["name"] == "execute_tool get_current_time"
        assert attrs["gen_ai.operation.name"] == "execute_tool"
        assert attrs["gen_ai.tool.name"] == "get_current_time"
        assert attrs["gen_ai.tool.type"] == "function"
        assert attrs["sopbus.tool.server"] == "time"
        assert attrs["sopbus.tool.result_chars"] == event["data"]["result_chars"] > 0
        assert attrs["sopbus.tool.duration_ms"] == event["data"]["duration_ms"]
        assert Decimal(attrs["sopbus.cost_usd"]) == Decimal(PRICE)
        # Beside the model calls, under the turn of the role that made it.
        turn = ids[span["parent"]]
        assert turn["name"] == "turn Clock" and any(
            s["parent"] == turn["span_id"] and s["name"].startswith("chat ") for s in got.spans
        )
        assert span["start"] >= turn["start"] and span["end"] <= turn["end"]
        # The call ended at its event, after its duration (nanoseconds on the wire).
        assert abs(span["end"] - int(event["t"] * 1e9)) < 1_000
        assert abs((span["end"] - span["start"]) / 1e6 - event["data"]["duration_ms"]) < 0.01
    failed = [s for s in tools if s["attributes"].get("error.type")]
    assert len(failed) == 1 and failed[0]["attributes"]["error.type"] == "tool_error"
    assert failed[0]["status"] == 2  # STATUS_CODE_ERROR
    ok = next(s for s in tools if s is not failed[0])
    assert ok["status"] != 2 and "error.type" not in ok["attributes"]
