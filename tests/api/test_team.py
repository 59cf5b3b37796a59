"""Teams in plain Python (``sopbus.Team``): the issue's example as written, on the simulator
and against a real OpenAI-compatible server on 127.0.0.1; the same checks and words as the
scenario file; the run directory read by ``sopbus show``, ``costs``, ``replay`` and
``verify`` as subprocesses; ``to_toml()`` run by ``sopbus run`` giving the same messages;
Python Action and Role classes, in-process and through ``"module:Class"`` references.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import textwrap
import warnings
from decimal import Decimal
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio

import sopbus
from sopbus import ConfigError, RunOutcome
from sopbus.bus import load_ledger, load_scenario
from support.cli import sopbus as cli
from support.openai_server import Answer, OpenAIServer
from support.paths import ROOT

IDEA = "A bunch of red roses, delivered today"


def shop(**settings: Any) -> sopbus.Team:
    """The issue's team, as written there (``settings`` laid over ``budget_usd``)."""
    record = sopbus.Action(
        "RecordOrder",
        "Turn the customer's message into an order record.",
        output={"items": "list[str]", "quantity": "int"},
    )
    book = sopbus.Action(
        "BookStock",
        "Book the order against the stock.",
        output={"changes": "list[str]", "reorder": "bool"},
    )
    return sopbus.Team(
        name="shop",
        roles=[
            sopbus.Role("OrderDesk", watch=["UserRequirement"], actions=[record]),
            sopbus.Role("StockKeeper", watch=["RecordOrder"], actions=[book]),
        ],
        **{"budget_usd": 0.50, **settings},
    )


def flow(result: RunOutcome) -> list[tuple[str, str, str, Any]]:
    return [(m.sent_from, m.cause_by, m.content, m.payload) for m in result.messages()]


def test_the_issue_example_runs_as_written_on_the_simulator(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # runs_dir "runs", as a user's script in its folder
    result = shop().run(IDEA)
    assert isinstance(result, RunOutcome)
    assert (result.status, result.end_reason) == ("completed", "idle")
    assert result.run_dir.parent == tmp_path / "runs"
    assert result.budget_usd == Decimal("0.5") and 0 < result.total_usd < Decimal("0.5")
    messages = result.messages()
    assert [(m.sent_from, m.cause_by) for m in messages] == [
        ("Boss", "UserRequirement"),
        ("OrderDesk", "RecordOrder"),
        ("StockKeeper", "BookStock"),
    ]
    assert messages[0].content == IDEA
    assert set(messages[1].payload) == {"items", "quantity"}
    assert isinstance(messages[1].payload["quantity"], int)
    assert set(messages[2].payload) == {"changes", "reorder"}
    # The run directory holds the scenario as run: a scenario file that loads again.
    again = load_scenario(result.run_dir / "scenario.toml")
    assert again.name == "shop" and again.idea == IDEA
    assert again.run.budget_usd == Decimal("0.5")
    assert [r.name for r in again.roles] == ["OrderDesk", "StockKeeper"]
    assert again.actions["RecordOrder"].output == {"items": "list[str]", "quantity": "int"}


def test_the_issue_example_runs_against_an_openai_compatible_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-team-test")  # read as the provider reads it
    order = {"items": ["red roses x11"], "quantity": 11}
    booked = {"changes": ["red roses -11"], "reorder": False}
    with OpenAIServer() as server:
        server.script(
            Answer(json.dumps(order), prompt_tokens=80, completion_tokens=20),
            Answer(json.dumps(booked), prompt_tokens=90, completion_tokens=20),
        )
        team = shop(provider="openai", base_url=server.base_url, model="local-shop", price=(1, 2))
        result = team.run(IDEA)
        requests = list(server.requests)
    assert result.status == "completed", result.summary
    assert [m.payload for m in result.messages()[1:]] == [order, booked]
    assert len(requests) == 2 == result.llm_calls
    assert {r.body["model"] for r in requests} == {"local-shop"}
    assert all(
        {k.lower(): v for k, v in r.headers.items()}["authorization"] == "Bearer sk-team-test"
        for r in requests
    )
    # The structured output's schema is the one the type specs say.
    schema = requests[0].body["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["items"]["type"] == "array"
    assert schema["properties"]["quantity"]["type"] == "integer"
    # Priced by price=(1, 2): USD per 1M tokens, the server's counts.
    lines = load_ledger(result.run_dir)
    assert [(line.prompt_tokens, line.completion_tokens) for line in lines] == [(80, 20), (90, 20)]
    assert result.total_usd == Decimal(80 + 40 + 90 + 40) / 1_000_000
    assert result.summary.provider == "openai"
    # The key is used, and written nowhere in the run directory.
    for path in result.run_dir.rglob("*"):
        if path.is_file():
            assert b"sk-team-test" not in path.read_bytes(), path


def test_show_costs_replay_and_verify_read_a_teams_run_directory(tmp_path: Path) -> None:
    result = shop(runs_dir=tmp_path / "runs").run(IDEA)
    run_dir = str(result.run_dir)
    shown = cli("show", run_dir, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert all(word in shown.stdout for word in ("OrderDesk", "StockKeeper", "BookStock", IDEA))
    costs = cli("costs", run_dir, "--json", cwd=tmp_path)
    assert costs.returncode == 0, costs.stderr
    spent = json.loads(costs.stdout)
    assert Decimal(spent["total_usd"]) == result.total_usd and spent["calls"] == 2
    assert set(spent["by_role"]) == {"OrderDesk", "StockKeeper"}
    verified = cli("verify", run_dir, cwd=tmp_path)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "intact" in verified.stdout
    replayed = cli("replay", run_dir, "--into", tmp_path / "replays", cwd=tmp_path)
    assert replayed.returncode == 0, replayed.stderr
    (replay_dir,) = (tmp_path / "replays").iterdir()
    assert flow(RunOutcome.open(replay_dir)) == flow(result)
    assert RunOutcome.open(replay_dir).total_usd == 0


def test_to_toml_is_a_scenario_file_that_sopbus_run_runs_the_same_way(tmp_path: Path) -> None:
    team = shop(runs_dir=tmp_path / "runs", max_rounds=4, seed=7)
    file = tmp_path / "shop.toml"
    text = team.to_toml(file)
    assert file.read_text() == text
    assert "[actions.RecordOrder]" in text and "budget_usd = 0.5" in text
    ran = cli("run", file, "--idea", IDEA, "--runs-dir", tmp_path / "cli", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    (from_file,) = (tmp_path / "cli").iterdir()
    in_process = team.run(IDEA)
    assert flow(RunOutcome.open(from_file)) == flow(in_process)
    assert RunOutcome.open(from_file).total_usd == in_process.total_usd
    loaded = load_scenario(file)
    assert (loaded.run.max_rounds, loaded.run.seed) == (4, 7)
    assert loaded.actions == team.scenario.actions and loaded.roles == team.scenario.roles


def test_a_typo_in_watch_is_the_files_config_error_with_a_suggestion(tmp_path: Path) -> None:
    record = sopbus.Action("RecordOrder", "Record it.", output={"items": "list[str]"})
    book = sopbus.Action("BookStock", "Book it.")
    with pytest.raises(ConfigError) as made:
        sopbus.Team(
            name="shop",
            roles=[
                sopbus.Role("OrderDesk", watch=["UserRequirement"], actions=[record]),
                sopbus.Role("StockKeeper", watch=["RecordOrdr"], actions=[book]),
            ],
        )
    said = str(made.value)
    assert said.startswith("Team 'shop': unknown action 'RecordOrdr' at $.roles[1].watch[0]")
    assert "did you mean 'RecordOrder'?" in said
    # The scenario file with the same content says the same after its file name.
    file = tmp_path / "shop.toml"
    file.write_text(
        textwrap.dedent(
            """
            [scenario]
            name = "shop"
            [actions.RecordOrder]
            instruction = "Record it."
            output = { items = "list[str]" }
            [actions.BookStock]
            instruction = "Book it."
            [[roles]]
            name = "OrderDesk"
            watch = ["UserRequirement"]
            actions = ["RecordOrder"]
            [[roles]]
            name = "StockKeeper"
            watch = ["RecordOrdr"]
            actions = ["BookStock"]
            """
        )
    )
    from sopbus.sops import build_team

    with pytest.raises(ConfigError) as loaded:
        build_team(load_scenario(file))
    assert str(loaded.value) == said.replace("Team 'shop'", str(file), 1)


@pytest.mark.parametrize(
    ("output", "words"),
    [
        ({"items": "lst[str]"}, "unknown type `lst` in `lst[str]` - at `$.actions.X.output.items`"),
        ({"items": 3}, "expected `str`, got `int` 3 - at `$.actions.X.output.items`"),
        ({"1st": "str"}, 'invalid output field name "1st" - at `$.actions.X.output.1st`'),
    ],
)
def test_an_actions_output_is_checked_as_in_a_file(
    tmp_path: Path, output: dict[str, Any], words: str
) -> None:
    with pytest.raises(ConfigError) as made:
        sopbus.Action("X", "Do it.", output=output)
    assert str(made.value).startswith(f"Action('X'): {words}")
    file = tmp_path / "x.toml"
    file.write_text(
        '[scenario]\nname = "x"\n[[roles]]\nname = "R"\n[actions.X]\ninstruction = "Do it."\n'
        f"[actions.X.output]\n{msgspec.toml.encode(output).decode()}"
    )
    with pytest.raises(ConfigError) as loaded:
        load_scenario(file)
    assert str(loaded.value) == str(made.value).replace("Action('X')", str(file))


def test_other_mistakes_name_the_key_as_a_file_would() -> None:
    with pytest.raises(ConfigError, match=r"unknown key `outptu` .*did you mean `output`"):
        sopbus.Action("X", "Do it.", outptu={"a": "str"})
    with pytest.raises(ConfigError, match=r"empty instruction - at `\$.actions.X.instruction`"):
        sopbus.Action("X", " ")
    with pytest.raises(ConfigError, match=r"`\$.llm.provider`.*did you mean `openai`"):
        shop(provider="opnai")
    with pytest.raises(ConfigError, match=r"budget -1 - at `\$.run.budget_usd`"):
        shop(budget_usd=-1)
    with pytest.raises(ConfigError, match=r"Team.run\(\) got an unknown override 'max_round'"):
        shop().run(IDEA, max_round=3)
    with pytest.raises(TypeError, match="takes no name or instruction"):
        type(sopbus.Action("X", "Do it."))("Y", "other")


class CountItems(sopbus.Action):
    """A Python action with its own ``run``: no model call."""

    async def run(self, ctx: sopbus.ActionContext) -> sopbus.ActionResult:
        items = [m.payload["items"] for m in ctx.news if m.cause_by == "RecordOrder"]
        return sopbus.ActionResult(content=f"{len(items[0])} items", payload={"n": len(items[0])})


class Auditor(sopbus.Role):
    profile = "Auditor"
    watch = ("CountItems",)
    actions = ("WritePRD",)


def test_python_action_and_role_classes_run_in_process(tmp_path: Path) -> None:
    record = sopbus.Action("RecordOrder", "Record it.", output={"items": "list[str]"})

    class Greeter(sopbus.Role):  # a local class: handed over in-process, never imported
        watch = ("UserRequirement",)
        actions = (record,)

    team = sopbus.Team(
        name="counting",
        roles=[
            Greeter,
            sopbus.Role("Counter", watch=["RecordOrder"], actions=[CountItems]),
            Auditor(name="Ada", goal="check the count"),
        ],
        runs_dir=tmp_path / "runs",
        max_rounds=4,
    )
    result = team.run(IDEA)
    assert [(m.sent_from, m.cause_by) for m in result.messages()] == [
        ("Boss", "UserRequirement"),
        ("Greeter", "RecordOrder"),
        ("Counter", "CountItems"),
        ("Ada", "WritePRD"),
    ]
    counted = result.messages()[2]
    assert counted.payload == {"n": len(result.messages()[1].payload["items"])}
    as_run = load_scenario(result.run_dir / "scenario.toml")
    assert as_run.roles[1].actions == (f"{__name__}:CountItems",)
    assert (as_run.roles[2].cls, as_run.roles[2].goal) == (f"{__name__}:Auditor", "check the count")
    # A function's own class cannot be named in a file: to_toml says so and why.
    with pytest.raises(ConfigError, match=r"Greeter .*defined inside a function"):
        team.to_toml()


MODULE = """
import sopbus


class CountParts(sopbus.Action):
    async def run(self, ctx):
        items = [m.payload["items"] for m in ctx.news if m.cause_by == "RecordOrder"]
        return sopbus.ActionResult(content=f"{len(items[0])} items", payload={"n": len(items[0])})


class Counter(sopbus.Role):
    profile = "Counter"
    watch = ("RecordOrder",)
    actions = (CountParts,)


class Confirm(sopbus.Action):
    async def run(self, ctx):
        return sopbus.ActionResult(content="confirmed: " + ctx.news[-1].content)


class Noter(sopbus.Role):
    watch = ("CountParts",)
    actions = ("WritePRD",)
"""


def test_to_toml_names_importable_classes_and_sopbus_run_imports_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "shop_parts.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    import shop_parts  # type: ignore[import-not-found]

    record = sopbus.Action("RecordOrder", "Record it.", output={"items": "list[str]"})
    team = sopbus.Team(
        name="parts",
        roles=[
            sopbus.Role("Desk", watch=["UserRequirement"], actions=[record]),
            shop_parts.Counter,  # the class: its watch names the team's own action
            sopbus.Role("Checker", watch=["CountParts"], actions=[shop_parts.Confirm]),
            shop_parts.Noter(name="Nell", goal="note the count"),
        ],
        runs_dir=tmp_path / "runs",
        idea=IDEA,
    )
    file = tmp_path / "parts.toml"
    text = team.to_toml(file)
    assert 'class = "shop_parts:Counter"' in text and '"shop_parts:Confirm"' in text
    ran = cli("run", file, "--runs-dir", tmp_path / "cli", cwd=ROOT)  # found beside the file
    assert ran.returncode == 0, ran.stdout + ran.stderr
    (from_file,) = (tmp_path / "cli").iterdir()
    in_process = team.run()
    assert flow(RunOutcome.open(from_file)) == flow(in_process)
    assert [m.sent_from for m in in_process.messages()] == [
        "Boss",
        "Desk",
        "Counter",
        "Checker",
        "Nell",
    ]
    assert 'goal = "note the count"' in text
    counted, confirmed = in_process.messages()[2:4]
    assert counted.content == f"{len(in_process.messages()[1].payload['items'])} items"
    assert confirmed.content == f"confirmed: {counted.content}"


def test_an_action_instance_with_its_own_settings_cannot_be_said_in_a_file() -> None:
    with pytest.raises(ConfigError, match=r"settings of its own \(max_repairs\)"):
        sopbus.Team(
            name="t",
            roles=[
                sopbus.Role("R", watch=["UserRequirement"], actions=[CountItems(max_repairs=0)])
            ],
        )
    one = sopbus.Action("Same", "One thing.")
    other = sopbus.Action("Same", "Another thing.")
    with pytest.raises(ConfigError, match="two different actions are named 'Same'"):
        sopbus.Team(
            name="t",
            roles=[
                sopbus.Role("A", watch=["UserRequirement"], actions=[one]),
                sopbus.Role("B", watch=["Same"], actions=[other]),
            ],
        )


def test_fixtures_answer_for_the_simulator_and_replay_reads_them(tmp_path: Path) -> None:
    fixtures = tmp_path / "canned.toml"
    fixtures.write_text(
        'simulated = true\n[[fixture]]\naction = "RecordOrder"\n'
        'responses = [{ items = ["red roses x11"], quantity = 11 }]\n'
    )
    result = shop(runs_dir=tmp_path / "runs", fixtures=[fixtures]).run(IDEA)
    assert result.messages()[1].payload == {"items": ["red roses x11"], "quantity": 11}
    replayed = cli("replay", result.run_dir, "--into", tmp_path / "replays", cwd=tmp_path)
    assert replayed.returncode == 0, replayed.stderr


async def test_run_async_is_the_form_for_trio_programs(tmp_path: Path) -> None:
    team = shop(runs_dir=tmp_path / "runs")
    result = await team.run_async(IDEA)
    assert result.status == "completed" and len(result.messages()) == 3
    with pytest.raises(RuntimeError, match=r"await team.run_async"):
        team.run(IDEA)


async def test_a_cancelled_trio_caller_cancels_the_run(tmp_path: Path) -> None:
    team = shop(runs_dir=tmp_path / "runs", latency_ms=60_000)
    with trio.move_on_after(1):
        await team.run_async(IDEA)
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert RunOutcome.open(run_dir).status == "cancelled"


def test_run_asyncio_runs_as_a_guest_on_the_running_loop(tmp_path: Path) -> None:
    team = shop(runs_dir=tmp_path / "runs")
    ticks = 0

    async def main() -> RunOutcome:
        async def tick() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        ticker = asyncio.create_task(tick())
        try:
            return await team.run_asyncio(IDEA)
        finally:
            ticker.cancel()

    result = asyncio.run(main())
    assert result.status == "completed" and len(result.messages()) == 3
    assert ticks > 0  # the loop kept serving its other task during the run


def test_the_sop_team_is_still_made_by_the_old_call_with_a_warning() -> None:
    from sopbus import sops

    with pytest.warns(DeprecationWarning, match="import Team from sopbus.sops"):
        old = sopbus.Team(roles=[], stop=None)  # type: ignore[call-arg]  # the old call, on purpose
    assert type(old) is sops.Team and old.roles == []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert isinstance(shop(), sopbus.Team)


def test_the_docs_example_runs_as_written(tmp_path: Path) -> None:
    page = (ROOT / "docs" / "python-api.md").read_text(encoding="utf-8")
    section = page.split("## Teams in Python", 1)[1].split("\n## ", 1)[0]
    code = re.findall(r"```python\n(.*?)```", section, re.S)[0]
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert code.split("print(")[0] in readme  # the README's taste is the same program
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "completed ['UserRequirement', 'RecordOrder', 'BookStock']"
    assert len(list((tmp_path / "runs").iterdir())) == 1
