"""``sopbus costs`` as a user reads it, on runs that end in the ways that matter: the budget
refuses the first call, the endpoint cannot be reached, a company of roles writes files.
Each run is a subprocess on the embedded simulator (or an openai provider pointed at a port
nobody listens on), then ``costs`` reads it back as a table at 80 columns, JSON and CSV."""

from __future__ import annotations

import csv
import io
import json
import socket
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from sopbus.bus.money import money
from support.cli import sopbus
from support.paths import DATA

pytestmark = pytest.mark.slow  # every test here starts sopbus as a subprocess

PAIR = DATA / "scenarios" / "review_pair.toml"


def ok(*args: str | Path, cwd: Path, env: dict[str, str | None] | None = None) -> str:
    done = sopbus(*args, cwd=cwd, columns=80, env=env)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return done.stdout


def ledger(runs: Path) -> list[dict[str, Any]]:
    (run,) = runs.iterdir()
    return [json.loads(line) for line in (run / "costs.jsonl").read_text().splitlines()]


def row(table: str, first: str) -> list[str]:
    """The cells of the table row whose first cell is ``first``."""
    for line in table.splitlines():
        cells = [cell.strip() for cell in line.strip("│ ").split("│")]
        if cells[0] == first:
            return cells
    raise AssertionError(f"no row {first!r} in\n{table}")


def fits(table: str) -> None:
    assert max(len(line) for line in table.splitlines()) <= 80, table
    assert "…" not in table, table  # nothing was cut to make it fit


def test_a_refused_first_call_is_shown_with_why_the_run_stopped(tmp_path: Path) -> None:
    done = sopbus("run", PAIR, "--runs-dir", "runs", "--budget", "0.00001", "--quiet", cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    (refused,) = ledger(tmp_path / "runs")
    table = ok("costs", "last", cwd=tmp_path)
    fits(table)
    assert row(table, "Writer")[1:] == ["0", "0", "0", "0.00", "1 refused"]
    assert "total $0.00 of $0.00001 (0% of the cap), 0 calls, 1 refused (not sent)" in table
    worst = money(Decimal(refused["reserved_usd"]))
    assert worst == "$0.000179"
    said = " ".join(table.split())  # the reason line may wrap at 80 columns
    assert (
        f"run ended budget_exhausted: Writer Draft was refused, not sent: its worst case "
        f"{worst} did not fit the budget ($0.00 of $0.00001 spent)" in said
    )
    assert "SIMULATED by the sim provider, no model wrote it" in said
    assert "would have cost at gpt-4o-mini prices" in said
    report = json.loads(ok("costs", "last", "--json", cwd=tmp_path))
    assert (report["simulated"], report["status"], report["end_reason"]) == (
        True,
        "budget_exhausted",
        "budget_exhausted",
    )
    assert report["outcomes"] == {"refused": 1} and report["calls"] == 0
    assert report["by_action"]["Draft"]["outcomes"] == {"refused": 1}
    assert worst in report["stopped"]


@contextmanager
def dropping_server() -> Iterator[str]:
    """The base URL of a server that takes each connection and closes it unanswered: the
    run's check that something listens passes, and every call fails to reach it. (Where
    nothing listens at all, the run is refused before it starts: test_cli_surprises.)"""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except OSError:  # the listener was closed: the test is over
                return
            connection.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        listener.close()
        thread.join(timeout=10)


def test_an_unreachable_endpoint_shows_three_errors_and_no_simulated_mark(
    tmp_path: Path,
) -> None:
    env: dict[str, str | None] = {"OPENAI_API_KEY": "not-needed"}
    with dropping_server() as url:
        done = _run_against(url, tmp_path, env)
    assert done.returncode == 1, done.stderr
    assert [line["outcome"] for line in ledger(tmp_path / "runs")] == ["error"] * 3
    table = ok("costs", "last", cwd=tmp_path, env=env)
    fits(table)
    assert row(table, "Draft")[1:] == ["3", "0", "0", "0.00", "3 error"]
    said = " ".join(table.split())
    assert "3 calls (3 error)" in said
    assert "run ended failed (error): role 'Writer' failed in round 1: ProviderError: " in said
    assert f"cannot reach {url}" in said and "SIMULATED" not in said
    report = json.loads(ok("costs", "last", "--json", cwd=tmp_path, env=env))
    assert (report["simulated"], report["outcomes"]) == (False, {"error": 3})


def _run_against(
    url: str, tmp_path: Path, env: dict[str, str | None]
) -> subprocess.CompletedProcess[str]:
    return sopbus(
        "run",
        PAIR,
        "--runs-dir",
        "runs",
        "--provider",
        "openai",
        "--base-url",
        url,
        "--quiet",
        cwd=tmp_path,
        env=env,
    )


@pytest.fixture(scope="module")
def company(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A scratch directory where the shipped software company ran once (into ``runs/``)."""
    cwd = tmp_path_factory.mktemp("company")
    done = sopbus("run", "software_company", "--runs-dir", "runs", "--quiet", cwd=cwd)
    assert done.returncode == 0, done.stderr
    return cwd


def test_two_write_tests_say_which_file_each_wrote(company: Path) -> None:
    tests = [line for line in ledger(company / "runs") if line["action"] == "WriteTest"]
    subjects = [line["subject"] for line in tests]
    assert len(subjects) == 2 and len(set(subjects)) == 2
    assert all(s.startswith("tests/test_") and s.endswith(".py") for s in subjects)
    table = ok("costs", "last", cwd=company)
    fits(table)
    for line in tests:
        assert row(table, line["subject"])[1:] == [
            "1",
            f"{line['prompt_tokens']:,}",
            f"{line['completion_tokens']:,}",
            money(Decimal(line["cost_usd"]))[1:],
            "1 ok",
        ]
    # The action's own row still sums its calls.
    total = sum(Decimal(line["cost_usd"]) for line in tests)
    assert row(table, "WriteTest")[1] == "2" and row(table, "WriteTest")[4] == money(total)[1:]
    report = json.loads(ok("costs", "last", "--json", cwd=company))
    assert set(report["by_action"]["WriteTest"]["subjects"]) == set(subjects)
    assert Decimal(report["by_action"]["WriteTest"]["cost_usd"]) == total
    assert Decimal(report["total_usd"]) == sum(
        Decimal(e["cost_usd"]) for e in report["by_action"].values()
    )


def test_the_log_names_who_spent_each_call_in_digits_that_show_it(company: Path) -> None:
    (run,) = (company / "runs").iterdir()
    log = (run / "run.log").read_text()
    for line in ledger(company / "runs"):
        cost = money(Decimal(line["cost_usd"]))
        assert cost != "$0.00" and cost.startswith("$0.000")  # a small call, still readable
        who = f"{line['role']} {line['action']}"
        if line.get("subject"):
            who += f" ({line['subject']})"
        assert f"| Current cost: {cost} by {who}, prompt_tokens: {line['prompt_tokens']}," in log
    assert "Current cost: $0.000 " not in log


def test_csv_spells_values_as_the_json_does(company: Path) -> None:
    lines = ledger(company / "runs")
    text = ok("costs", "last", "--csv", cwd=company)
    assert "False" not in text and "True" not in text
    rows = list(csv.DictReader(io.StringIO(text)))
    assert len(rows) == len(lines)
    for got, line in zip(rows, lines, strict=True):
        assert (got["resume"], got["estimated"], got["status"]) == ("0", "false", "")
        assert (got["cost_usd"], got["subject"]) == (line["cost_usd"], line.get("subject", ""))
        assert got["latency_ms"] == json.dumps(line["latency_ms"])
