"""Code-and-run: scripts really run in the sandbox, failures (stderr, a failed acceptance
check) go back to the coder, and the pair stops on acceptance or after max_attempts."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from sopbus.bus import Environment, LLMRequest, Runner, RunStore
from sopbus.sops import build_team
from support.scripted_gateway import ScriptedGateway
from support.sop_runs import SCENARIOS, cli_run, events, ledger, messages, run, scenario

FIXTURES = (SCENARIOS / "fixtures" / "code_and_run.toml").read_text()


def scripts(*codes: str) -> str:
    """Fixtures answering WriteScript with these scripts, in order."""
    answers = ", ".join(json.dumps(json.dumps({"plan": "p", "code": c})) for c in codes)
    return f'[[fixture]]\naction = "WriteScript"\nresponses = [{answers}]\n'


async def test_shipped_example_fails_on_a_missing_import_then_passes_the_check(
    tmp_path: Path,
) -> None:
    out = await run(scenario("code_and_run", tmp_path))
    assert out.summary.end_reason == "stop_condition"
    assert out.summary.detail == "the script passed the acceptance check on attempt 2"
    first, second = (m["payload"] for m in messages(out, "RunScript"))
    assert first["exit_code"] == 1 and not first["accepted"]
    assert "NameError: name 'csv' is not defined" in first["stderr"]
    assert second["exit_code"] == 0 and second["accepted"] and second["check_exit_code"] == 0
    assert "ACME: 14 daily changes" in second["stdout"]
    kept = out.run_dir / "artifacts" / "attempt-2"
    assert (kept / "pct_change.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with (kept / "pct_change.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 14 and rows[0]["date"] == "2024-03-04"
    assert float(rows[0]["ACME"]) == pytest.approx((103.15 / 102.40 - 1) * 100, abs=1e-4)
    assert not (out.run_dir / "artifacts" / "attempt-1" / "pct_change.png").exists()
    assert [e["data"]["accepted"] for e in events(out, "script_ran")] == [False, True]
    assert [c["action"] for c in ledger(out)] == ["WriteScript", "WriteScript"]


async def test_a_failing_scripts_stderr_is_in_the_coders_next_prompt(tmp_path: Path) -> None:
    answers = [
        json.dumps({"plan": "p", "code": "import sys\nsys.exit(undefined_name)\n"}),
        json.dumps({"plan": "p", "code": "print('fixed')\n"}),
    ]
    gw = ScriptedGateway(answers)
    team = build_team(scenario("code_and_run", tmp_path, sop={"check": None}))
    store = RunStore(tmp_path / "run", "run")
    env = Environment("run", log=store.log)
    env.add_all(team.roles)
    result = await Runner(
        env, max_rounds=8, seed=team.seed, stop=team.stop, gateway=gw, store=store
    ).run()
    store.close()
    assert result.end_reason == "stop_condition"
    second: LLMRequest = gw.calls[1].request
    prompt = second.messages[-1].content
    assert "NameError: name 'undefined_name' is not defined" in prompt
    assert "Attempt 1: exit status 1 (failed)" in prompt
    assert "prices.csv" in gw.calls[0].request.messages[-1].content  # the data file is described


async def test_a_wrong_result_fails_the_acceptance_check_and_the_attempts_run_out(
    tmp_path: Path,
) -> None:
    wrong = (
        "import csv\nrows = list(csv.DictReader(open('prices.csv')))\n"
        "with open('pct_change.csv', 'w') as f:\n"
        "    f.write('date,ACME,GLOBEX\\n')\n"
        "    for r in rows[1:]:\n"
        "        f.write(f\"{r['date']},1.0,1.0\\n\")\n"
        "print('done')\n"
    )
    sc = scenario("code_and_run", tmp_path, sop={"max_attempts": 2}, fixtures=scripts(wrong))
    out = await run(sc)
    reports = messages(out, "RunScript")
    assert [r["payload"]["exit_code"] for r in reports] == [0, 0]
    assert [r["payload"]["check_exit_code"] for r in reports] == [1, 1]
    assert "2024-03-04 ACME: expected 0.7324, got '1.0'" in reports[0]["content"]
    assert "pct_change.png was not written" in reports[0]["content"]
    assert "acceptance check: FAILED" in reports[0]["content"]
    assert out.summary.end_reason == "error"
    assert "the script still fails after 2 attempt(s) (max_attempts=2)" in str(out.summary.error)


async def test_a_script_that_hangs_is_killed_and_reported(tmp_path: Path) -> None:
    sc = scenario(
        "code_and_run",
        tmp_path,
        sop={"max_attempts": 1, "timeout_s": 1},
        fixtures=scripts("import time\ntime.sleep(60)\n"),
    )
    out = await run(sc)
    report = messages(out, "RunScript")[0]
    assert report["payload"]["timed_out"] is True and report["payload"]["exit_code"] is None
    assert report["content"].startswith("Attempt 1: timed out (killed)")
    assert out.summary.end_reason == "error"


def test_unreadable_data_is_a_config_error_naming_the_option(tmp_path: Path) -> None:
    from sopbus.bus import ConfigError

    with pytest.raises(ConfigError) as info:
        build_team(scenario("code_and_run", tmp_path, sop={"data": ["data/nope.csv"]}))
    assert "`$.sop.data[0]`" in str(info.value) and "nope.csv" in str(info.value)


@pytest.mark.slow
def test_sopbus_run_on_the_shipped_scenario(tmp_path: Path) -> None:
    done, summary = cli_run("code_and_run", tmp_path / "runs")
    assert done.returncode == 0, done.stderr
    assert summary["detail"] == "the script passed the acceptance check on attempt 2"
