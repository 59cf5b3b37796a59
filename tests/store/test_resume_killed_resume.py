"""A ``sopbus resume`` killed at each of its own steps (a stepped fault point: the process
SIGKILLs itself there, every time) and resumed again ends as if it had never been killed:
the same messages, every call the server answered in the ledger once (``ok``, or ``lost``
at its reservation when its answer never reached the run), none forgotten, none paid twice.

The server is a real OpenAI-compatible one (tests/support/openai_server.py): its request
log is what the provider billed, so "no reservation is forgotten" is checked against it.
"""

from __future__ import annotations

import signal
from decimal import Decimal
from functools import partial
from pathlib import Path

import pytest
import trio

from sopbus._assemble import execute
from sopbus.bus import LedgerLine, load_scenario, read_jsonl
from sopbus.bus._util._faults import VARIABLE
from sopbus.cli._cmd_diff import messages
from support.cli import sopbus
from support.openai_server import Answer, OpenAIServer
from support.teams import pipeline

KEY = {"OPENAI_API_KEY": "sk-test-secret"}

# Where the resume is killed, in the order it reaches them, and how many calls the run has
# ledgered lost at the end: the first run's call in flight, and one more where the resume
# was killed with a call of its own answered but not yet written.
STEPS = {
    "resume:linked": 1,  # the old log has its new name, events.jsonl is still the old one
    "resume:rotated": 1,  # events.jsonl is new and empty
    "run:started": 1,  # run_started logged, scenario.toml not yet rewritten
    "resume:noted": 1,  # the resumed note logged, no lost line yet
    "resume:lost": 1,  # the lost line written
    "llm:answered": 2,  # the resume's first live call answered, not yet written
}


def scenario(tmp_path: Path, server: OpenAIServer, name: str) -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(
        pipeline(
            ("Olga", "Outline"),
            ("Wes", "Write"),
            ("Pia", "Polish"),
            name="pipeline",
            run={"runs_dir": str(tmp_path / name)},
            llm={"provider": "openai", "base_url": server.base_url, "max_tokens": 200},
        )
    )
    return path


def ledger(run_dir: Path) -> list[LedgerLine]:
    return list(read_jsonl(run_dir / "costs.jsonl", LedgerLine))


def killed_at(step: str, *argv: str | Path) -> None:
    done = sopbus(*argv, "--quiet", env={**KEY, VARIABLE: step})
    assert done.returncode == -signal.SIGKILL, f"not killed at {step}: {done.stderr}"


@pytest.mark.slow
@pytest.mark.parametrize("step", list(STEPS))
def test_a_resume_killed_at_each_step_resumes_to_the_uninterrupted_run(
    step: str, openai_server: OpenAIServer, tmp_path: Path
) -> None:
    openai_server.script(Answer("a line about tea"))
    baseline = trio.run(
        partial(execute, load_scenario(scenario(tmp_path, openai_server, "base")), environ=KEY)
    ).run_dir
    billed_before = len(openai_server.requests)
    assert billed_before == 3

    path = scenario(tmp_path, openai_server, "killed")
    # The first run dies with Wes's answer billed by the server but written nowhere.
    killed_at("llm:answered#2", "run", path)
    (run_dir,) = (tmp_path / "killed").iterdir()
    killed_at(step, "resume", run_dir)
    done = sopbus("resume", run_dir, "--quiet", env=KEY)
    assert done.returncode == 0, done.stderr

    assert messages(run_dir) == messages(baseline)
    lines = ledger(run_dir)
    billed = len(openai_server.requests) - billed_before
    # Every request the server billed is in the ledger once: answered, or lost.
    assert billed == sum(line.outcome in ("ok", "lost") for line in lines)
    assert sorted((ln.round, ln.role) for ln in lines if ln.outcome == "ok") == sorted(
        (ln.round, ln.role) for ln in ledger(baseline)
    )
    lost = [line for line in lines if line.outcome == "lost"]
    assert len(lost) == STEPS[step] and lost[0].role == "Wes"
    assert len({line.lost_call for line in lost}) == len(lost) and all(ln.lost_call for ln in lost)
    spent = sum((line.cost_usd for line in lines), Decimal(0))
    assert spent == sum((ln.cost_usd for ln in ledger(baseline)), Decimal(0)) + sum(
        (line.cost_usd for line in lost), Decimal(0)
    )
    assert [ln.seq for ln in lines] == list(range(1, len(lines) + 1))
    verified = sopbus("verify", run_dir)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    # The run is whole: a replay answers every call from its recording.
    replayed = sopbus("replay", run_dir, "--into", tmp_path / "replay", "--quiet")
    assert replayed.returncode == 0, replayed.stderr
    assert len(openai_server.requests) - billed_before == billed


@pytest.mark.slow
def test_a_ledger_line_restored_by_a_killed_resume_is_not_restored_twice(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    openai_server.script(Answer("a line about tea"))
    path = scenario(tmp_path, openai_server, "cut")
    # Wes's answer is in calls.jsonl, its ledger line never made it to costs.jsonl.
    killed_at("llm:journaled#2", "run", path)
    (run_dir,) = (tmp_path / "cut").iterdir()
    assert len(ledger(run_dir)) == 1
    killed_at("resume:recovered", "resume", run_dir)
    assert len(ledger(run_dir)) == 2
    done = sopbus("resume", run_dir, "--quiet", env=KEY)
    assert done.returncode == 0, done.stderr

    lines = ledger(run_dir)
    assert [(ln.seq, ln.role, ln.outcome) for ln in lines] == [
        (1, "Olga", "ok"),
        (2, "Wes", "ok"),
        (3, "Pia", "ok"),
    ]
    assert len(openai_server.requests) == 3  # Wes's call was not made again
    assert sopbus("verify", run_dir).returncode == 0
