"""A role answered by another agent: ``agent = "a2a.NAME"`` with ``[a2a.NAME]``, the agent
being a second ``sopbus a2a serve``; its call recorded like a tool call, replayed at $0
with the agent stopped, and an agent that is down or slow a clear error naming it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from support.a2a_server import serving
from support.cli import sopbus
from support.nats_server import free_port
from support.paths import ROOT

pytestmark = pytest.mark.slow
DATA = ROOT / "tests" / "data" / "a2a"


def _scenario(tmp_path: Path, url: str, timeout_s: int = 120) -> Path:
    text = (DATA / "remote_editor.toml").read_text()
    text = text.replace('"http://127.0.0.1:9"', json.dumps(url))
    text = text.replace("timeout_s = 120", f"timeout_s = {timeout_s}")
    path = tmp_path / "remote_editor.toml"
    path.write_text(text)
    return path


def _messages(run_dir: Path) -> list[dict[str, Any]]:
    shown = sopbus("show", run_dir, "--json")
    assert shown.returncode == 0, shown.stderr
    return [json.loads(line) for line in shown.stdout.splitlines()]


def _runs(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []


def test_a_role_that_is_another_sopbus_server_and_its_replay_without_it(tmp_path: Path) -> None:
    remote_runs, local_runs = tmp_path / "remote", tmp_path / "local"
    with serving(DATA / "draft_team.toml", remote_runs, cwd=tmp_path) as served:
        scenario = _scenario(tmp_path, served.url)
        done = sopbus("run", scenario, "--quiet", "--runs-dir", local_runs, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    (run_dir,) = _runs(local_runs)
    (remote_run,) = _runs(remote_runs)  # the remote team ran once
    answer = next(m for m in _messages(run_dir) if m["cause_by"] == "EditRemotely")
    assert answer["from"] == "Editors" and answer["parents"] == ["m2"]
    final = (remote_run / "artifacts" / "final" / "2_Editor.md").read_text()
    assert "## final/2_Editor.md" in answer["content"] and final in answer["content"]
    # Recorded like a tool call: the event, the calls record, the priced ledger line.
    events = [json.loads(x) for x in (run_dir / "events.jsonl").read_text().splitlines()]
    (called,) = [e for e in events if e["kind"] == "tool_called"]
    assert called["data"]["server"] == "editors" and called["data"]["cost_usd"] == "0.01"
    assert "a haiku" not in called["data"]["arguments"]  # the draft went, not the idea
    ledger = [json.loads(x) for x in (run_dir / "costs.jsonl").read_text().splitlines()]
    assert [line["cost_usd"] for line in ledger if line["model"] == "editors.send"] == ["0.01"]
    assert "editors.send" in (run_dir / "calls.jsonl").read_text()

    # The remote server is stopped now: the replay takes the answer from the record.
    replay = sopbus("replay", run_dir, "--quiet", cwd=tmp_path)
    assert replay.returncode == 0, replay.stderr
    replayed = next(p for p in _runs(local_runs) if p != run_dir)
    summary = json.loads((replayed / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["total_usd"] == "0"
    again = next(m for m in _messages(replayed) if m["cause_by"] == "EditRemotely")
    assert again["content"] == answer["content"]
    assert _runs(remote_runs) == [remote_run]  # nothing reached the remote team again


def test_an_agent_that_is_down_is_an_error_naming_it(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    scenario = _scenario(tmp_path, url)
    done = sopbus("run", scenario, "--quiet", "--runs-dir", tmp_path / "runs", cwd=tmp_path)
    assert done.returncode != 0
    said = done.stdout + done.stderr
    assert "'editors'" in said and url in said and "[a2a.editors].url" in said, said
    assert "Traceback" not in said


def test_a_slow_agent_is_an_error_naming_its_timeout(tmp_path: Path) -> None:
    with serving(DATA / "slow_draft_team.toml", tmp_path / "remote", cwd=tmp_path) as served:
        scenario = _scenario(tmp_path, served.url, timeout_s=3)
        done = sopbus("run", scenario, "--quiet", "--runs-dir", tmp_path / "runs", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    (run_dir,) = _runs(tmp_path / "runs")
    summary = json.loads((run_dir / "summary.json").read_text())
    error = summary["error"] or summary["detail"]
    assert "'editors'" in error and "3 s" in error and "[a2a.editors].timeout_s" in error, error


def test_an_agent_role_naming_no_table_is_a_config_error(tmp_path: Path) -> None:
    scenario = _scenario(tmp_path, "http://127.0.0.1:9")
    scenario.write_text(
        scenario.read_text().replace('agent = "a2a.editors"', 'agent = "a2a.editor"')
    )
    done = sopbus("validate", scenario, cwd=tmp_path)
    assert done.returncode == 2
    assert "a2a.editor" in done.stderr and "a2a.editors" in done.stderr and ".agent" in done.stderr


def test_resume_after_a_kill_does_not_call_the_agent_twice(tmp_path: Path) -> None:
    remote_runs, local_runs = tmp_path / "remote", tmp_path / "local"
    with serving(DATA / "draft_team.toml", remote_runs, cwd=tmp_path) as served:
        scenario = _scenario(tmp_path, served.url)
        # Killed (SIGKILL) right after the remote answer is in calls.jsonl, before the
        # run logged it or published it.
        killed = sopbus(
            "run", scenario, "--quiet", "--runs-dir", local_runs,
            cwd=tmp_path, env={"SOPBUS_KILL_AT": "tool:recorded"},
        )  # fmt: skip
        assert killed.returncode == -9, killed.stderr
        (run_dir,) = _runs(local_runs)
        assert len(_runs(remote_runs)) == 1
        resumed = sopbus("resume", run_dir, "--quiet", cwd=tmp_path)
        assert resumed.returncode == 0, resumed.stderr
        assert len(_runs(remote_runs)) == 1  # the recorded answer was used, not a new call
    answer = next(m for m in _messages(run_dir) if m["cause_by"] == "EditRemotely")
    (remote_run,) = _runs(remote_runs)
    final = (remote_run / "artifacts" / "final" / "2_Editor.md").read_text()
    assert final in answer["content"]
    ledger = [json.loads(x) for x in (run_dir / "costs.jsonl").read_text().splitlines()]
    assert [line["cost_usd"] for line in ledger if line["model"] == "editors.send"] == ["0.01"]


def test_an_agent_whose_task_fails_is_an_error_naming_it(tmp_path: Path) -> None:
    # The remote team's every run is capped below one call: its task ends failed.
    tiny = ("--max-budget", "0.0001", "--max-total", "1")
    with serving(DATA / "draft_team.toml", tmp_path / "remote", *tiny, cwd=tmp_path) as served:
        scenario = _scenario(tmp_path, served.url)
        done = sopbus("run", scenario, "--quiet", "--runs-dir", tmp_path / "runs", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    (run_dir,) = _runs(tmp_path / "runs")
    summary = json.loads((run_dir / "summary.json").read_text())
    error = summary["error"] or summary["detail"]
    assert "'editors'" in error and served.url in error, error
    assert "TASK_STATE_FAILED" in error and "budget_exhausted" in error, error
