"""The flush policy for quiet rounds (bus/store/_store.py): in ``rounds`` mode the records of
rounds that log nothing but their messages and ``round_ended`` share one write, are on disk
within LINGER_S even while a later turn blocks, and a round that logs anything else is
written at its end. A run killed for real keeps a whole chain: what was written verifies."""

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
import trio

from bus import Environment, Message, RunStore, Turn, read_jsonl, run_team
from bus._chain import verify_file
from bus.store._store import LINGER_S
from busfakes import Echo

ROOT = Path(__file__).resolve().parents[1]
GO = Message(cause_by="A0", sent_from="Boss")


def ring(n: int, on_step: Callable[[Sequence[Message], Turn], None] | None = None) -> list[Echo]:
    """``n`` roles passing one token around: role i watches ``A{i}`` and answers ``A{i+1}``."""
    return [Echo(f"r{i}", [f"A{i}"], replies=[f"A{(i + 1) % n}"], on_step=on_step) for i in range(n)]


def on_disk(path: Path) -> list[dict[str, Any]]:
    return list(read_jsonl(path, dict)) if path.is_file() else []


def ended_rounds(path: Path) -> list[int]:
    return [e["round"] for e in on_disk(path) if e["kind"] == "round_ended"]


def sealed_lines(path: Path) -> list[str]:
    """The kinds of the lines that close a batch (one write each)."""
    return [line.split('"', 4)[3] for line in path.read_text().splitlines() if '"_h":"' in line]


async def run(tmp: Path, team: list[Any], max_rounds: int) -> Path:
    store = RunStore(tmp, "run")
    env = Environment("run", log=store)
    env.add_all(team)
    await run_team(env, seed=[GO], store=store, max_rounds=max_rounds)
    store.close()
    log = tmp / "events.jsonl"
    assert verify_file(log).intact
    return log


async def test_quiet_rounds_share_one_write(tmp_path: Path, autojump_clock: object) -> None:
    log = await run(tmp_path, ring(3), max_rounds=40)
    assert ended_rounds(log) == list(range(1, 41))
    # The turns never wait, so the (virtual) clock stands still and the timer never fires:
    # the 40 rounds' 80 records are written with the run's end, in one batch.
    kinds = [k for k in sealed_lines(log) if k != "role_joined"]
    assert kinds == ["message_published", "run_ended"]  # the seed's write, then everything else


async def test_a_round_that_logs_more_than_its_messages_is_on_disk_before_the_next_turn(
        tmp_path: Path, autojump_clock: object) -> None:
    seen: list[tuple[int, list[int]]] = []

    def look(news: Sequence[Message], turn: Turn) -> None:
        seen.append((turn.round, ended_rounds(tmp_path / "events.jsonl")))
        if turn.round == 4:
            turn.emit("looked", at=news[0].id)

    await run(tmp_path, ring(3, on_step=look), max_rounds=6)
    # Rounds 1-3 were quiet and wait; round 4's note writes them, and round 4 is written when
    # it ends; round 5 is quiet again.
    assert seen == [(1, []), (2, []), (3, []), (4, []), (5, [1, 2, 3, 4]), (6, [1, 2, 3, 4])]


async def test_quiet_rounds_are_written_within_the_linger_time_while_a_turn_blocks(
        tmp_path: Path, autojump_clock: object) -> None:
    log = tmp_path / "events.jsonl"
    seen: dict[str, list[int]] = {}

    class Slow(Echo):
        async def step(self, news: Sequence[Message], turn: Turn) -> Sequence[Message]:
            seen["before"] = ended_rounds(log)
            await trio.sleep(LINGER_S * 3)  # a model call, a tool, a human: anything that waits
            seen["after"] = ended_rounds(log)
            return await super().step(news, turn)

    team = ring(5)
    team[4] = Slow("r4", ["A4"], replies=["A0"])
    await run(tmp_path, team, max_rounds=6)
    assert seen == {"before": [], "after": [1, 2, 3, 4]}


KILLED = """
import sys, trio
from pathlib import Path
from bus import Environment, Message, RunStore, run_team
from busfakes import Echo

class Stuck(Echo):
    async def step(self, news, turn):
        Path(sys.argv[2]).write_text(str(turn.round))
        await trio.sleep_forever()

quiet = int(sys.argv[3])
store = RunStore(Path(sys.argv[1]), "killed")
env = Environment("killed", log=store)
env.add_all([Echo(f"r{i}", [f"A{i}"], replies=[f"A{i + 1}"]) for i in range(quiet)])
env.add(Stuck(f"r{quiet}", [f"A{quiet}"]))
trio.run(lambda: run_team(env, seed=[Message(cause_by="A0", sent_from="Boss")], store=store,
                          max_rounds=quiet + 1))
"""


def run_and_kill(tmp: Path, quiet: int, wait_for: Callable[[Path], bool]) -> Path:
    """Runs ``quiet`` quiet rounds in a subprocess, then a turn that never ends; SIGKILLs the
    process once that turn started and ``wait_for(events.jsonl)`` holds. The log's path."""
    run_dir, marker = tmp / "run", tmp / "stuck"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(ROOT)])}
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(KILLED), str(run_dir), str(marker),
                             str(quiet)], env=env, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60  # a guard against a hung test, not a timing assertion
        while not (marker.is_file() and wait_for(run_dir / "events.jsonl")):
            assert proc.poll() is None, proc.communicate()[1].decode()
            assert time.monotonic() < deadline, "the run never got to its stuck turn"
            time.sleep(0.002)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    return run_dir / "events.jsonl"


def test_a_run_killed_while_a_turn_blocks_keeps_its_quiet_rounds_and_verifies(tmp_path: Path) -> None:
    log = run_and_kill(tmp_path, 50, lambda log: 50 in ended_rounds(log))
    report = verify_file(log)
    assert report.intact and report.torn is None, report
    assert ended_rounds(log) == list(range(1, 51))
    published = [e["message"]["round"] for e in on_disk(log) if e["kind"] == "message_published"]
    assert published == list(range(0, 51))  # the seed, then one message a round
    assert "run_ended" not in [e["kind"] for e in on_disk(log)]


def test_a_run_killed_at_once_loses_at_most_its_last_quiet_rounds_and_verifies(tmp_path: Path) -> None:
    log = run_and_kill(tmp_path, 50, lambda log: True)
    report = verify_file(log)
    assert report.broken is None, report  # at worst torn, never tampered
    rounds = ended_rounds(log)
    assert rounds == list(range(1, len(rounds) + 1))  # whole rounds, in order, from the first
    published = [e["message"]["round"] for e in on_disk(log) if e["kind"] == "message_published"]
    assert published == list(range(0, len(rounds) + 1))  # each kept round with its message


async def test_an_error_of_the_loop_itself_is_raised_as_it_is_with_the_log_on(tmp_path: Path) -> None:
    # The rounds loop hosts the store's timer in a nursery; that must not wrap what it raises.
    def stop(published: Sequence[Message], rnd: int) -> str | None:
        raise ValueError(f"a broken stop condition in round {rnd}")

    store = RunStore(tmp_path, "run")
    env = Environment("run", log=store)
    env.add_all(ring(3))
    with pytest.raises(ValueError, match="round 1"):
        await run_team(env, seed=[GO], store=store, stop=stop)
    store.close()
    assert [e["kind"] for e in on_disk(tmp_path / "events.jsonl")][-1] == "run_ended"
