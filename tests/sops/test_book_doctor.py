"""The bounded book doctor: its bounds hold whatever the model asks, its tools only read,
its plans are validated with exactly one correction, and the shipped scenario runs."""

from __future__ import annotations

import hashlib
import json
import random
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sopbus.bus import (
    ConfigError,
    LLMRequest,
    Message,
    ModelOutputError,
    RunStore,
    Turn,
    load_scenario,
    read_jsonl,
)
from sopbus.roles.book._data import BookData, load_book
from sopbus.roles.book._doctor import BookDoctor, DoctorBounds, request_chars
from sopbus.roles.book._plan import ChapterChange, NewChapter, Plan, Suggestion, validate_plan
from sopbus.roles.book._tools import TOOLS, ToolError, call_tool
from sopbus.sops import build_team
from support.cli import ARGV
from support.paths import ROOT
from support.scripted_gateway import ScriptedGateway

DATA = ROOT / "scenarios" / "data" / "journey_west"
SCENARIO = ROOT / "scenarios" / "book_doctor.toml"
QUESTION = Message(
    cause_by="UserRequirement", sent_from="Boss", content="Why is chapter 13 odd?", id="m1", round=0
)

VALID = {
    "type": "final",
    "plan": {
        "diagnosis": "stale title",
        "suggestions": [{"chapter": 13, "note": "retitle"}],
        "adjustments": [{"chapter": 15, "summary": "fixed", "reason": "r"}],
    },
}
UNSAFE = {
    "type": "final",
    "plan": {
        "diagnosis": "stale title",
        "adjustments": [{"chapter": 13, "title": "New", "reason": "r"}],
    },
}


def book() -> BookData:
    return load_book(DATA)


def doctor(data: BookData | None = None, **bounds: Any) -> BookDoctor:
    return BookDoctor(
        book=data or book(), bounds=DoctorBounds(**bounds), llm_defaults={"model": "gpt-4o-mini"}
    )


async def consult(
    gw: ScriptedGateway, tmp_path: Path, data: BookData | None = None, **bounds: Any
) -> tuple[list[Message] | Exception, list[dict[str, Any]]]:
    store = RunStore(tmp_path, "t")
    role = doctor(data, **bounds)
    turn = Turn(run_id="t", round=1, role=role.name, gateway=gw, services=store)
    try:
        out: list[Message] | Exception = list(await role.step([QUESTION], turn))
    except ModelOutputError as exc:
        out = exc
    store.close()
    return out, list(read_jsonl(tmp_path / "events.jsonl", dict[str, Any]))


def kinds(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e["data"] for e in events if e["kind"] == kind]


def answers(*texts: Any) -> ScriptedGateway:
    return ScriptedGateway([t if isinstance(t, str) else json.dumps(t) for t in texts])


# -- bounds, whatever the model asks ----------------------------------------------------------------


def hostile(seed: int) -> Callable[[LLMRequest, int], str]:
    """A model that never finishes: tool calls (known, unknown, writing ones), huge args,
    garbage, and enormous answers."""
    rng = random.Random(seed)
    tools = [*TOOLS, "write_chapter", "delete_chapter", "apply_plan"]

    def answer(request: LLMRequest, attempt: int) -> str:
        pick = rng.randrange(4)
        if pick == 0:
            return "x" * rng.randrange(1, 200_000)
        if pick == 1:
            return json.dumps(
                {"type": "tool_call", "tool": "chapter_cards", "args": {"start": 1, "end": 10_000}}
            )
        call = {
            "type": "tool_call",
            "tool": rng.choice(tools),
            "reason": "y" * rng.randrange(0, 50_000),
            "args": {"chapter": rng.randrange(-5, 40), "query": "monkey " * rng.randrange(0, 5000)},
        }
        return json.dumps(call)

    return answer


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    steps=st.integers(3, 5),
    tools=st.integers(3, 5),
    cap=st.sampled_from([24_000, 40_000, 64_000]),
)
async def test_bounds_hold_whatever_the_model_asks(
    tmp_path_factory: pytest.TempPathFactory, seed: int, steps: int, tools: int, cap: int
) -> None:
    route = "The route. " * 30_000  # a 330,000-character tool result
    data = msgspec.structs.replace(book(), route=route)
    gw = ScriptedGateway(hostile(seed))
    where = tmp_path_factory.mktemp("d")
    out, events = await consult(
        gw,
        where,
        data,
        max_steps=steps,
        max_tool_calls=tools,
        max_request_chars=cap,
        max_result_chars=min(20_000, cap // 3),
    )
    assert isinstance(out, ModelOutputError) and "failed closed" in str(out)
    assert len(gw.calls) == steps  # never a finished plan, so never a correction call
    assert all(request_chars(c.request) <= cap for c in gw.calls)
    assert len(kinds(events, "tool_called")) <= tools
    assert len(kinds(events, "tool_result")) == len(kinds(events, "tool_called"))
    assert all(r["kept"] <= min(20_000, cap // 3) for r in kinds(events, "tool_result"))
    assert not (where / "artifacts" / "plan.json").exists()


async def test_long_transcripts_keep_system_manifest_and_latest_result(tmp_path: Path) -> None:
    data = msgspec.structs.replace(book(), route="R" * 100_000)
    route_call = {"type": "tool_call", "tool": "route_summary", "args": {}, "reason": "route"}
    cards = {
        "type": "tool_call",
        "tool": "chapter_cards",
        "args": {"start": 11, "end": 15},
        "reason": "c",
    }
    gw = answers(route_call, route_call, route_call, cards, VALID)
    out, events = await consult(
        gw,
        tmp_path,
        data,
        max_steps=5,
        max_tool_calls=5,
        max_request_chars=24_000,
        max_result_chars=8_000,
    )
    assert isinstance(out, list)
    last = gw.calls[-1].request
    assert request_chars(last) <= 24_000
    assert last.messages[0].role == "system" and "Tools (arguments)" in last.messages[0].content
    assert "Manifest of the book" in last.messages[1].content
    assert '"chapter":13' in last.messages[-1].content  # the latest result (cards 11-15) is there
    assert "dropped to stay under 24,000 characters" in last.messages[-1].content
    assert max(s["dropped"] for s in kinds(events, "doctor_step")) >= 1
    assert all(r["kept"] <= 8_000 for r in kinds(events, "tool_result"))
    assert any(r["cut"] for r in kinds(events, "tool_result"))


async def test_tool_calls_past_the_limit_are_refused_not_run(tmp_path: Path) -> None:
    call = {"type": "tool_call", "tool": "recent_adjustments", "args": {}, "reason": "r"}
    gw = answers(call, call, call, call, VALID)
    out, events = await consult(gw, tmp_path, max_steps=5, max_tool_calls=3)
    assert isinstance(out, list)
    assert len(kinds(events, "tool_called")) == 3
    assert [r["step"] for r in kinds(events, "tool_refused")] == [4]
    assert "Refused: all 3 tool calls are used" in gw.calls[4].request.messages[-1].content


def test_bounds_outside_their_ranges_are_configuration_errors(tmp_path: Path) -> None:
    for bad in (
        {"max_steps": 6},
        {"max_tool_calls": 2},
        {"max_request_chars": 23_999},
        {"max_request_chars": 64_001},
    ):
        with pytest.raises(ConfigError, match="out of bounds"):
            DoctorBounds(**bad)
    path = tmp_path / "doctor.toml"
    path.write_text(
        f'[scenario]\nname = "d"\nsop = "book_doctor"\nidea = "why?"\n'
        f'[sop]\nbook = "{DATA}"\nmax_steps = 2\n'
    )
    with pytest.raises(ConfigError, match=r"\$\.sop\.max_steps"):
        build_team(load_scenario(path))


# -- the manifest and the tools ------------------------------------------------------------------


def test_the_manifest_has_counts_and_no_body_text() -> None:
    data = book()
    manifest = data.manifest()
    assert manifest["chapters"] == {
        "total": 27,
        "written": 14,
        "planned": 13,
        "numbers": [1, 27],
        "last_written": 14,
        "words_written": sum(c.words for c in data.chapters),
    }
    assert manifest["route"] == "usable" and manifest["facts"] == 12 and manifest["memories"] == 11
    text = doctor(data).manifest_text("q")
    for c in data.chapters:
        assert c.summary[:40] not in text and (not c.opening or c.opening[:40] not in text)
    assert msgspec.structs.replace(data, route="").route_status() == "empty"
    assert msgspec.structs.replace(data, route="a few words").route_status() == "thin"


def test_tools_answer_from_the_book() -> None:
    data = book()
    cards = json.loads(call_tool(data, "chapter_cards", {"start": 12, "end": 15}))["cards"]
    assert [(c["chapter"], c["status"]) for c in cards] == [
        (12, "written"),
        (13, "written"),
        (14, "written"),
        (15, "planned"),
    ]
    assert json.loads(call_tool(data, "chapter_cards", {"start": 1, "end": 27}))["note"].startswith(
        "range cut to 1-10"
    )
    assert "tiger" in json.loads(call_tool(data, "chapter_summary", {"chapter": 13}))["summary"]
    assert "no text yet" in call_tool(data, "chapter_opening", {"chapter": 20})
    assert (
        json.loads(call_tool(data, "search_facts", {"query": "reorder freed"}))["facts"][0]["id"]
        == "F2"
    )
    memories = json.loads(call_tool(data, "search_memories", {"query": "monkey", "chapter": 13}))[
        "memories"
    ]
    assert memories and all(m["chapter"] == 13 for m in memories)
    assert (
        json.loads(call_tool(data, "recent_adjustments", {"limit": 2}))["adjustments"][0]["date"]
        == "2024-05-09"
    )
    with pytest.raises(ToolError, match="chapter_summary needs chapter"):
        call_tool(data, "chapter_summary", {})
    with pytest.raises(ToolError, match="no chapter 99"):
        call_tool(data, "chapter_ending", {"chapter": 99})


def digest(directory: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir())}


async def test_tools_cannot_write(tmp_path: Path) -> None:
    assert not [
        n
        for n in TOOLS
        if any(w in n for w in ("write", "set", "update", "delete", "apply", "edit"))
    ]
    with pytest.raises(ToolError, match=r"unknown tool 'write_chapter'.*all read-only"):
        call_tool(book(), "write_chapter", {"chapter": 13})
    data = book()
    with pytest.raises(AttributeError):
        data.chapters[12].title = "changed"  # type: ignore[misc]
    before = digest(DATA)
    calls = [
        {
            "type": "tool_call",
            "tool": t,
            "args": {"chapter": 13, "query": "monkey", "start": 1, "end": 27},
            "reason": "r",
        }
        for t in ("write_chapter", "chapter_summary", "search_facts")
    ]
    gw = answers(*calls, VALID)
    out, events = await consult(gw, tmp_path, data)
    assert isinstance(out, list)
    assert [r["ok"] for r in kinds(events, "tool_result")] == [False, True, True]
    assert digest(DATA) == before and data == book()
    assert out[0].payload["applied"] is False


# -- the plan validator and the one correction ------------------------------------------------------


def test_the_validator_rejects_unsafe_plans_with_their_fix() -> None:
    data = book()
    ok = Plan(
        diagnosis="d",
        suggestions=[Suggestion(chapter=13, note="retitle")],
        adjustments=[ChapterChange(chapter=15, summary="s", reason="r")],
        new_chapters=[NewChapter(after=14, title="t", summary="s", reason="r")],
    )
    assert validate_plan(ok, data, max_new_chapters=1) == []
    bad = Plan(
        diagnosis="d",
        adjustments=[
            ChapterChange(chapter=13, title="x", reason="r"),
            ChapterChange(chapter=99, title="x", reason="r"),
        ],
        new_chapters=[
            NewChapter(after=5, title="Early", summary="s", reason="r"),
            NewChapter(after=27, title="Late", summary="s", reason="r"),
        ],
    )
    errors = validate_plan(bad, data, max_new_chapters=1)
    assert any(
        "chapter 13: it is written (3,090 words)" in e and "suggestions" in e for e in errors
    )
    assert any("chapter 99: no such chapter" in e for e in errors)
    assert any("2 new chapters proposed; at most 1" in e for e in errors)
    assert any(
        '"Early" after chapter 5: unsafe position' in e and "after chapter 14" in e for e in errors
    )
    assert not any('"Late"' in e for e in errors)


async def test_an_invalid_plan_gets_exactly_one_correction(tmp_path: Path) -> None:
    call = {"type": "tool_call", "tool": "recent_adjustments", "args": {}, "reason": "r"}
    gw = answers(call, UNSAFE, VALID)
    out, events = await consult(gw, tmp_path)
    assert gw.actions() == ["Diagnose", "Diagnose", "CorrectPlan"]
    assert [(v["attempt"], v["ok"]) for v in kinds(events, "plan_validated")] == [
        (1, False),
        (2, True),
    ]
    assert "it is written" in gw.calls[-1].request.messages[-1].content
    assert isinstance(out, list)
    doc = out[0].payload
    assert doc["applied"] is False and doc["status"] == "proposed"
    assert [a["chapter"] for a in doc["adjustment_list"]] == [15]  # planned, 0 words
    assert [s["chapter"] for s in doc["suggestions"]] == [13]  # written: suggestion only
    assert json.loads((tmp_path / "artifacts" / "plan.json").read_text()) == doc


async def test_a_plan_still_invalid_after_its_correction_fails_closed(tmp_path: Path) -> None:
    gw = answers(UNSAFE, UNSAFE, VALID)  # the VALID one is never asked for
    out, events = await consult(gw, tmp_path)
    assert isinstance(out, ModelOutputError) and "still unsafe" in str(out)
    assert gw.actions() == ["Diagnose", "CorrectPlan"]
    assert [v["ok"] for v in kinds(events, "plan_validated")] == [False, False]
    assert not (tmp_path / "artifacts" / "plan.json").exists()


async def test_a_correction_that_asks_for_a_tool_fails_closed(tmp_path: Path) -> None:
    gw = answers(UNSAFE, {"type": "tool_call", "tool": "route_summary", "args": {}, "reason": "r"})
    out, events = await consult(gw, tmp_path)
    assert isinstance(out, ModelOutputError) and "not a final plan" in str(out)
    assert kinds(events, "tool_called") == []


# -- the shipped scenario ---------------------------------------------------------------------------


def test_sopbus_runs_the_shipped_doctor(tmp_path: Path) -> None:
    before = digest(DATA)
    done = subprocess.run(
        [*ARGV, "run", str(SCENARIO), "--runs-dir", str(tmp_path), "--quiet"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    (run_dir,) = tmp_path.iterdir()
    events = list(read_jsonl(run_dir / "events.jsonl", dict[str, Any]))
    assert [e["data"]["tool"] for e in events if e["kind"] == "tool_called"] == [
        "chapter_cards",
        "recent_adjustments",
        "search_memories",
    ]
    assert [e["data"]["ok"] for e in events if e["kind"] == "plan_validated"] == [False, True]
    doc = json.loads((run_dir / "artifacts" / "plan.json").read_text())
    assert doc["applied"] is False and [a["chapter"] for a in doc["adjustment_list"]] == [15]
    assert "Nothing has been applied" in (run_dir / "artifacts" / "plan.md").read_text()
    assert digest(DATA) == before
    verdict = json.loads((run_dir / "summary.json").read_text())["verdict"]
    assert verdict["passed"] is True
    assert verdict["reason"].startswith(
        "a validated plan was proposed (plan.md) with 3 step(s) that name a chapter of the book"
    )


def plan_record(**steps: list[Any]) -> Any:
    from sopbus.bus import RunRecord

    payload = {"diagnosis": "fine", "suggestions": [], "adjustment_list": [], **steps}
    message = Message(
        content="plan", sent_from="BookDoctor", cause_by="ProposePlan", payload=payload
    )
    return RunRecord(end_reason="stop_condition", messages=(message,))


def test_a_plan_with_no_step_does_not_pass() -> None:
    from sopbus.sops.builtin.book_doctor import valid_plan

    empty = valid_plan(plan_record(), book())
    assert not empty.passed
    assert empty.reason == (
        "the plan (plan.md) proposes no step (no suggestion, adjustment or new chapter): a "
        "plan passes with at least one step that names a chapter of the book (its chapters "
        "are 1 to 27)"
    )
    one = valid_plan(plan_record(suggestions=[{"chapter": 2, "note": "cut the stable"}]), book())
    assert one.passed and "1 step(s) that name a chapter of the book" in one.reason
    assert "1 suggestion(s), 0 adjustment(s), 0 new chapter(s)" in one.reason


def test_steps_that_name_no_chapter_of_the_book_do_not_count() -> None:
    from sopbus.sops.builtin.book_doctor import valid_plan

    hollow = plan_record(
        suggestions=[
            {"chapter": 99, "note": "a made-up chapter"},
            {"chapter": 13, "note": "   "},
            {"chapter": True, "note": "True is not chapter 1"},
            {"note": "no chapter at all"},
            "not a step",  # not counted: not a step at all
        ],
        adjustment_list=[{"chapter": 15, "title": "", "summary": None, "reason": "r"}],
        new_chapters=[
            {"after": 14, "title": " ", "summary": "s", "reason": "r"},
            {"after": 0, "title": "Prologue", "summary": "s", "reason": "r"},
        ],
    )
    verdict = valid_plan(hollow, book())
    assert not verdict.passed
    assert "none of the plan's 7 step(s) (plan.md) names a chapter of the book" in verdict.reason
    assert "at least one step that names a chapter of the book" in verdict.reason
    mixed = plan_record(
        suggestions=[{"chapter": 99, "note": "made up"}],
        adjustment_list=[{"chapter": 15, "summary": "the dragon", "reason": "r"}],
        new_chapters=[{"after": 27, "title": "Homecoming", "summary": "s", "reason": "r"}],
    )
    verdict = valid_plan(mixed, book())
    assert verdict.passed
    assert "2 step(s) that name a chapter of the book: 0 suggestion(s), 1 adjustment(s), " in (
        verdict.reason
    )
    assert "1 other step(s) name no chapter of the book or say nothing" in verdict.reason
