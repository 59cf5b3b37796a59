"""The prefix share of bus.llm._prefix, and the layout of the shipped scenarios' prompts:
measured on sim runs by bench/prefix.py, which must not fall back below the issue's goal."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from sopbus.bus import ChatMessage, LLMRequest
from sopbus.bus.llm._prefix import PrefixTally, chat_tokens, common_prefix
from support.paths import ROOT, SCENARIOS


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
# Measured after the layouts of issue 26 (0.44 and 0.63 before any layout; 0.573 and 0.561
# after the first, stable part first per role): the company's calls start with what they
# work from, whoever asks (0.664); every book call from the writing on shows a heading's
# material, then its content (0.663; 0.590 with the content first and the material shown
# only to the writing and the revision): what its calls do not share is each heading's
# first call and text new to the run (material, a first draft, a split's parts, an
# evaluation, a strategy) with the worker's own part.
FLOORS = {"book_writer": GOAL, "software_company": GOAL}


@pytest.mark.parametrize("stem", sorted(FLOORS))
def test_the_shipped_layout_keeps_its_prefix_share(stem: str, tmp_path: Path) -> None:
    bench = _bench()
    figures = bench.measure(SCENARIOS / f"{stem}.toml", tmp_path)  # type: ignore[attr-defined]
    assert figures.status == "completed" and figures.calls > 10
    assert figures.any_share >= FLOORS[stem], (stem, figures.any_share)


def _shared_text(a: LLMRequest, b: LLMRequest) -> str:
    """The text ``a`` and ``b`` share from their start (whole messages, then characters)."""
    out = []
    for x, y in zip(a.messages, b.messages, strict=False):
        if x == y:
            out.append(x.content)
            continue
        if x.role == y.role:
            n = next((i for i, (c, d) in enumerate(zip(x.content, y.content)) if c != d), 0)
            out.append(x.content[:n])
        break
    return "\n".join(out)


def test_the_company_s_calls_start_with_what_they_work_from_whoever_asks(
    tmp_path: Path,
) -> None:
    bench = _bench()
    sent: list[LLMRequest] = []
    with bench.watching(sent):  # type: ignore[attr-defined]
        bench.measure(SCENARIOS / "software_company.toml", tmp_path)  # type: ignore[attr-defined]
    first: dict[str, LLMRequest] = {}
    for request in sent:
        first.setdefault(request.action, request)
    design = first["WriteTasks"].messages[0].content.split("### WriteDesign from Bob\n")[1]
    design = design.split("\n\nYou are Eve")[0]
    # The engineer's first call starts as the project manager's: through the whole design.
    assert design in _shared_text(first["WriteTasks"], first["WriteCode"])
    # QA's first call starts as the engineer's summary: through the whole code listing.
    summary, tests = first["SummarizeCode"], first["WriteTest"]
    code = summary.messages[0].content.split("### WriteTasks from Eve")[0]
    assert "### wordcount/cli.py\n```python\n" in code
    assert code in _shared_text(summary, tests)
    # Who the role is closes the system turn; the task opens the user turn.
    for request in (tests, first["WriteCode"]):
        system, user = request.messages
        assert system.role == "system" and system.content.startswith("## Context\n")
        assert "\n\nYou are " in system.content and user.content.startswith("## Your task: ")


def test_the_book_s_calls_about_a_heading_start_alike_through_its_material(
    tmp_path: Path,
) -> None:
    bench = _bench()
    sent: list[LLMRequest] = []
    with bench.watching(sent):  # type: ignore[attr-defined]
        bench.measure(SCENARIOS / "book_writer.toml", tmp_path)  # type: ignore[attr-defined]
    heading = "The Pilgrim and His Disciples"
    calls = {r.action: r for r in sent if r.subject == heading}
    write = calls["WriteContent"]
    material = write.messages[1].content.split("Material:\n")[1].split("\n\nContent:\n")[0]
    assert material.startswith('From the note "')
    draft = calls["EvaluateContent"].messages[1].content.split("Content:\n")[1]
    draft = draft.split("\n\nYou are ")[0]
    # The editor's call starts as the writer's did, through the whole material.
    assert material in _shared_text(write, calls["EvaluateContent"])
    # The revision plan and the revision start as the editor's call, through the draft.
    for action in ("PlanRevision", "ReviseContent"):
        shared = _shared_text(calls["EvaluateContent"], calls[action])
        assert material in shared and draft in shared, action
    # The news comes after what the calls share: the evaluation to plan from, the strategy.
    for action, news in (("PlanRevision", "Evaluation:\n"), ("ReviseContent", "Strategy:\n")):
        user = calls[action].messages[1].content
        assert user.index("Material:\n") < user.index("Content:\n") < user.index(news)
