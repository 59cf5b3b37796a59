"""The flush policy of ``rounds`` mode (bus/store/_store.py): every round, however quiet (one
that logs nothing but its messages and ``round_ended``), is written when it ends, as one
batch with one write, before the next round's turns start. So a run killed for real keeps
every round that ended, and what it wrote verifies. Also: the speedups of the rounds loop
(a lone turn run without a nursery) leave an error of the loop itself raised as itself."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from sopbus.bus import Environment, Message, RunStore, Turn, read_jsonl, run_team
from sopbus.bus._chain import verify_file
from support.cli import ARGV
from support.fakes import Echo
from support.paths import ROOT

GO = Message(cause_by="A0", sent_from="Boss")


def ring(n: int, on_step: Callable[[Sequence[Message], Turn], None] | None = None) -> list[Echo]:
    """``n`` roles passing tokens around: role i watches ``A{i}`` and answers ``A{i+1}``."""
    return [
        Echo(f"r{i}", [f"A{i}"], replies=[f"A{(i + 1) % n}"], on_step=on_step) for i in range(n)
    ]


def on_disk(path: Path) -> list[dict[str, Any]]:
    return list(read_jsonl(path, dict)) if path.is_file() else []


def ended_rounds(path: Path) -> list[int]:
    return [e["round"] for e in on_disk(path) if e["kind"] == "round_ended"]


def sealed_lines(path: Path) -> list[str]:
    """The kinds of the lines that close a batch (one write each)."""
    return [line.split('"', 4)[3] for line in path.read_text().splitlines() if '"_h":"' in line]


async def run(tmp: Path, team: list[Any], max_rounds: int, seed: Sequence[Message] = (GO,)) -> Path:
    store = RunStore(tmp, "run")
    env = Environment("run", log=store)
    env.add_all(team)
    await run_team(env, seed=seed, store=store, max_rounds=max_rounds)
    store.close()
    log = tmp / "events.jsonl"
    assert verify_file(log).intact
    return log


def looking(
    log: Path, seen: list[tuple[int, list[int]]]
) -> Callable[[Sequence[Message], Turn], None]:
    """An ``on_step`` that notes, at each turn, the rounds whose end is on disk."""

    def look(news: Sequence[Message], turn: Turn) -> None:
        seen.append((turn.round, ended_rounds(log)))

    return look


async def test_each_quiet_round_is_one_write_when_it_ends(tmp_path: Path) -> None:
    log = await run(tmp_path, ring(3), max_rounds=40)
    assert ended_rounds(log) == list(range(1, 41))
    kinds = [k for k in sealed_lines(log) if k != "role_joined"]
    # The seed's write, one write per round closed by its round_ended, then the run's end.
    assert kinds == ["message_published"] + ["round_ended"] * 40 + ["run_ended"]
    assert "round_started" not in [e["kind"] for e in on_disk(log)]  # quiet: nothing but messages


async def test_a_lone_turn_finds_every_earlier_round_on_disk(tmp_path: Path) -> None:
    seen: list[tuple[int, list[int]]] = []
    await run(tmp_path, ring(3, on_step=looking(tmp_path / "events.jsonl", seen)), max_rounds=12)
    assert seen == [(r, list(range(1, r))) for r in range(1, 13)]


async def test_concurrent_turns_find_every_earlier_round_on_disk(tmp_path: Path) -> None:
    # Two tokens in a ring of four: each round has two turns, run in a nursery.
    seen: list[tuple[int, list[int]]] = []
    seed = [GO, Message(cause_by="A2", sent_from="Boss")]
    log = await run(
        tmp_path, ring(4, on_step=looking(tmp_path / "events.jsonl", seen)), max_rounds=8, seed=seed
    )
    assert seen == [(r, list(range(1, r))) for r in range(1, 9) for _ in range(2)]
    assert [k for k in sealed_lines(log) if k != "role_joined"] == (
        ["message_published"] + ["round_ended"] * 8 + ["run_ended"]
    )


async def test_a_round_that_logs_more_is_written_as_it_logs_and_again_when_it_ends(
    tmp_path: Path,
) -> None:
    seen: list[tuple[int, list[int]]] = []
    look = looking(tmp_path / "events.jsonl", seen)

    def note(news: Sequence[Message], turn: Turn) -> None:
        look(news, turn)
        if turn.round == 4:
            turn.emit("looked", at=news[0].id)

    log = await run(tmp_path, ring(3, on_step=note), max_rounds=6)
    assert seen == [(r, list(range(1, r))) for r in range(1, 7)]
    kinds = [k for k in sealed_lines(log) if k != "role_joined"]
    # Round 4: its note "looked" is written at once (after its round_started), its message with
    # its end.
    assert kinds == ["message_published"] + ["round_ended"] * 3 + ["looked", "round_ended"] + (
        ["round_ended"] * 2 + ["run_ended"]
    )
    assert [(e["kind"], e["round"]) for e in on_disk(log) if e["kind"] == "round_started"] == [
        ("round_started", 4)
    ]


# A ring whose every turn first appends its round to a marker file (one os.write, kept by the
# kernel when the process is killed): a turn of round r shows that round r - 1 had ended.
KILLED = """
import os, sys, trio
from pathlib import Path
from sopbus.bus import Environment, Message, RunStore, run_team
from support.fakes import Echo

marker = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT | os.O_APPEND)
stuck_at = int(sys.argv[3])

class Marking(Echo):
    async def step(self, news, turn):
        os.write(marker, b"%d\\n" % turn.round)
        if turn.round == stuck_at:
            await trio.sleep_forever()  # a model, a tool or a person that never answers
        return await super().step(news, turn)

store = RunStore(Path(sys.argv[1]), "killed")
env = Environment("killed", log=store)
env.add_all([Marking(f"r{i}", [f"A{i}"], replies=[f"A{(i + 1) % 5}"]) for i in range(5)])
trio.run(lambda: run_team(env, seed=[Message(cause_by="A0", sent_from="Boss")], store=store,
                          max_rounds=10**7))
"""


def run_and_kill(tmp: Path, stuck_at: int, kill_after: int) -> tuple[Path, int]:
    """Runs the ring in a subprocess (its turn of round ``stuck_at`` never ends; 0: none
    does) and SIGKILLs it at once when a turn of round ``kill_after`` started. The run's
    directory and the last round whose turn started."""
    run_dir, marker = tmp / "run", tmp / "marker"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tests")}
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(KILLED), str(run_dir), str(marker), str(stuck_at)],
        env=env,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60  # a guard against a hung test, not a timing assertion
        size = sum(len(f"{r}\n") for r in range(1, kill_after + 1))  # the marker up to kill_after
        while not (marker.is_file() and marker.stat().st_size >= size):
            assert proc.poll() is None, proc.communicate()[1].decode()
            assert time.monotonic() < deadline, f"the run never got to round {kill_after}"
            time.sleep(0.001)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    started = [int(line) for line in marker.read_text().split()]
    assert started == list(range(1, len(started) + 1))
    return run_dir, started[-1]


def test_a_run_killed_while_a_turn_blocks_keeps_every_ended_round_and_verifies(
    tmp_path: Path,
) -> None:
    run_dir, last = run_and_kill(tmp_path, stuck_at=50, kill_after=50)
    assert last == 50
    log = run_dir / "events.jsonl"
    assert ended_rounds(log) == list(range(1, 50))
    published = [e["message"]["round"] for e in on_disk(log) if e["kind"] == "message_published"]
    assert published == list(range(50))  # the seed, then one message a round
    done = subprocess.run(
        [*ARGV, "verify", str(run_dir)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "events.jsonl" in done.stdout and done.stdout.strip().endswith("intact")


def test_a_run_killed_mid_flight_keeps_every_round_that_ended_and_verifies(tmp_path: Path) -> None:
    # No turn blocks: the kill lands wherever the loop is (a turn, a publish, a write).
    run_dir, last = run_and_kill(tmp_path, stuck_at=0, kill_after=300)
    log = run_dir / "events.jsonl"
    report = verify_file(log)
    assert report.broken is None, report  # at worst a torn tail, never a broken chain
    rounds = ended_rounds(log)
    assert rounds == list(range(1, len(rounds) + 1))  # whole rounds, in order, from the first
    assert len(rounds) >= last - 1  # every round that ended before the last turn began
    published = [e["message"]["round"] for e in on_disk(log) if e["kind"] == "message_published"]
    assert published[: len(rounds) + 1] == list(range(len(rounds) + 1))  # each with its message


async def test_an_error_of_the_loop_itself_is_raised_as_it_is_with_the_log_on(
    tmp_path: Path,
) -> None:
    def stop(published: Sequence[Message], rnd: int) -> str | None:
        if rnd == 3:
            raise ValueError(f"a broken stop condition in round {rnd}")
        return None

    store = RunStore(tmp_path, "run")
    env = Environment("run", log=store)
    env.add_all(ring(3))
    with pytest.raises(ValueError, match="round 3"):
        await run_team(env, seed=[GO], store=store, stop=stop)
    store.close()
    log = tmp_path / "events.jsonl"
    assert ended_rounds(log) == [1, 2, 3]
    assert [e["kind"] for e in on_disk(log)][-1] == "run_ended"
    assert verify_file(log).intact
