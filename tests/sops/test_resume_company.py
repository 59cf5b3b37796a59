"""sopbus resume on the software company, as the issue asks: a real subprocess SIGKILLed at
several points (while the engineer writes files side by side, while QA analyses a failed
test run), resumed, and compared with an uninterrupted run: the same messages, the same
artifacts, and no more spend than the uninterrupted run plus the killed in-flight calls.

QA's failed test run matters here: its output goes into the next prompts, so a resume only
finds its recorded answers if that output is the same on every run (no wall-clock timings).
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import trio

from sopbus._assemble import execute
from sopbus.bus import load_scenario, read_jsonl
from sopbus.bus.llm._tape import CallRecord
from sopbus.cli._cmd_diff import messages
from support.killed_runs import (
    artifacts,
    finished,
    ledger,
    reservations,
    run_and_kill,
    sopbus,
    spent,
)
from support.paths import ROOT

MAIN = ROOT / "scenarios" / "software_company.toml"
FIXTURES = ROOT / "scenarios" / "fixtures" / "software_company.toml"


def bug_fixtures(tmp_path: Path) -> Path:
    """The canned counter.py with a bug first and fixed second, and QA's bug report for it."""
    import tomllib

    entries = tomllib.loads(FIXTURES.read_text(encoding="utf-8"))["fixture"]
    fixed = next(
        e["responses"][0]["code"]
        for e in entries
        if e.get("match") == "File to write: wordcount/counter.py"
    )
    buggy = fixed.replace('lines=text.count("\\n")', "lines=len(text.splitlines())")
    assert buggy != fixed
    fixtures: list[dict[str, Any]] = [
        {
            "action": "WriteCode",
            "match": "File to write: wordcount/counter.py",
            "responses": [json.dumps({"code": buggy}), json.dumps({"code": fixed})],
        },
        {
            "action": "DebugError",
            "responses": [
                json.dumps(
                    {
                        "analysis": "count_text counts a last line without a newline; wc does not.",
                        "fix_in": "code",
                        "files_to_fix": ["wordcount/counter.py"],
                        "instructions": "Count lines as text.count('\\n').",
                    }
                )
            ],
        },
    ]
    lines = ["simulated = true"]
    for entry in fixtures:
        lines.append("[[fixture]]")
        lines += [f"{key} = {json.dumps(value)}" for key, value in entry.items()]
    path = tmp_path / "bug.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def company(tmp_path: Path, name: str, *, latency_ms: int) -> Path:
    files = json.dumps([str(bug_fixtures(tmp_path)), str(FIXTURES)])
    text = MAIN.read_text(encoding="utf-8").replace(
        'fixtures = ["fixtures/software_company.toml"]',
        f"fixtures = {files}\nlatency_ms = {latency_ms}",
    )
    text = text.replace("review = true", "review = false")
    text = text.replace("[run]\n", f'[run]\nruns_dir = "{tmp_path / name}"\n')
    # the shipped fixtures are outside the test's folder, as the file says it allows
    text = text.replace("[scenario]\n", "[scenario]\nallow_outside = true\n", 1)
    path = tmp_path / f"{name}.toml"
    path.write_text(text, encoding="utf-8")
    return path


def in_flight_action(action: str) -> Any:
    def probe(run_dir: Path) -> bool:
        done = (
            {c.call for c in read_jsonl(run_dir / "calls.jsonl", CallRecord)}
            if (run_dir / "calls.jsonl").is_file()
            else set()
        )
        return any(
            r["data"]["action"] == action and r["data"]["call"] not in done
            for r in reservations(run_dir)
        )

    return probe


@pytest.mark.slow
@pytest.mark.parametrize("action", ["WriteCode", "DebugError"])
def test_a_killed_software_company_run_resumes_to_the_uninterrupted_result(
    action: str, tmp_path: Path
) -> None:
    baseline = trio.run(execute, load_scenario(company(tmp_path, "baseline", latency_ms=0))).run_dir
    assert [m["message"]["cause_by"] for m in messages(baseline)].count("DebugError") == 1

    run_dir = run_and_kill(
        company(tmp_path, "killed", latency_ms=400), tmp_path / "killed", in_flight_action(action)
    )
    assert not (run_dir / "summary.json").exists()
    finished(sopbus("resume", str(run_dir)))

    assert messages(run_dir) == messages(baseline)
    assert artifacts(run_dir) == artifacts(baseline)
    lines = ledger(run_dir)
    lost = [line for line in lines if line.outcome == "lost"]
    assert lost and any(line.action == action for line in lost)
    # No completed call was made again: each (round, role, action) is paid once, as in the
    # uninterrupted run; only the killed in-flight calls are paid once more.
    ok = sorted((ln.round, ln.role, ln.action) for ln in lines if ln.outcome == "ok")
    assert ok == sorted((ln.round, ln.role, ln.action) for ln in ledger(baseline))
    assert spent(run_dir) <= spent(baseline) + sum((line.cost_usd for line in lost), Decimal(0))


async def test_a_software_company_run_with_a_failed_test_round_replays_to_the_same_messages(
    tmp_path: Path,
) -> None:
    from sopbus.bus.store._fork import plan_replay

    original = await execute(load_scenario(company(tmp_path, "original", latency_ms=0)))
    scenario, continuation = plan_replay(original.run_dir, into=tmp_path / "replay")
    replay = await execute(scenario, continuation=continuation)

    assert replay.summary.end_reason == original.summary.end_reason == "idle"
    assert messages(replay.run_dir) == messages(original.run_dir)
    assert artifacts(replay.run_dir) == artifacts(original.run_dir)
    assert spent(replay.run_dir) == 0
    assert {line.outcome for line in ledger(replay.run_dir)} == {"replayed"}
