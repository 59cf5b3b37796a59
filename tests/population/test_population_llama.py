"""The shipped ``guess_two_thirds`` game against llama.cpp's own server with a small real
model (SmolLM2-135M), run as a user runs it: ``sopbus run guess_two_thirds --provider openai
--base-url ... --set ...`` in a subprocess, the population's concurrency at the server's
slots.

The model's guesses are never asserted on, only what sopbus made of them: every agent acts
once a round, a round's sums are those of the answers the server gave, the ledger has a
line per call and its tokens are what the server billed, the host's result is two thirds of
the round's mean. The server turns the Guess schema into a grammar (``output json_schema``),
so even the 135M model answers valid JSON; answers cut at ``max_tokens`` are the tiny
model's failures, and a round of them is counted failed, not a crash, and fails the verdict.
Eight players, two game rounds, short answers: the file takes about a minute on 2 cores.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from statistics import mean
from typing import Any

import pytest

from sopbus.bus import read_jsonl
from support.cli import sopbus
from support.llama_server import MODEL, SLOTS, LlamaServer

PLAYERS, GAMES = 8, 2
pytestmark = pytest.mark.slow


def game(tmp: Path, llama: LlamaServer, *settings: str) -> tuple[Any, Path]:
    """``sopbus run guess_two_thirds`` on the server with PLAYERS players and GAMES games."""
    done = sopbus(
        "run", "guess_two_thirds", "--provider", "openai", "--base-url", llama.base_url,
        "--model", MODEL, "--price", "0,0", "--runs-dir", tmp / "runs", "--quiet",
        "--set", f"populations.Player.count={PLAYERS}", "--set", f"sop.rounds={GAMES}",
        "--set", f"populations.Player.concurrency={SLOTS}", "--set", "llm.temperature=0.0",
        *(arg for s in settings for arg in ("--set", s)),
        cwd=tmp, env={"OPENAI_API_KEY": "local"}, timeout=600,
    )  # fmt: skip
    (run_dir,) = (tmp / "runs").iterdir()
    return done, run_dir


def summary(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "summary.json").read_text())


def records(run_dir: Path, name: str) -> list[dict[str, Any]]:
    return list(read_jsonl(run_dir / name))


@pytest.fixture(scope="module")
def played(
    llama: LlamaServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Any, Path, tuple[int, int, int]]]:
    """The game with 32 tokens an answer (a guess is about 18); what the server billed."""
    before = llama.billed()
    done, run_dir = game(tmp_path_factory.mktemp("game"), llama, "llm.max_tokens=32")
    after = llama.billed()
    yield done, run_dir, tuple(a - b for a, b in zip(after, before, strict=True))  # type: ignore[misc]


def test_the_game_completes_with_every_round_guessed(played: Any) -> None:
    done, run_dir, _ = played
    assert done.returncode == 0, done.stderr
    s = summary(run_dir)
    assert (s["status"], s["end_reason"]) == ("completed", "stop_condition")
    assert s["verdict"]["passed"] is True, s["verdict"]
    rounds = s["populations"]["Player"]
    assert len(rounds) == GAMES
    assert all(r["woke"] == PLAYERS == r["acted"] + r["failed"] for r in rounds)
    assert all(sum(r["bins"]["counts"]) == r["acted"] for r in rounds)


def test_the_ledger_has_a_line_per_call_and_the_server_billed_its_tokens(played: Any) -> None:
    _, run_dir, (prompt, completion, cached) = played
    lines = records(run_dir, "costs.jsonl")
    called = [e for e in records(run_dir, "events.jsonl") if e["kind"] == "llm_called"]
    assert len(lines) == len(called) == summary(run_dir)["llm_calls"] >= PLAYERS * GAMES
    assert sum(x["prompt_tokens"] for x in lines) == prompt
    assert sum(x["completion_tokens"] for x in lines) == completion
    assert sum(x["cached_tokens"] for x in lines) == cached
    # Every agent asked the model once in every round (and its repairs, if any).
    firsts = {(x["round"], x["role"]) for x in lines if x["attempt"] == 1}
    rounds = {r["round"] for r in summary(run_dir)["populations"]["Player"]}
    assert firsts == {(r, f"Player-{i}") for r in rounds for i in range(PLAYERS)}


def test_a_rounds_sums_are_those_of_the_servers_answers(played: Any) -> None:
    _, run_dir, _ = played
    guesses: dict[int, list[int]] = {}
    for call in records(run_dir, "calls.jsonl"):
        try:
            answer = json.loads(call["completion"]["text"])
        except json.JSONDecodeError:
            continue  # a failed attempt: not a guess
        if isinstance(answer, dict) and isinstance(answer.get("guess"), int):
            guesses.setdefault(call["round"], []).append(answer["guess"])
    rounds = summary(run_dir)["populations"]["Player"]
    assert {r["round"]: len(guesses.get(r["round"], [])) for r in rounds} == {
        r["round"]: r["acted"] for r in rounds
    }
    for r in rounds:
        if r["acted"]:
            got = guesses[r["round"]]
            assert (r["min"], r["max"]) == (min(got), max(got))
            assert r["mean"] == pytest.approx(mean(got))


def test_the_hosts_result_is_two_thirds_of_the_mean(played: Any) -> None:
    _, run_dir, _ = played
    kinds = ("message_published", "message_undelivered")
    sent = [e["message"] for e in records(run_dir, "events.jsonl") if e["kind"] in kinds]
    announced = [m["payload"] for m in sent if m["cause_by"] == "AnnounceRound"]
    sums = [m["payload"] for m in sent if m["cause_by"] == "Guess"]
    assert [a["game"] for a in announced] == list(range(GAMES + 1))
    assert announced[-1]["over"] is True
    for result, s in zip(announced[1:], sums, strict=True):
        assert result["target"] == pytest.approx(s["mean"] * 2 / 3, abs=1e-4)


def test_answers_cut_at_max_tokens_are_counted_failed_and_fail_the_verdict(
    llama: LlamaServer, tmp_path: Path
) -> None:
    done, run_dir = game(tmp_path, llama, "llm.max_tokens=4")  # `{"guess": 42}` needs ~18
    assert done.returncode == 4, done.stderr  # completed, verdict failed
    s = summary(run_dir)
    assert s["status"] == "completed" and s["verdict"]["passed"] is False
    assert "no valid guess" in s["verdict"]["reason"]
    rounds = s["populations"]["Player"]
    assert [(r["woke"], r["acted"], r["failed"]) for r in rounds] == [(PLAYERS, 0, PLAYERS)] * GAMES
    assert all(r["mean"] is None for r in rounds)
    # A cut structured answer fails its agent's turn at once: one call each, no repairs.
    lines = records(run_dir, "costs.jsonl")
    assert len(lines) == PLAYERS * GAMES == s["llm_calls"]
    assert {(x["finish_reason"], x["completion_tokens"]) for x in lines} == {("length", 4)}


def test_the_rumour_spreads_on_the_servers_choices(llama: LlamaServer, tmp_path: Path) -> None:
    # 12 agents on the shipped small-world graph, two rounds: the seed's followers read the
    # post, then the followers of those who reposted it. The server's grammar (from the
    # React schema) makes each answer one of the three choices.
    done = sopbus(
        "run", "rumor_spread", "--provider", "openai", "--base-url", llama.base_url,
        "--model", MODEL, "--price", "0,0", "--runs-dir", tmp_path / "runs", "--quiet",
        "--set", "populations.Person.count=12", "--set", "run.max_rounds=2",
        "--set", f"populations.Person.concurrency={SLOTS}", "--set", "llm.temperature=0.0",
        cwd=tmp_path, env={"OPENAI_API_KEY": "local"}, timeout=600,
    )  # fmt: skip
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert done.returncode == 0, done.stderr
    rounds = summary(run_dir)["populations"]["Person"]
    assert rounds and all(r["acted"] + r["failed"] == r["woke"] for r in rounds)
    chosen: dict[int, dict[str, int]] = {}
    for call in records(run_dir, "calls.jsonl"):
        try:
            choice = json.loads(call["completion"]["text"]).get("choice")
        except (json.JSONDecodeError, AttributeError):
            continue
        per = chosen.setdefault(call["round"], {})
        per[choice] = per.get(choice, 0) + 1
    for r in rounds:
        got = chosen.get(r["round"], {})
        assert (got.get("ignore", 0), got.get("like", 0), got.get("repost", 0)) == (
            r["ignored"],
            r["liked"],
            r["reposted"],
        )
    # one ledger line per call: a real provider's calls are not batched
    lines = records(run_dir, "costs.jsonl")
    assert len(lines) == summary(run_dir)["llm_calls"] >= rounds[0]["woke"]
