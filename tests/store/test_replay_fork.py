"""sopbus replay, fork and diff: a run again from its own recording, free; a "what if" from
round N that makes no call for rounds up to N; the first difference of two runs."""

from __future__ import annotations

import json
from decimal import Decimal
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio

from sopbus._assemble import Outcome, execute
from sopbus.bus import ConfigError, LedgerLine, load_scenario, read_jsonl, scenario_with_overrides
from sopbus.bus.store._fork import plan_fork, plan_replay
from sopbus.bus.store._resume import plan_resume
from sopbus.cli import main
from sopbus.cli._cmd_diff import messages
from support.openai_server import Answer, OpenAIServer
from support.paths import DATA
from support.teams import pipeline as team

TEAM_DIR = DATA / "resume_team"
KEY = {"OPENAI_API_KEY": "sk-test-secret"}


RELAY = """
[scenario]
name = "relay"
sop = "relay_sop:SOP"
idea = "a short guide to brewing green tea"
[run]
budget_usd = {budget}
runs_dir = "{runs}"
[llm]
max_tokens = 300
"""


@pytest.fixture
def server(openai_server: OpenAIServer) -> OpenAIServer:
    """The shared OpenAI-compatible server, scripted for this team."""
    openai_server.script(Answer("an outline"), Answer("a draft"), Answer("a polished haiku"))
    return openai_server


@pytest.fixture(autouse=True)
def team_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(TEAM_DIR))


def pipeline(tmp_path: Path, server: OpenAIServer | None = None) -> Path:
    path = tmp_path / "pipeline.toml"
    llm = {
        "provider": "openai" if server else "sim",
        "base_url": server.base_url if server else "http://unused/v1",
        "max_tokens": 200,
    }
    path.write_text(
        team(
            ("Olga", "Outline"),
            ("Wes", "Write"),
            ("Pia", "Polish"),
            name="pipeline",
            run={"runs_dir": str(tmp_path / "runs")},
            llm=llm,
        )
    )
    return path


def relay(tmp_path: Path, budget: str = "1.0") -> Path:
    tmp_path.mkdir(exist_ok=True)
    path = tmp_path / "relay.toml"
    path.write_text(RELAY.format(runs=tmp_path / "runs", budget=budget))
    return path


def ledger(run_dir: Path) -> list[LedgerLine]:
    return list(read_jsonl(run_dir / "costs.jsonl", LedgerLine))


def run(scenario: Any, **kwargs: Any) -> Outcome:
    return trio.run(partial(execute, scenario, **kwargs))


def diff(a: Path, b: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["diff", str(a), str(b)])
    return code, capsys.readouterr().out


# -- replay ------------------------------------------------------------------------------------


def test_replay_of_an_openai_run_sends_no_request_and_repeats_it(
    server: OpenAIServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    original = run(load_scenario(pipeline(tmp_path, server)), environ=KEY).run_dir
    assert len(server.requests) == 3 and sum(line.cost_usd for line in ledger(original)) > 0

    assert main(["replay", str(original), "--into", str(tmp_path / "replay"), "--quiet"]) == 0

    assert len(server.requests) == 3  # the server's log did not grow: no HTTP request
    (replay,) = (tmp_path / "replay").iterdir()  # --into names the folder of the new run
    assert messages(replay) == messages(original)
    assert diff(original, replay, capsys) == (0, "same 4 messages\n")
    lines = ledger(replay)
    assert [
        (line.round, line.role, line.outcome, line.provider, line.cost_usd) for line in lines
    ] == [
        (1, "Olga", "replayed", "replay", 0),
        (2, "Wes", "replayed", "replay", 0),
        (3, "Pia", "replayed", "replay", 0),
    ]
    assert [line.prompt_tokens for line in lines] == [
        line.prompt_tokens for line in ledger(original)
    ]
    events = read_jsonl(replay / "events.jsonl", dict)
    assert next(e for e in events if e["kind"] == "replaying")["data"]["of"] == original.name
    # The replay recorded the answers again, so it can itself be replayed.
    scenario, continuation = plan_replay(replay, into=tmp_path / "again")
    again = run(scenario, continuation=continuation)
    assert messages(again.run_dir) == messages(original) and len(server.requests) == 3


def test_replay_into_the_runs_folder_makes_a_new_run_there_and_leaves_the_folder_alone(
    tmp_path: Path,
) -> None:
    original = run(load_scenario(pipeline(tmp_path))).run_dir
    runs = original.parent
    before = {p.name: p.read_bytes() for p in original.iterdir() if p.is_file()}

    assert main(["replay", str(original), "--into", str(runs), "--quiet"]) == 0

    (replay,) = [p for p in runs.iterdir() if p != original]
    assert json.loads((replay / "summary.json").read_text())["replay_of"] == original.name
    assert (
        sorted(p.name for p in runs.iterdir() if p.is_file()) == []
    )  # no run files loose in runs/
    assert messages(replay) == messages(original)
    assert {p.name: p.read_bytes() for p in original.iterdir() if p.is_file()} == before
    # A run's own directory is not a folder of runs: refused, nothing written.
    assert main(["replay", str(original), "--into", str(original), "--quiet"]) == 2
    assert sorted(p.name for p in original.iterdir() if p.is_dir()) == ["artifacts"]


def test_replay_of_a_resumed_run_repeats_the_whole_run(tmp_path: Path) -> None:
    stopped = run(scenario_with_overrides(load_scenario(relay(tmp_path)), max_rounds=2)).run_dir
    scenario, continuation = plan_resume(stopped, max_rounds=10)
    run(scenario, continuation=continuation)

    scenario, continuation = plan_replay(stopped)
    replay = run(scenario, continuation=continuation)

    assert replay.summary.end_reason == "idle" and messages(replay.run_dir) == messages(stopped)
    assert Decimal(replay.summary.total_usd) == 0 and replay.summary.taped_calls == 5


def test_replay_of_a_budget_exhausted_run_ends_the_same_way(tmp_path: Path) -> None:
    full = run(load_scenario(relay(tmp_path)))
    cap = sum((line.cost_usd for line in ledger(full.run_dir)[:3]), Decimal(0)) + Decimal("0.0002")
    poor = run(load_scenario(relay(tmp_path / "poor", budget=str(cap))))
    assert poor.summary.end_reason == "budget_exhausted"

    scenario, continuation = plan_replay(poor.run_dir)
    replay = run(scenario, continuation=continuation)

    assert replay.summary.end_reason == "budget_exhausted"
    assert messages(replay.run_dir) == messages(poor.run_dir)


def test_a_replay_that_cannot_find_an_answer_fails_instead_of_calling(tmp_path: Path) -> None:
    original = run(load_scenario(pipeline(tmp_path))).run_dir
    (original / "calls.jsonl").write_bytes(
        b"".join((original / "calls.jsonl").read_bytes().splitlines(True)[:2])
    )

    scenario, continuation = plan_replay(original)
    replay = run(scenario, continuation=continuation)

    assert replay.summary.end_reason == "error"
    assert "no answer for 'Pia'" in (replay.summary.error or "")
    assert [line.round for line in ledger(replay.run_dir)] == [1, 2]


# -- diff --------------------------------------------------------------------------------------


def test_diff_prints_the_first_difference(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sc = load_scenario(pipeline(tmp_path))
    first, same = run(sc).run_dir, run(sc).run_dir
    other = run(scenario_with_overrides(sc, seed=7)).run_dir
    shorter = run(scenario_with_overrides(sc, max_rounds=2)).run_dir

    assert diff(first, same, capsys) == (0, "same 4 messages\n")
    code, out = diff(first, other, capsys)
    assert code == 5
    assert out.startswith(
        f"{first.name} and {other.name} differ: message 2 (m2, round 1, Olga Outline): "
    )
    assert "message.content: " in out and "recipients" not in out
    code, out = diff(first, shorter, capsys)
    assert (
        code == 5
        and "RUN1 has 1 more message(s) after message 3; the first: m4, round 3, Pia Polish" in out
    )


# -- fork --------------------------------------------------------------------------------------


def test_fork_makes_no_call_up_to_its_round_and_runs_live_after(
    server: OpenAIServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    original = run(load_scenario(pipeline(tmp_path, server)), environ=KEY).run_dir
    server.requests.clear()
    server.script(Answer("another polish"))

    scenario, continuation = plan_fork(original, at_round=2, settings=("llm.model=gpt-4o",))
    fork = run(scenario, environ=KEY, continuation=continuation)

    assert [r.body["model"] for r in server.requests] == ["gpt-4o"]  # round 3 only
    lines = ledger(fork.run_dir)
    assert [(line.round, line.outcome, line.cost_usd == 0) for line in lines] == [
        (1, "replayed", True),
        (2, "replayed", True),
        (3, "ok", False),
    ]
    assert lines[2].model == "gpt-4o"
    reserved = [
        e["round"]
        for e in read_jsonl(fork.run_dir / "events.jsonl", dict)
        if e["kind"] == "llm_reserved"
    ]
    assert reserved == [3]
    forked, recorded = messages(fork.run_dir), messages(original)
    assert forked[:3] == recorded[:3]  # the state after round 2 is the original's
    assert forked[3]["message"]["content"] == "another polish" != recorded[3]["message"]["content"]
    assert fork.summary.forked_from == original.name and fork.summary.fork_round == 2
    assert load_scenario(fork.run_dir / "scenario.toml").llm.model == "gpt-4o"


def test_fork_with_an_injected_message_and_a_new_budget(tmp_path: Path) -> None:
    original = run(load_scenario(relay(tmp_path))).run_dir

    assert (
        main(
            [
                "fork",
                str(original),
                "--at-round",
                "2",
                "--set",
                # Addressed: an injection no role would receive is refused (issue 41).
                'inject={ content = "Mind the steeping time", send_to = ["Editor"] }',
                "--set",
                "run.budget_usd=0.5",
                "--set",
                "run.seed=4",
                "--into",
                str(tmp_path / "fork"),
                "--quiet",
            ]
        )
        == 0
    )
    assert main(["fork", str(original), "--at-round", "9", "--quiet"]) == 2  # a usage error

    (fork_dir,) = (tmp_path / "fork").iterdir()
    forked, recorded = messages(fork_dir), messages(original)
    assert forked[:4] == recorded[:4]
    injected = forked[4]["message"]
    assert (
        injected["round"],
        injected["sent_from"],
        injected["cause_by"],
        injected["content"],
    ) == (3, "User", "UserEdit", "Mind the steeping time")
    assert forked[5:] != recorded[4:]  # another seed from round 3 on
    originals = {
        p.relative_to(original / "artifacts"): p.read_bytes()
        for p in (original / "artifacts").rglob("*.md")
    }
    for name in ("plan.md", "drafts/ann.md", "drafts/ben.md"):
        assert (fork_dir / "artifacts" / name).read_bytes() == originals[Path(name)]
    assert ledger(fork_dir)[-1].budget_usd == Decimal("0.5")
    assert sum(line.cost_usd for line in ledger(fork_dir) if line.round <= 2) == 0


def test_a_fork_whose_early_rounds_need_an_unrecorded_call_fails_instead_of_calling(
    server: OpenAIServer, tmp_path: Path
) -> None:
    original = run(load_scenario(pipeline(tmp_path, server)), environ=KEY).run_dir
    server.requests.clear()

    # A renamed first role asks in round 1 where the recording has no call of that role.
    scenario, continuation = plan_fork(original, at_round=2, settings=("roles.0.name=Oona",))
    fork = run(scenario, environ=KEY, continuation=continuation)

    assert fork.summary.end_reason == "error"
    assert "no answer for 'Oona'" in (fork.summary.error or "")
    assert "rounds up to 2 take their answers from it" in (fork.summary.error or "")
    assert server.requests == []  # rounds up to the fork's make no provider call
    assert ledger(fork.run_dir) == []


def test_fork_refuses_rounds_the_run_did_not_finish_and_bad_settings(tmp_path: Path) -> None:
    original = run(scenario_with_overrides(load_scenario(relay(tmp_path)), max_rounds=2)).run_dir
    with pytest.raises(ConfigError, match="completed rounds 1 to 2"):
        plan_fork(original, at_round=3)
    with pytest.raises(ConfigError, match="did you mean 'model'"):
        plan_fork(original, at_round=1, settings=("llm.modle=gpt-4o",))
    with pytest.raises(ConfigError, match="comes after the fork's round 1"):
        plan_fork(original, at_round=1, settings=("inject={ round = 1, content = 'x' }",))
    with pytest.raises(ConfigError, match=r"\$\.run\.max_rounds"):
        plan_fork(original, at_round=1, settings=("run.max_rounds=many",))
