"""Settings a scenario accepts are honoured or refused, never dropped (issue 13, item 11):
a role's ``llm = { stream, timeout_s, max_attempts }`` apply to that role's calls, against a
real OpenAI-compatible server on 127.0.0.1; ``latency_ms`` is bounded; files a scenario
names stay inside its folder unless it says ``allow_outside = true``."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
import trio

from sopbus._assemble import execute
from sopbus.bus import LedgerLine, load_scenario, read_jsonl
from support.cli import sopbus
from support.openai_server import Answer, Fail, OpenAIServer, Slow
from support.paths import ROOT
from support.teams import pipeline

KEY = {"OPENAI_API_KEY": "sk-test"}


def run_pair(
    tmp_path: Path, openai_server: OpenAIServer, pete: str
) -> tuple[str, list[LedgerLine]]:
    path = tmp_path / "pair.toml"
    llm = {
        "provider": "openai",
        "base_url": openai_server.base_url,
        "max_tokens": 100,
        "timeout_s": 60,
        "max_attempts": 3,
        "stream": False,
    }
    path.write_text(
        pipeline(
            ("Dora", "Draft"),
            ("Pete", "Polish"),
            run={"runs_dir": str(tmp_path / "runs")},
            llm=llm,
            role_llm={"Pete": tomllib.loads(f"llm = {{ {pete} }}")["llm"]},
        )
    )
    outcome = trio.run(lambda: execute(load_scenario(path), environ=KEY))
    return outcome.summary.end_reason, list(read_jsonl(outcome.run_dir / "costs.jsonl", LedgerLine))


def test_a_roles_max_attempts_replaces_the_runs(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    openai_server.script(Answer("a draft"), Fail(500), Answer("never asked for"))
    reason, lines = run_pair(tmp_path, openai_server, "max_attempts = 1")
    assert reason == "error"
    assert [(line.role, line.outcome) for line in lines] == [("Dora", "ok"), ("Pete", "error")]
    assert len(openai_server.requests) == 2  # the run's max_attempts = 3 would have retried


def test_a_roles_stream_replaces_the_runs(openai_server: OpenAIServer, tmp_path: Path) -> None:
    openai_server.script(Answer("a draft"), Answer("a polished haiku"))
    reason, lines = run_pair(tmp_path, openai_server, "stream = true")
    assert reason == "idle" and [line.outcome for line in lines] == ["ok", "ok"]
    assert [r.body.get("stream", False) for r in openai_server.requests] == [False, True]


def test_a_roles_timeout_replaces_the_runs(openai_server: OpenAIServer, tmp_path: Path) -> None:
    openai_server.script(Answer("a draft"), Slow(3, Answer("too late")))
    reason, lines = run_pair(tmp_path, openai_server, "timeout_s = 0.3, max_attempts = 1")
    assert reason == "error"  # the run's timeout_s = 60 would have waited for the answer
    assert [(line.role, line.outcome) for line in lines] == [("Dora", "ok"), ("Pete", "error")]


def test_a_latency_near_2_to_the_63_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "slow.toml"
    path.write_text(
        '[scenario]\nname = "x"\nsop = "flower_shop"\n[llm]\nlatency_ms = 9223372036854775000\n'
    )
    done = sopbus("run", path, "--runs-dir", tmp_path / "runs")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert (
        f"{path}: out of range: 9223372036854775000 - at `$.llm.latency_ms`: expected a number from 0 to 600000"
        in done.stderr
    )
    assert not (tmp_path / "runs").exists()


def code_and_run(folder: Path, data: str, *, allow: bool = False) -> Path:
    """scenarios/code_and_run.toml copied into ``folder`` with its files, naming ``data``."""
    folder.mkdir(parents=True)
    shipped = ROOT / "scenarios"
    for rel in ("fixtures/code_and_run.toml", "data/prices.csv", "data/check_pct_change.py"):
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes((shipped / rel).read_bytes())
    text = (shipped / "code_and_run.toml").read_text()
    assert 'data = ["data/prices.csv"]' in text
    text = text.replace('data = ["data/prices.csv"]', f'data = ["data/prices.csv", "{data}"]')
    if allow:
        text = text.replace("[scenario]\n", "[scenario]\nallow_outside = true\n", 1)
    path = folder / "task.toml"
    path.write_text(text)
    return path


SECRET = "root:$6$THE-SHADOW-HASH$"


def run_dir_text(runs: Path) -> str:
    return (
        "".join(p.read_text(errors="replace") for p in runs.rglob("*") if p.is_file())
        if runs.exists()
        else ""
    )


@pytest.mark.parametrize("how", ["dotdot", "absolute"])
def test_a_data_path_that_leaves_the_folder_is_refused(how: str, tmp_path: Path) -> None:
    shadow = tmp_path / "etc" / "shadow"
    shadow.parent.mkdir()
    shadow.write_text(SECRET + "\n")
    data = "../../etc/shadow" if how == "dotdot" else str(shadow)
    scenario = code_and_run(tmp_path / "work" / "task", data)
    runs = tmp_path / "runs"
    for command in ("validate", "run"):
        extra: list[str | Path] = ["--runs-dir", runs] if command == "run" else []
        done = sopbus(command, scenario, *extra)
        assert done.returncode == 2, done.stdout + done.stderr
        assert f"{scenario}: path {data!r} leaves the scenario's folder" in done.stderr
        assert "$.sop.data[1]" in done.stderr and "allow_outside = true" in done.stderr
        assert SECRET not in done.stdout + done.stderr
    assert not runs.exists() and SECRET not in run_dir_text(runs)


def test_a_symlink_inside_the_folder_to_outside_is_refused(tmp_path: Path) -> None:
    shadow = tmp_path / "shadow"
    shadow.write_text(SECRET + "\n")
    folder = tmp_path / "task"
    scenario = code_and_run(folder, "data/notes.csv")
    (folder / "data" / "notes.csv").symlink_to(shadow)
    done = sopbus("run", scenario, "--runs-dir", tmp_path / "runs")
    assert done.returncode == 2 and "'data/notes.csv' leaves the scenario's folder" in done.stderr
    assert SECRET not in run_dir_text(tmp_path / "runs")


def test_a_fixture_outside_the_folder_is_refused_unless_allowed(tmp_path: Path) -> None:
    folder = tmp_path / "task"
    scenario = code_and_run(folder, "data/prices.csv")
    moved = tmp_path / "fixtures.toml"
    (folder / "fixtures" / "code_and_run.toml").rename(moved)
    scenario.write_text(scenario.read_text().replace('"fixtures/code_and_run.toml"', f'"{moved}"'))
    done = sopbus("validate", scenario)
    assert done.returncode == 2 and "- at `$.llm.fixtures[0]`" in done.stderr
    scenario.write_text(
        scenario.read_text().replace("[scenario]\n", "[scenario]\nallow_outside = true\n", 1)
    )
    assert sopbus("validate", scenario).returncode == 0


def test_allow_outside_lets_the_file_name_data_elsewhere(tmp_path: Path) -> None:
    shared = tmp_path / "shared" / "rates.csv"
    shared.parent.mkdir()
    shared.write_text("day,rate\n1,2\n")
    scenario = code_and_run(tmp_path / "task", str(shared), allow=True)
    done = sopbus("run", scenario, "--runs-dir", tmp_path / "runs", "--quiet")
    assert done.returncode == 0, done.stderr
    assert "day,rate" in run_dir_text(tmp_path / "runs")  # the file was read, as asked
