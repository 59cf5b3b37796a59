"""The money and the door of ``sopbus a2a serve``: a task its budgets cannot cover is refused
before any call; a token guards a server, and none beyond loopback is refused at start."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from support.a2a_server import CARD_PATH, as_dict, client, request, run, serving
from support.cli import sopbus
from support.nats_server import free_port
from support.paths import ROOT

pytestmark = pytest.mark.slow
DATA = ROOT / "tests" / "data" / "a2a"
TEAM = DATA / "draft_team.toml"
SLOW = DATA / "slow_draft_team.toml"
TOKEN = "k3y-0f-the-test-server-2f9c1d"


async def _refusal(url: str, metadata: dict[str, Any] | None = None) -> str:
    async with client(url, streaming=False) as made:
        try:
            async for _ in made.send_message(request("another poem", metadata)):
                pass
        except Exception as error:  # the SDK client raises the JSON-RPC error it got
            return str(error)
    raise AssertionError("the task was accepted")


def test_a_task_past_the_budgets_is_refused_before_any_call(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    flags = ("--max-budget", "0.50", "--max-total", "0.75")
    with serving(SLOW, runs, *flags, cwd=tmp_path) as served:

        async def scenario() -> tuple[str, str, str]:
            from a2a.types import CancelTaskRequest

            async with client(served.url, streaming=True) as made:
                stream = made.send_message(request("the first poem"))
                task_id = ""
                async for event in stream:
                    found = as_dict(event)
                    task_id = task_id or found.get("task", {}).get("id", "")
                    if "round" in found.get("statusUpdate", {}).get("metadata", {}).get(
                        "sopbus", {}
                    ):
                        break  # running, its $0.50 held: $0.25 of the total is left
                await stream.aclose()
                over_total = await _refusal(served.url)
                over_task = await _refusal(served.url, {"budget_usd": "2"})
                nonsense = await _refusal(served.url, {"budget_usd": "lots"})
                await made.cancel_task(CancelTaskRequest(id=task_id))
                return over_total, over_task, nonsense

        over_total, over_task, nonsense = run(scenario())
    assert "--max-total" in over_total and "$0.25 of $0.75" in over_total, over_total
    assert "nothing was run" in over_total
    assert "--max-budget" in over_task and "$0.50" in over_task, over_task
    assert "budget_usd 'lots'" in nonsense, nonsense
    # Only the first task made a run directory; the refused ones made nothing.
    assert len([p for p in runs.iterdir() if p.is_dir()]) == 1


def test_a_smaller_budget_asked_in_metadata_is_the_runs_cap(tmp_path: Path) -> None:
    with serving(TEAM, tmp_path / "runs", cwd=tmp_path) as served:

        async def send() -> dict[str, Any]:
            async with client(served.url, streaming=False) as made:
                events = [
                    as_dict(e)
                    async for e in made.send_message(request("a poem", {"budget_usd": "0.25"}))
                ]
            return events[-1]["task"]

        task = run(send())
    meta = task["metadata"]["sopbus"]
    assert meta["budget_usd"] == "0.25"
    assert (Path(meta["run_dir"]) / "summary.json").read_text().count('"budget_usd": "0.25"') == 1


def test_the_token_is_required_and_the_right_one_works(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    with serving(TEAM, tmp_path / "runs", "--token-file", token_file, cwd=tmp_path) as served:
        card = httpx.get(served.url + CARD_PATH, timeout=10).json()  # the card is public
        body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}
        headers = {"A2A-Version": "1.0"}
        none = httpx.post(served.url + "/", json=body, headers=headers, timeout=10)
        wrong = httpx.post(
            served.url + "/",
            json=body,
            headers={**headers, "Authorization": "Bearer " + TOKEN[:-1] + "x"},
            timeout=10,
        )

        async def send(token: str) -> Any:
            async with client(served.url, streaming=False, token=token) as made:
                return [as_dict(e) async for e in made.send_message(request("a poem"))][-1]

        accepted = run(send(TOKEN))
        _, err = served.stop()
    assert TOKEN not in err  # the server's log never shows it
    assert "bearer" in card["securitySchemes"]
    assert none.status_code == 401 and none.json()["error"]["code"] == -32001
    assert wrong.status_code == 401
    assert TOKEN not in wrong.text and TOKEN not in none.text
    assert accepted["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_no_token_beyond_loopback_is_refused_at_start(tmp_path: Path) -> None:
    port = free_port()
    done = sopbus("a2a", "serve", TEAM, "--port", str(port), "--host", "0.0.0.0", cwd=tmp_path)
    assert done.returncode == 2
    assert "--token-file" in done.stderr and "0.0.0.0" in done.stderr
    assert "Traceback" not in done.stderr
    with pytest.raises(httpx.TransportError):  # nothing listens
        httpx.get(f"http://127.0.0.1:{port}{CARD_PATH}", timeout=2)


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (("--token-file", "short"), "at least 16 characters"),
        (("--token-file", "missing"), "cannot read it"),
        (("--max-budget", "2", "--max-total", "1"), "--max-total"),
    ],
)
def test_a_wrong_start_is_exit_2_naming_the_flag(
    tmp_path: Path, flags: tuple[str, ...], says: str
) -> None:
    (tmp_path / "short").write_text("abc\n")
    done = sopbus("a2a", "serve", TEAM, "--port", str(free_port()), *flags, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert says in done.stderr and "Traceback" not in done.stderr
