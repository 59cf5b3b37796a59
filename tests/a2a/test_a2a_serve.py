"""``sopbus a2a serve`` started as a user starts it, talked to with the official a2a-sdk
client: the card, send, stream, get, cancel, and the run behind each task."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from support.a2a_server import CARD_PATH, as_dict, client, request, run, serving
from support.cli import sopbus
from support.paths import ROOT

pytestmark = pytest.mark.slow
DATA = ROOT / "tests" / "data" / "a2a"
TEAM = DATA / "draft_team.toml"
SLOW = DATA / "slow_draft_team.toml"


def test_the_card_says_what_the_scenario_declares(tmp_path: Path) -> None:
    with serving(TEAM, tmp_path / "runs", cwd=tmp_path) as served:

        async def card() -> Any:
            from a2a.client import A2ACardResolver

            async with httpx.AsyncClient() as http:
                return as_dict(await A2ACardResolver(http, served.url).get_agent_card())

        found = run(card())
    assert found["name"] == "draft-team"
    assert found["description"] == "A writer drafts the idea, an editor polishes the draft"
    assert [s["id"] for s in found["skills"]] == ["writer", "editor"]
    assert found["skills"][1]["tags"] == ["Polish"]
    assert "Watches WriteDraft" in found["skills"][1]["description"]
    assert found["capabilities"]["streaming"] is True
    assert found["defaultInputModes"] == ["text/plain"]
    assert found["supportedInterfaces"][0]["protocolVersion"] == "1.0"
    assert "securitySchemes" not in found  # no token on loopback


def test_a_sent_message_is_a_run_and_the_task_holds_its_result(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    with serving(TEAM, runs, cwd=tmp_path) as served:

        async def send() -> tuple[dict[str, Any], dict[str, Any]]:
            async with client(served.url, streaming=False) as made:
                events = [as_dict(e) async for e in made.send_message(request("a poem on rain"))]
                task = events[-1]["task"]
                from a2a.types import GetTaskRequest

                again = as_dict(await made.get_task(GetTaskRequest(id=task["id"])))
                return task, again

        task, got = run(send())
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    meta = task["metadata"]["sopbus"]
    run_dir = Path(meta["run_dir"])
    assert run_dir.parent == runs.absolute() and run_dir.name == meta["run_id"]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "completed"
    assert meta["spent_usd"] == summary["total_usd"] and summary["total_usd"] != "0"
    assert meta["budget_usd"] == "1.00" == summary["budget_usd"]
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    first = next(e for e in events if e["kind"] == "message_published")
    assert first["message"]["content"] == "a poem on rain"  # the message is the idea
    names = {a["name"]: a["parts"][0]["text"] for a in task["artifacts"]}
    assert set(names) == {"drafts/1_Writer.md", "final/2_Editor.md"}
    assert names["final/2_Editor.md"] == (run_dir / "artifacts/final/2_Editor.md").read_text()
    assert got["id"] == task["id"] and got["status"]["state"] == "TASK_STATE_COMPLETED"
    assert got["metadata"]["sopbus"]["run_id"] == meta["run_id"]
    # The run is a normal run: the CLI reads and verifies it.
    assert sopbus("verify", run_dir).returncode == 0
    costs = sopbus("costs", run_dir, "--json")
    assert costs.returncode == 0 and meta["spent_usd"] in costs.stdout


def test_the_stream_carries_the_runs_progress(tmp_path: Path) -> None:
    with serving(TEAM, tmp_path / "runs", cwd=tmp_path) as served:

        async def stream() -> list[dict[str, Any]]:
            async with client(served.url, streaming=True) as made:
                return [as_dict(e) async for e in made.send_message(request("a poem on rain"))]

        events = run(stream())
    assert events[0]["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"
    states = [e["statusUpdate"]["status"]["state"] for e in events if "statusUpdate" in e]
    assert states[0] == "TASK_STATE_WORKING" and states[-1] == "TASK_STATE_COMPLETED"
    progress = [
        e["statusUpdate"]["metadata"]["sopbus"]
        for e in events
        if "statusUpdate" in e
        and "round" in e["statusUpdate"].get("metadata", {}).get("sopbus", {})
    ]
    assert progress, events
    assert progress[-1]["round"] >= 2 and progress[-1]["spent_usd"] != "0"
    texts = [
        e["statusUpdate"]["status"]["message"]["parts"][0]["text"]
        for e in events
        if "statusUpdate" in e
    ]
    assert any(t.startswith("round ") and "spent $" in t for t in texts), texts
    assert sum("artifactUpdate" in e for e in events) == 2


def test_cancel_stops_the_run_cleanly_and_it_resumes(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    with serving(SLOW, runs, cwd=tmp_path) as served:

        async def start_and_cancel() -> tuple[dict[str, Any], dict[str, Any]]:
            from a2a.types import CancelTaskRequest, GetTaskRequest

            async with client(served.url, streaming=True) as made:
                stream = made.send_message(request("a poem on rain"))
                task_id = ""
                async for event in stream:
                    found = as_dict(event)
                    task_id = task_id or found.get("task", {}).get("id", "")
                    update = found.get("statusUpdate", {})
                    if "round" in update.get("metadata", {}).get("sopbus", {}):
                        break  # the run is in its first call (a minute long)
                await stream.aclose()
                cancelled = as_dict(await made.cancel_task(CancelTaskRequest(id=task_id)))
                got = as_dict(await made.get_task(GetTaskRequest(id=task_id)))
                return cancelled, got

        cancelled, got = run(start_and_cancel())
    assert cancelled["status"]["state"] == "TASK_STATE_CANCELED"
    assert got["status"]["state"] == "TASK_STATE_CANCELED"
    meta = got["metadata"]["sopbus"]
    run_dir = Path(meta["run_dir"])
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "cancelled" and meta["status"] == "cancelled"
    assert sopbus("verify", run_dir).returncode == 0
    # Resumable: what `sopbus resume` plans from the directory (resuming it for real
    # would wait out the simulator's minute per call).
    from sopbus.bus.store import plan_resume

    scenario, _ = plan_resume(run_dir)
    assert scenario.idea == "a poem on rain"


def test_bad_requests_are_json_rpc_errors_and_the_server_lives(tmp_path: Path) -> None:
    with serving(TEAM, tmp_path / "runs", cwd=tmp_path) as served:
        post = lambda body, **kw: httpx.post(served.url + "/", content=body, timeout=30, **kw)  # noqa: E731
        version = {"A2A-Version": "1.0", "Content-Type": "application/json"}
        unknown = post(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "Nope"}), headers=version)
        assert unknown.json()["error"]["code"] == -32601
        bad = post(
            json.dumps(
                {"jsonrpc": "2.0", "id": 2, "method": "SendMessage", "params": {"message": 5}}
            ),
            headers=version,
        )
        assert bad.json()["error"]["code"] == -32602
        garbage = post(b"{not json", headers=version)
        assert garbage.json()["error"]["code"] == -32700
        huge = post(
            b'{"jsonrpc": "2.0", "id": 3, "method": "SendMessage", "params": {"x": "'
            + b"a" * (2 << 20)
            + b'"}}',
            headers=version,
        )
        assert huge.status_code == 413 and huge.json()["error"]["code"] == -32600
        empty = post(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 4,
                    "method": "SendMessage",
                    "params": {
                        "message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": " "}]}
                    },
                }
            ),
            headers=version,
        )
        assert "no text" in empty.json()["error"]["message"]
        old = post(
            json.dumps({"jsonrpc": "2.0", "id": 5, "method": "GetTask", "params": {"id": "x"}}),
            headers={"A2A-Version": "9.0", "Content-Type": "application/json"},
        )
        assert "version" in old.json()["error"]["message"].lower()
        # Still serving, and no traceback went back to a caller or to the log.
        assert httpx.get(served.url + CARD_PATH, timeout=10).status_code == 200
        code, err = served.stop()
    for answer in (unknown, bad, garbage, huge, empty, old):
        assert "Traceback" not in answer.text
    assert "Traceback" not in err
    assert code == 0, err
