"""``sopbus mcp`` as an IDE agent uses it: the real command in a subprocess, spoken to over
stdio by the SDK's own client. Its tools list the examples, validate a shipped scenario and
a broken one, run a small shipped one under a budget and read it back (the same data as
``costs --json`` and ``show --json``); an ask above ``--max-budget`` runs nothing, a run's
spend stays under its ask, and nothing a run prints reaches the protocol on stdout."""

from __future__ import annotations

import json
import shutil
from contextlib import AbstractAsyncContextManager
from decimal import Decimal
from pathlib import Path

import pytest
import trio

from support.cli import sopbus
from support.mcp_session import Server
from support.mcp_session import served as served_in
from support.paths import DATA, SCENARIOS

pytestmark = pytest.mark.slow

TOOLS = {"list_examples", "validate_scenario", "run_scenario", "run_summary", "run_costs"}
TOOLS |= {"run_messages"}


def served(cwd: Path, *flags: str) -> AbstractAsyncContextManager[Server]:
    """The server of these tests: their scenarios are files in its working directory."""
    return served_in(cwd, "--scenario-dir", ".", *flags)


async def test_the_tools_are_listed_with_schemas_a_model_can_use(tmp_path: Path) -> None:
    async with served(tmp_path, "--max-budget", "0.5") as server:
        listed = {tool.name: tool for tool in (await server.session.list_tools()).tools}
        examples = await server.data("list_examples")
    assert set(listed) == TOOLS
    for tool in listed.values():
        assert tool.description and len(tool.description) > 60, tool.name
        for name, schema in tool.input_schema.get("properties", {}).items():
            assert schema.get("description"), f"{tool.name}.{name} has no description"
    run = listed["run_scenario"]
    assert set(run.input_schema["required"]) == {"scenario", "budget"}
    assert set(run.input_schema["properties"]) == {
        "scenario",
        "budget",
        "max_rounds",
        "idea",
        "seed",
    }
    budget = run.input_schema["properties"]["budget"]["description"]
    assert "0.5" in budget and "--max-budget" in budget
    assert run.output_schema is not None and "run_id" in run.output_schema["properties"]
    shipped = json.loads(sopbus("examples", "--json").stdout)
    assert examples["examples"] == shipped
    assert {"flower_shop", "software_company"} <= {e["name"] for e in examples["examples"]}


async def test_the_server_says_its_name_and_the_installed_version(tmp_path: Path) -> None:
    from importlib.metadata import version

    async with served(tmp_path) as server:
        info = server.info.server_info
    assert (info.name, info.version) == ("sopbus", version("sopbus"))


async def test_validate_gives_errors_and_warnings_as_data(tmp_path: Path) -> None:
    broken = tmp_path / "broken.toml"
    broken.write_text(
        '[scenario]\nname = "broken"\n\n[[roles]]\nname = "Alice"\nwatch = ["WritePDR"]\n',
        encoding="utf-8",
    )
    async with served(tmp_path) as server:
        shipped = await server.data("validate_scenario", scenario="flower_shop")
        bad = await server.data("validate_scenario", scenario="broken.toml")
        unknown = await server.error("validate_scenario", scenario="flowr_shop")
        missing = await server.error("validate_scenario", scenario="nowhere/team.toml")
    assert shipped["valid"] is True and shipped["errors"] == []
    assert shipped["scenario"] == str(SCENARIOS / "flower_shop.toml")
    assert any("ReplyToCustomer" in w and "watched by nobody" in w for w in shipped["warnings"])
    declared = {line["what"] for line in shipped["declares"]}
    assert {"scenario", "role", "action", "llm"} <= declared
    assert any("OrderDesk" in line["text"] for line in shipped["watch_graph"])
    assert bad["valid"] is False and len(bad["errors"]) == 1
    assert str(broken) in bad["errors"][0] and "$.roles[0].watch[0]" in bad["errors"][0]
    assert "did you mean 'WritePRD'" in bad["errors"][0]
    assert "did you mean `flower_shop`" in unknown and "sopbus examples" in unknown
    assert "nowhere/team.toml" in missing and "list_examples" in missing


async def test_a_run_under_a_budget_is_read_back_as_the_commands_read_it(tmp_path: Path) -> None:
    async with served(tmp_path) as server:
        ran = await server.data("run_scenario", scenario="flower_shop", budget=0.05, max_rounds=3)
        run_id = ran["run_id"]
        summary = await server.data("run_summary", run=run_id)
        costs = await server.data("run_costs", run=run_id[:-2])  # a unique prefix will do
        messages = await server.data("run_messages", run="last")
        round_1 = await server.data("run_messages", run=run_id, round=1)
        no_round = await server.error("run_messages", run=run_id, round=99)
        no_run = await server.error("run_summary", run="nosuchrun")
    run_dir = tmp_path / "runs" / run_id
    assert Path(ran["run_dir"]) == run_dir and (run_dir / "summary.json").is_file()
    assert (ran["status"], ran["end_reason"], ran["rounds"]) == ("completed", "max_rounds", 3)
    assert ran["simulated"] is True and ran["budget_usd"] == "0.05"
    assert 0 < Decimal(ran["spent_usd"]) <= Decimal("0.05") and " of $0.05 " in ran["spend"]
    assert summary["run_id"] == run_id and summary["total_usd"] == ran["spent_usd"]
    assert summary["max_rounds"] == 3 and summary["provider"] == "sim"
    cli = sopbus("costs", run_id, "--json", "--runs-dir", "runs", cwd=tmp_path)
    assert costs == json.loads(cli.stdout)
    assert costs["total_usd"] == ran["spent_usd"] and costs["calls"] == ran["llm_calls"]
    shown = sopbus("show", run_id, "--json", "--runs-dir", "runs", cwd=tmp_path).stdout
    assert messages["messages"] == [json.loads(line) for line in shown.splitlines()]
    assert messages["run_id"] == run_id and len(messages["messages"]) >= 3
    assert round_1["messages"] and {m["round"] for m in round_1["messages"]} == {1}
    assert round_1["messages"] == [m for m in messages["messages"] if m["round"] == 1]
    assert "round 99" in no_round and "rounds 0 to 3" in no_round and "--round" not in no_round
    assert "nosuchrun" in no_run and run_id in no_run  # the runs that are there


async def test_a_budget_above_max_budget_is_refused_and_runs_nothing(tmp_path: Path) -> None:
    async with served(tmp_path, "--max-budget", "0.01") as server:
        above = await server.error("run_scenario", scenario="flower_shop", budget=0.02)
        zero = await server.error("run_scenario", scenario="flower_shop", budget=0)
        unknown = await server.error("run_scenario", scenario="flowr_shop", budget=0.01)
        bad_rounds = await server.error(
            "run_scenario", scenario="flower_shop", budget=0.01, max_rounds=0
        )
    assert "$0.02" in above and "$0.01" in above and "--max-budget" in above
    assert "nothing was run" in above
    assert "greater than 0" in zero
    assert "did you mean `flower_shop`" in unknown
    assert "--max-rounds 0" in bad_rounds
    assert not (tmp_path / "runs").exists()


async def test_a_runs_spend_never_passes_the_budget_it_asked_for(tmp_path: Path) -> None:
    from sopbus.bus import load_ledger

    ask = Decimal("0.0006")  # flower_shop on the sim: 5 calls fit, the 6th's worst case not
    async with served(tmp_path) as server:
        ran = await server.data("run_scenario", scenario="flower_shop", budget=float(ask))
    assert ran["status"] == "budget_exhausted" and ran["ok"] is False
    assert Decimal(ran["budget_usd"]) == ask and 0 < Decimal(ran["spent_usd"]) <= ask
    ledger = load_ledger(ran["run_dir"])
    assert any(line.outcome == "refused" for line in ledger)
    assert all(line.total_usd <= ask for line in ledger)


async def test_a_run_that_fails_is_a_tool_error_with_the_reason_and_the_run(tmp_path: Path) -> None:
    # The writer's answers always miss `body`: one ask and two repairs, then the run fails.
    (tmp_path / "no_body.toml").write_text(
        "# SIMULATED OUTPUT: canned answers for sopbus's sim provider; no model wrote them.\n"
        'simulated = true\n[[fixture]]\naction = "Draft"\nresponses = [\'{"title": "T"}\']\n'
    )
    pair = (DATA / "scenarios" / "review_pair.toml").read_text(encoding="utf-8")
    pair = pair.replace("max_tokens = 256", 'max_tokens = 256\nfixtures = ["no_body.toml"]')
    (tmp_path / "pair.toml").write_text(pair, encoding="utf-8")
    async with served(tmp_path) as server:
        failed = await server.error("run_scenario", scenario="pair.toml", budget=0.05)
        summary = await server.data("run_summary", run="last")
    assert summary["status"] == "failed" and summary["run_id"] in failed
    assert "failed (error)" in failed and "role 'Writer' failed in round 1" in failed
    assert str(tmp_path / "runs" / summary["run_id"]) in failed


NOISY_SOP = """\
import subprocess
import sys

import sopbus
from sopbus.sops.group_chat import SOP as CHAT


def build(ctx):
    print("noise printed by the SOP")
    sys.stdout.flush()
    subprocess.run(["echo", "noise from a child process"], check=True)
    return CHAT.build(ctx)


SOP = sopbus.SOP(name="noisy", description="a group chat that prints", build=build)
"""


async def test_nothing_a_run_prints_reaches_the_protocol(tmp_path: Path) -> None:
    chat = (SCENARIOS / "group_chat.toml").read_text(encoding="utf-8")
    (tmp_path / "fixtures").mkdir()
    shutil.copy(SCENARIOS / "fixtures" / "group_chat.toml", tmp_path / "fixtures")
    chat = chat.replace('sop = "group_chat"', 'sop = "noisy:SOP"', 1)
    (tmp_path / "noisy.toml").write_text(chat, encoding="utf-8")
    (tmp_path / "noisy.py").write_text(NOISY_SOP, encoding="utf-8")
    async with served(tmp_path) as server:
        checked = await server.data("validate_scenario", scenario="noisy.toml")
        ran = await server.data("run_scenario", scenario="noisy.toml", budget=0.01, max_rounds=2)
        after = await server.data("list_examples")  # the session still works after the noise
    assert checked["valid"] is True, checked["errors"]
    assert ran["status"] == "completed" and after["examples"]
    assert server.stray == []
    stderr = server.stderr.read_text(encoding="utf-8")
    assert stderr.count("noise printed by the SOP") == 2  # validate and run built the team
    assert stderr.count("noise from a child process") == 2


async def test_a_cancelled_call_cancels_its_run_and_the_run_says_so(tmp_path: Path) -> None:
    slow = (SCENARIOS / "flower_shop.toml").read_text(encoding="utf-8")
    # Each simulated answer takes 0.4 s, so the run is still going when it is cancelled.
    slow = slow.replace("[llm]\n", "[llm]\nlatency_ms = 400\n", 1)
    (tmp_path / "slow.toml").write_text(slow, encoding="utf-8")
    shutil.copytree(SCENARIOS / "fixtures", tmp_path / "fixtures")
    async with served(tmp_path) as server:
        async with trio.open_nursery() as nursery:
            call = trio.CancelScope()

            async def run() -> None:
                with call:
                    await server.call("run_scenario", scenario="slow.toml", budget=0.05)

            nursery.start_soon(run)
            while not list((tmp_path / "runs").glob("*/events.jsonl")):
                await trio.sleep(0.05)
            call.cancel()
        summary = await server.call("run_summary", run="last")
        while summary.is_error:  # the run writes its summary as its cancellation ends
            await trio.sleep(0.05)
            summary = await server.call("run_summary", run="last")
        after = await server.data("list_examples")
    assert call.cancelled_caught
    assert summary.structured_content is not None
    assert summary.structured_content["status"] == "cancelled"
    assert summary.structured_content["rounds"] < 10 and after["examples"]


def test_a_wrong_server_flag_exits_2_before_serving(tmp_path: Path) -> None:
    price = sopbus("mcp", "--price", "cheap", cwd=tmp_path)
    assert price.returncode == 2 and "--price cheap" in price.stderr, price.stderr
    budget = sopbus("mcp", "--max-budget", "0", cwd=tmp_path)
    assert budget.returncode == 2 and "--max-budget" in budget.stderr
    (tmp_path / "runs").write_text("not a folder", encoding="utf-8")
    runs = sopbus("mcp", cwd=tmp_path)
    assert runs.returncode == 2 and "is a file, not a directory of runs" in runs.stderr
    assert price.stdout == budget.stdout == runs.stdout == ""
