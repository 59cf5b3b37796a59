"""The Python API (``sopbus.run_scenario`` and its async forms), as a user's program calls it.

The blocking form runs in a plain script and inside a running asyncio loop (what a Jupyter
cell is), each as a real subprocess; the asyncio form is awaited there too, with another
asyncio task that must keep running during the run; the trio form is awaited here, under
pytest-trio. The team is the relay of ``tests/data/resume_team`` (four rounds, an artifact
per turn) on the simulator.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from decimal import Decimal
from pathlib import Path

import pytest

import sopbus
from sopbus import RunOutcome, Verdict
from sopbus.bus import ConfigError, Message, load_ledger
from support.paths import ROOT

TEAM = ROOT / "tests" / "data" / "resume_team" / "relay_sop.py"
ARTIFACTS = ["check.md", "drafts/ann.md", "drafts/ben.md", "final.md", "plan.md"]

RELAY = """
[scenario]
name = "relay"
sop = "relay_sop:SOP"
idea = "a short guide to brewing green tea"
[run]
budget_usd = 1.0
[llm]
max_tokens = 300
latency_ms = {latency}
"""

# What a user's script prints: the outcome's fields, read through the public API only.
REPORT = """
import json

def report(label, r):
    print(json.dumps({"label": label, "run_id": r.run_id, "run_dir": str(r.run_dir),
                      "status": r.status, "end_reason": r.end_reason, "ok": r.ok,
                      "verdict": r.verdict, "total_usd": str(r.total_usd),
                      "llm_calls": r.llm_calls, "rounds": r.rounds,
                      "messages": [m.cause_by for m in r.messages()],
                      "artifacts": sorted(r.artifacts()), "plan": r.read_artifact("plan.md")}))
"""


def relay(tmp_path: Path, latency: int = 0) -> Path:
    shutil.copy(TEAM, tmp_path / TEAM.name)  # a Python SOP is found beside its scenario
    path = tmp_path / "relay.toml"
    path.write_text(RELAY.format(latency=latency))
    return path


def python(script: str, cwd: Path) -> list[dict[str, object]]:
    env = dict(os.environ)
    # Warnings are errors, as in the suite (a trio/asyncio signal clash would warn).
    warnings = ["-W", "error", "-W", "ignore:open_binary is deprecated:DeprecationWarning"]
    done = subprocess.run(
        [sys.executable, *warnings, "-c", REPORT + textwrap.dedent(script)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def check_report(found: dict[str, object], cwd: Path) -> None:
    run_dir = Path(str(found["run_dir"]))
    assert run_dir.is_absolute() and run_dir.parent == cwd / "runs"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert (found["run_id"], found["status"], found["end_reason"]) == (
        summary["run_id"],
        "completed",
        summary["end_reason"],
    )
    assert found["total_usd"] == summary["total_usd"] and Decimal(summary["total_usd"]) > 0
    assert found["llm_calls"] == summary["llm_calls"] == 5 and found["rounds"] == summary["rounds"]
    assert found["messages"] == [
        "UserRequirement",
        "RelayPlan",
        "RelayDraft",
        "RelayDraft",
        "RelayEdit",
        "RelayCheck",
    ]
    assert found["artifacts"] == ARTIFACTS
    assert found["plan"] == (run_dir / "artifacts" / "plan.md").read_text()
    assert found["ok"] is True and found["verdict"] is None


@pytest.mark.slow
def test_a_plain_script_runs_a_scenario_and_gets_its_outcome(tmp_path: Path) -> None:
    scenario = relay(tmp_path)
    (found,) = python(
        f"""
        import json
        from sopbus import run_scenario
        report("plain", run_scenario({str(scenario)!r}, runs_dir="runs"))
    """,
        cwd=tmp_path,
    )
    check_report(found, tmp_path)


@pytest.mark.slow
def test_inside_a_running_asyncio_loop_both_the_blocking_and_the_awaitable_forms_work(
    tmp_path: Path,
) -> None:
    # A Jupyter cell runs inside the kernel's asyncio loop: `asyncio.run` and `trio.run`
    # cannot be called there. Both forms are called from inside asyncio.run(...).
    scenario = relay(tmp_path, latency=50)
    blocking, awaited, ticks = python(
        f"""
        import asyncio, json
        from sopbus import run_scenario, run_scenario_asyncio
        async def main():
            report("blocking", run_scenario({str(scenario)!r}, runs_dir="runs"))
            ticks = 0
            async def ticker():
                nonlocal ticks
                while True:
                    await asyncio.sleep(0.005)
                    ticks += 1
            task = asyncio.create_task(ticker())
            result = await run_scenario_asyncio({str(scenario)!r}, runs_dir="runs")
            task.cancel()
            report("awaited", result)
            print(json.dumps({{"ticks": ticks}}))
        asyncio.run(main())
    """,
        cwd=tmp_path,
    )
    check_report(blocking, tmp_path)
    check_report(awaited, tmp_path)
    assert blocking["run_id"] != awaited["run_id"]
    # The run took 5 calls of 50 ms each on the simulator's clock; the loop served the
    # other task meanwhile (trio ran as a guest on it, not instead of it).
    assert isinstance(ticks["ticks"], int) and ticks["ticks"] > 0


async def test_a_trio_program_awaits_run_scenario_async(tmp_path: Path) -> None:
    result = await sopbus.run_scenario_async(
        relay(tmp_path), runs_dir=tmp_path / "runs", max_rounds=2, environ={}
    )
    assert isinstance(result, RunOutcome)
    assert (result.status, result.end_reason, result.rounds) == ("completed", "max_rounds", 2)
    assert sorted(result.artifacts()) == ["drafts/ann.md", "drafts/ben.md", "plan.md"]
    assert all(isinstance(m, Message) for m in result.messages())
    ledger = result.ledger()
    assert ledger == load_ledger(result.run_dir) and len(ledger) == result.llm_calls == 3
    assert sum((line.cost_usd for line in ledger), Decimal(0)) == result.total_usd
    assert result.budget_usd == Decimal("1.0")
    with pytest.raises(KeyError, match=r"has no artifact 'final.md'; it has: drafts/ann.md"):
        result.read_artifact("final.md")


async def test_the_blocking_form_inside_trio_says_which_form_to_use(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="run_scenario_async"):
        sopbus.run_scenario(relay(tmp_path), runs_dir=tmp_path / "runs")
    assert not (tmp_path / "runs").exists()


def test_the_trio_form_under_asyncio_says_which_form_to_use(tmp_path: Path) -> None:
    import asyncio

    with pytest.raises(RuntimeError, match="run_scenario_asyncio"):
        asyncio.run(sopbus.run_scenario_async(relay(tmp_path), runs_dir=tmp_path / "runs"))


def test_a_bad_override_is_a_config_error_before_anything_runs(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match=r"unknown override 'max_round'.*did you mean 'max_rounds'"
    ):
        sopbus.run_scenario(relay(tmp_path), max_round=3, runs_dir=tmp_path / "runs")
    with pytest.raises(ConfigError, match="--mode 'fast'"):
        sopbus.run_scenario(relay(tmp_path), mode="fast", runs_dir=tmp_path / "runs")
    with pytest.raises(ConfigError, match="no price for model 'gpt-9-imaginary'"):
        sopbus.run_scenario(relay(tmp_path), model="gpt-9-imaginary", runs_dir=tmp_path / "runs")
    assert not (tmp_path / "runs").exists()


def test_an_exhausted_budget_is_an_outcome_not_an_exception(tmp_path: Path) -> None:
    result = sopbus.run_scenario(
        relay(tmp_path), budget_usd="0.0001", runs_dir=tmp_path / "runs", environ={}
    )
    assert (result.status, result.end_reason, result.ok) == (
        "budget_exhausted",
        "budget_exhausted",
        False,
    )
    assert result.total_usd <= Decimal("0.0001")


def test_open_reads_a_runs_verdict_and_a_missing_summary_is_explained(tmp_path: Path) -> None:
    result = sopbus.run_scenario(
        relay(tmp_path), runs_dir=tmp_path / "runs", max_rounds=1, environ={}
    )
    path = result.run_dir / "summary.json"
    summary = json.loads(path.read_text())
    path.write_text(json.dumps({**summary, "verdict": {"passed": False, "reason": "tests failed"}}))
    again = RunOutcome.open(result.run_dir)
    # The verdict is the one sealed in the run's log, not an edited summary.json's.
    assert again.verdict == result.verdict != Verdict(passed=False, reason="tests failed")
    assert again.ok == result.ok
    assert (again.run_id, again.total_usd) == (result.run_id, result.total_usd)
    path.unlink()
    with pytest.raises(ConfigError, match=r"has no summary.json.*sopbus resume"):
        RunOutcome.open(result.run_dir)


def test_the_overrides_are_the_run_commands_flags() -> None:
    from sopbus.cli._cmd_run import OVERRIDES

    assert set(sopbus.OVERRIDES) == set(OVERRIDES)


@pytest.mark.slow
def test_a_jupyter_notebook_runs_a_scenario_with_both_forms(tmp_path: Path) -> None:
    # A real notebook on a real IPython kernel, where an asyncio loop runs under every cell.
    nbformat = pytest.importorskip("nbformat", reason="pip install nbformat (in the test extras)")
    nbclient = pytest.importorskip("nbclient", reason="pip install nbclient (in the test extras)")
    pytest.importorskip("ipykernel", reason="pip install ipykernel (in the test extras)")
    scenario = relay(tmp_path)
    cells = [
        "import asyncio\nasyncio.get_running_loop()  # the kernel's loop runs under this cell",
        f"import sopbus\nr = sopbus.run_scenario({str(scenario)!r}, runs_dir='runs')\n"
        "print(r.status, r.llm_calls, sorted(r.artifacts()))",
        f"r2 = await sopbus.run_scenario_asyncio({str(scenario)!r}, runs_dir='runs')\n"
        "print(r2.status, r2.llm_calls, r2.run_id != r.run_id)",
    ]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    client = nbclient.NotebookClient(
        notebook,
        kernel_name="python3",
        timeout=120,
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()
    printed = [
        "".join(o.get("text", "") for o in cell.outputs if o.get("name") == "stdout")
        for cell in notebook.cells
    ]
    assert printed[1] == f"completed 5 {ARTIFACTS}\n"
    assert printed[2] == "completed 5 True\n"
    assert len(list((tmp_path / "runs").iterdir())) == 2


@pytest.mark.slow
def test_interrupting_a_blocking_run_under_a_loop_cancels_it_and_keeps_its_summary(
    tmp_path: Path,
) -> None:
    # As a notebook's "interrupt kernel" does: SIGINT while run_scenario waits for its
    # worker thread under a running loop (run_until_complete keeps Python's SIGINT handler).
    import signal
    import time

    scenario = relay(tmp_path, latency=3_000)  # 4 rounds of 3 s calls: long enough to interrupt
    script = f"""
        import asyncio
        from sopbus import run_scenario
        async def main():
            try:
                run_scenario({str(scenario)!r}, runs_dir="runs")
            except KeyboardInterrupt:
                print("interrupted")
        asyncio.new_event_loop().run_until_complete(main())
    """
    env = dict(os.environ)
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(script)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not started(tmp_path) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert started(tmp_path), "the run never reached its first round"
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 0, err
    assert out == "interrupted\n"
    (run_dir,) = (tmp_path / "runs").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert (summary["status"], summary["end_reason"]) == ("cancelled", "cancelled")
    assert summary["rounds"] < 4


def started(cwd: Path) -> bool:
    """The run in ``cwd/runs`` has begun its first round (its setup is behind it)."""
    return any("round_started" in p.read_text() for p in cwd.glob("runs/*/events.jsonl"))


def test_cancelling_the_asyncio_form_cancels_the_run_and_waits_for_its_summary(
    tmp_path: Path,
) -> None:
    import asyncio

    scenario = relay(tmp_path, latency=3_000)

    async def main() -> None:
        task = asyncio.create_task(
            sopbus.run_scenario_asyncio(scenario, runs_dir=tmp_path / "runs", environ={})
        )
        while not started(tmp_path):
            await asyncio.sleep(0.02)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    (run_dir,) = (tmp_path / "runs").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())  # written before the await ended
    assert (summary["status"], summary["end_reason"], summary["rounds"]) == (
        "cancelled",
        "cancelled",
        1,
    )
