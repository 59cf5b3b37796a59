"""A person as a role (``human = true``): answered on a real pseudo-terminal, from a file,
from a named pipe; validated like a model's answer; ledgered at $0 with provider ``human``;
recorded, so replay and resume never ask again."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path
from typing import Any

import pexpect
import pytest

from sopbus.bus import read_jsonl
from support.cli import ARGV, sopbus
from support.paths import ROOT

SCENARIO = ROOT / "scenarios" / "flower_shop_manager.toml"
GOOD = {"approved": True, "note": "Lovely, send it."}


def _env() -> dict[str, str]:
    return {**os.environ, "COLUMNS": "120", "NO_COLOR": "1"}


def _sopbus(*args: Any, stdin: Any = subprocess.DEVNULL) -> subprocess.CompletedProcess[str]:
    return sopbus(*args, env=_env(), stdin=stdin, timeout=120)


def _run_dir(runs: Path) -> Path:
    (found,) = [p for p in runs.iterdir() if p.is_dir()]
    return found


def _manager_lines(run_dir: Path) -> list[dict[str, Any]]:
    return [line for line in read_jsonl(run_dir / "costs.jsonl") if line["role"] == "Manager"]


def _approval(run_dir: Path) -> dict[str, Any]:
    (event,) = [
        e
        for e in read_jsonl(run_dir / "events.jsonl")
        if e["kind"].startswith("message_") and e["message"]["cause_by"] == "ApproveReply"
    ]
    payload: dict[str, Any] = event["message"]["payload"]
    return payload


def test_a_person_answers_on_a_terminal_and_a_wrong_answer_is_explained(tmp_path: Path) -> None:
    child = pexpect.spawn(
        ARGV[0],
        [*ARGV[1:], "run", str(SCENARIO), "--runs-dir", str(tmp_path)],
        cwd=str(ROOT),
        env=_env(),
        encoding="utf-8",
        timeout=60,
        dimensions=(40, 160),
    )
    child.expect("Manager is answered by you: action ApproveReply")
    child.expect("ReplyToCustomer")  # what the role received is shown
    child.expect(r"approved \(bool\): ")
    child.sendline("maybe")
    child.expect(r"note \(str\): ")
    child.sendline("first try")
    child.expect("did not fit")  # the validation error goes back to the person
    child.expect(r"approved \(bool\): ")
    child.sendline("true")
    child.expect(r"note \(str\): ")
    child.sendline(GOOD["note"])
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    run_dir = _run_dir(tmp_path)
    assert _approval(run_dir) == GOOD
    lines = _manager_lines(run_dir)
    assert [(line["attempt"], line["provider"], line["cost_usd"]) for line in lines] == [
        (1, "human", "0"),
        (2, "human", "0"),
    ]


def test_answers_from_a_file_one_a_line(tmp_path: Path) -> None:
    answers = tmp_path / "answers.jsonl"
    answers.write_text('{"approved": "perhaps", "note": "?"}\n' + json.dumps(GOOD) + "\n")
    done = _sopbus("run", SCENARIO, "--human-input", answers, "--runs-dir", tmp_path / "runs")
    assert done.returncode == 0, done.stderr
    run_dir = _run_dir(tmp_path / "runs")
    assert _approval(run_dir) == GOOD
    assert [line["outcome"] for line in _manager_lines(run_dir)] == ["ok", "ok"]
    summary = json.loads((run_dir / "summary.json").read_text())
    sim_only = sum(
        float(line["cost_usd"])
        for line in read_jsonl(run_dir / "costs.jsonl")
        if line["provider"] == "sim"
    )
    assert float(summary["total_usd"]) == pytest.approx(sim_only)


def test_a_named_pipe_plays_the_person_and_the_live_view_shows_the_wait(tmp_path: Path) -> None:
    fifo = tmp_path / "person"
    os.mkfifo(fifo)
    proc = subprocess.Popen(
        [
            *ARGV,
            "run",
            str(SCENARIO),
            "--human-input",
            str(fifo),
            "--runs-dir",
            str(tmp_path / "runs"),
        ],
        cwd=ROOT,
        env=_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:  # the run blocks on the pipe until the person answers
        seen.append(line)
        if "waiting for a person: Manager: ApproveReply" in line:
            break
    else:
        pytest.fail(f"the live view never said it waits for a person: {seen}")
    writer = threading.Thread(target=lambda: fifo.write_text(json.dumps(GOOD) + "\n"))
    writer.start()
    _rest, err = proc.communicate(timeout=60)
    writer.join()
    assert proc.returncode == 0, err
    assert _approval(_run_dir(tmp_path / "runs")) == GOOD


def test_no_terminal_and_no_answers_is_a_configuration_error_before_the_run(tmp_path: Path) -> None:
    done = _sopbus("run", SCENARIO, "--runs-dir", tmp_path / "runs")
    assert done.returncode == 2
    assert "'Manager'" in done.stderr and "--human-input" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_a_missing_answer_names_the_file_and_the_line(tmp_path: Path) -> None:
    answers = tmp_path / "answers.txt"
    answers.write_text("")
    done = _sopbus("run", SCENARIO, "--human-input", answers, "--runs-dir", tmp_path / "runs")
    assert done.returncode == 1
    summary = json.loads((_run_dir(tmp_path / "runs") / "summary.json").read_text())
    assert f"--human-input {answers}: no answer at line 1" in summary["error"]
    assert "approved, note" in summary["error"]


def test_replay_and_resume_never_ask_the_person_again(tmp_path: Path) -> None:
    answers = tmp_path / "answers.jsonl"
    answers.write_text(json.dumps(GOOD) + "\n")
    assert (
        _sopbus(
            "run", SCENARIO, "--human-input", answers, "--runs-dir", tmp_path / "runs"
        ).returncode
        == 0
    )
    run_dir = _run_dir(tmp_path / "runs")
    # No terminal and no answers: asking the person would fail the run.
    replayed = _sopbus("replay", run_dir, "--into", tmp_path / "replays")
    assert replayed.returncode == 0, replayed.stderr
    (replay_dir,) = {p.parent for p in (tmp_path / "replays").rglob("events.jsonl")}
    assert _approval(replay_dir) == GOOD
    resumed = _sopbus("resume", run_dir)
    assert resumed.returncode == 0, resumed.stderr
    assert len(_manager_lines(run_dir)) == 1  # still the one answer


def test_a_python_role_declares_a_person(tmp_path: Path) -> None:
    from sopbus.roles import Role

    class Reviewer(Role, register=False):
        name = "Reviewer"
        human = True

    person = Reviewer()
    assert person.human and person.models() == {"human"}
    assert Role(name="Plain").human is False
