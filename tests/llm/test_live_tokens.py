"""Live tokens: with ``stream = true`` the text being generated appears in the live view as
it arrives (on a real pseudo-terminal), and the log and ledger are as without streaming."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pexpect

from sopbus.bus import (
    ChatMessage,
    LedgerLine,
    LLMRequest,
    OpenAIProvider,
    read_jsonl,
    without_wall_clock,
)
from sopbus.bus.llm._live import LiveText
from support.cli import ARGV
from support.paths import ROOT

POEM = (
    "Roses wait in the cold room\nstems cut at dawn for the market\n"
    "a card that says happy birthday\nand a van that leaves at half past four"
)

SCENARIO = """
[scenario]
name = "poet"
idea = "a poem about the flower shop"

[run]
max_rounds = 2
budget_usd = 1

[llm]
provider = "sim"
model = "gpt-4o-mini"
stream = {stream}
latency_ms = 2500
fixtures = ["poems.toml"]

[actions.WritePoem]
instruction = "Write a short poem about the message."

[[roles]]
name = "Poet"
watch = ["UserRequirement"]
actions = ["WritePoem"]

[[roles]]
name = "Critic"
watch = ["UserRequirement"]
actions = ["WritePoem"]
"""


def _scenario(tmp: Path, stream: bool) -> Path:
    poem = json.dumps(POEM)  # a JSON string is a TOML basic string
    (tmp / "poems.toml").write_text(
        f'simulated = true\n[[fixture]]\naction = "WritePoem"\nresponses = [{poem}, {poem}]\n'
    )
    path = tmp / f"poet_{stream}.toml"
    path.write_text(SCENARIO.replace("{stream}", str(stream).lower()))
    return path


# Concurrent turns reserve and settle in whatever order trio schedules them, so the running
# total and seq of a line, and the order of reservation notes, may differ between any two
# runs; each call's own figures, the messages and the totals may not.
_ORDER_FIELDS = ("seq", "total_usd")


def _ledger(runs: Path) -> list[dict[str, Any]]:
    (run_dir,) = [p for p in runs.iterdir() if p.is_dir()]
    lines = [without_wall_clock(LedgerLine(**line)) for line in read_jsonl(run_dir / "costs.jsonl")]
    return sorted(
        ({k: v for k, v in line.items() if k not in _ORDER_FIELDS} for line in lines),
        key=lambda line: (line["round"], line["role"], line["attempt"]),
    )


def _messages(runs: Path) -> list[dict[str, Any]]:
    from sopbus.bus import logical_view

    (run_dir,) = [p for p in runs.iterdir() if p.is_dir()]
    return [
        e
        for e in logical_view(read_jsonl(run_dir / "events.jsonl"))
        if e["kind"] in ("message_published", "message_undelivered")
    ]


def _summary(runs: Path) -> dict[str, Any]:
    (run_dir,) = [p for p in runs.iterdir() if p.is_dir()]
    summary: dict[str, Any] = json.loads((run_dir / "summary.json").read_text())
    return {k: summary[k] for k in ("total_usd", "llm_calls", "prompt_tokens", "completion_tokens")}


def test_streamed_text_shows_in_the_live_view_each_call_on_its_own_line(tmp_path: Path) -> None:
    scenario = _scenario(tmp_path, stream=True)
    child = pexpect.spawn(
        ARGV[0],
        [*ARGV[1:], "run", str(scenario), "--runs-dir", str(tmp_path / "runs")],
        cwd=str(ROOT),
        env={**os.environ, "NO_COLOR": "1"},
        encoding="utf-8",
        timeout=60,
        dimensions=(30, 150),
    )
    # Mid-call: the latest line of each call in flight, the two concurrent calls apart.
    child.expect(r"Poet: WritePoem \| stems cut at")
    child.expect(r"Critic: WritePoem \| [a-z]")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def test_a_streamed_run_logs_and_ledgers_as_without_streaming(tmp_path: Path) -> None:
    runs = {}
    for stream in (True, False):
        runs[stream] = tmp_path / f"runs_{stream}"
        scenario = _scenario(tmp_path, stream=stream)
        # Not --quiet: the progress display is what a streaming provider streams into.
        done = subprocess.run(
            [*ARGV, "run", str(scenario), "--runs-dir", str(runs[stream])],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
    assert _ledger(runs[True]) == _ledger(runs[False])
    assert _messages(runs[True]) == _messages(runs[False])
    assert _summary(runs[True]) == _summary(runs[False])


class _Watched(LiveText):
    """Remembers every piece fed and what the view would show at that moment."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[list[str]] = []

    def feed(self, call: int, piece: str) -> None:
        super().feed(call, piece)
        self.seen.append(self.lines())


async def test_the_openai_provider_feeds_the_stream_piece_by_piece_from_a_real_server() -> None:
    from support.openai_server import Answer, OpenAIServer

    live = _Watched()
    request = LLMRequest(
        messages=(ChatMessage("user", "A poem."),),
        model="gpt-4o-mini",
        max_tokens=100,
        role="Poet",
        action="WritePoem",
    )
    with OpenAIServer() as server:
        server.script(Answer("first line\nsecond line of the poem", chunks=4))
        async with OpenAIProvider(
            base_url=server.base_url, api_key="sk-x", stream=True
        ) as provider:
            provider.live = live
            completion = await provider.complete(request)
    assert completion.text == "first line\nsecond line of the poem"
    assert len(live.seen) == 4
    assert live.seen[-1] == ["Poet: WritePoem | second line of the poem"]
    assert live.lines() == []  # the call ended: its line is gone
