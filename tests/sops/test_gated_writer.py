"""The gated writer: repairs, receipts, escalation to the user, and every fail-closed cause.

Runs use the shipped story store (scenarios/data/gated_writer) and small fixture files
written per test (SIMULATED OUTPUT), with the real sandboxed checker.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import msgspec
import pytest

from sopbus.bus import (
    Budget,
    Completion,
    Environment,
    Gateway,
    LLMRequest,
    PriceBook,
    ProviderError,
    Runner,
    RunStore,
    RunSummary,
    Scenario,
    SimProvider,
    Turn,
    issue_receipt,
    load_fixtures,
    load_scenario,
    read_jsonl,
    verify_run,
)
from sopbus.bus.llm import Completer
from sopbus.roles.gated._guard import SampleFailed, same_model
from sopbus.roles.gated._store import load_outline, load_store, manifest_bytes, plan
from sopbus.roles.gated._writer import ChapterPublisher
from sopbus.sops import build_team
from support.paths import ROOT

DATA = ROOT / "scenarios" / "data" / "gated_writer"
SHIPPED = tomllib.loads((ROOT / "scenarios" / "fixtures" / "gated_writer.toml").read_text())
BAD = SHIPPED["fixture"][0]["responses"][1][
    "draft"
]  # FACT-card:mara-eyes, FACT-card:orrin-dead, HOOK-H1
GOOD = SHIPPED["fixture"][0]["responses"][2]["draft"]
NO_FINDINGS: dict[str, list[Any]] = {"findings": []}


def scenario(
    tmp: Path,
    writer: list[Any],
    *,
    model_check: list[Any] | None = None,
    sop: dict[str, Any] | None = None,
    budget: str = "0.50",
    latency_ms: int = 0,
) -> Scenario:
    """A gated-writer scenario in ``tmp`` whose writer (and model check) answer in order."""
    fixtures = [{"action": "WriteChapter", "responses": writer}]
    if model_check is not None:
        fixtures.append({"action": "ModelCheck", "responses": model_check})
    (tmp / "fixtures.toml").write_text(
        "# SIMULATED OUTPUT: canned answers for the gated writer tests; no model wrote them.\n"
        + msgspec.toml.encode({"simulated": True, "fixture": fixtures}).decode()
    )
    options = {
        "store": str(DATA),
        "outlines": [str(DATA / "outline.toml")],
        "budget_chars": 1200,
        "model_check": model_check is not None,
        **(sop or {}),
    }
    # the shipped story store is outside the test's folder, as the file says it allows
    doc = {
        "scenario": {"name": "gated-test", "sop": "gated_writer", "allow_outside": True},
        "run": {"max_rounds": 20, "budget_usd": budget},
        "llm": {
            "provider": "sim",
            "model": "gpt-4o-mini",
            "max_tokens": 2000,
            "fixtures": ["fixtures.toml"],
            "latency_ms": latency_ms,
        },
        "sop": options,
    }
    path = tmp / "scenario.toml"
    path.write_text(msgspec.toml.encode(doc).decode())
    return load_scenario(path)


async def run(
    scn: Scenario, tmp: Path, provider: Completer | None = None
) -> tuple[RunSummary, Path]:
    team = build_team(scn)
    store = RunStore.create(tmp / "runs", scn.name)
    provider = provider or SimProvider(
        latency_ms=scn.llm.latency_ms, fixtures=load_fixtures(scn.fixture_paths())
    )
    gateway = Gateway(
        provider,
        PriceBook.load(scn.price_table()),
        Budget(scn.run.budget_usd),
        sink=store.record_call,
        max_attempts=1,
    )
    env = Environment(store.run_id, log=store.log)
    env.add_all(team.roles)
    result = await Runner(
        env,
        max_rounds=scn.run.max_rounds,
        seed=team.seed,
        stop=team.stop,
        gateway=gateway,
        store=store,
    ).run()
    store.close()
    return result, store.run_dir


def notes(run_dir: Path, kind: str) -> list[dict[str, Any]]:
    return [
        e["data"] for e in read_jsonl(run_dir / "events.jsonl", dict[str, Any]) if e["kind"] == kind
    ]


def receipts(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "artifacts" / "receipts.jsonl"
    return list(read_jsonl(path)) if path.exists() else []


def report(run_dir: Path, n: int) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(
        (run_dir / "artifacts" / "ch07" / f"report-{n}.json").read_text()
    )
    return result


# -- the happy paths ------------------------------------------------------------------------


async def test_shipped_scenario_delivers_with_one_repair_and_a_receipt(tmp_path: Path) -> None:
    from sopbus._assemble import execute

    scn = load_scenario(ROOT / "scenarios" / "gated_writer.toml")
    scn = msgspec.structs.replace(scn, run=msgspec.structs.replace(scn.run, runs_dir=str(tmp_path)))
    outcome = await execute(scn)
    art = outcome.run_dir / "artifacts" / "ch07"
    assert outcome.summary.end_reason == "stop_condition"
    assert outcome.summary.detail.startswith("ch07 delivered with receipt ")
    assert [e["id"] for e in report(outcome.run_dir, 1)["errors"]] == [
        "HOOK-H1",
        "FACT-card:mara-eyes",
        "FACT-card:orrin-dead",
    ]
    assert report(outcome.run_dir, 2)["passed"] is True
    assert (art / "chapter.md").read_text() == GOOD
    # the evidence request was served within 30% more of the budget
    m1 = json.loads((art / "manifest-1.json").read_text())
    assert 0 < m1["extra_chars_used"] <= m1["extra_chars_allowed"] == 360
    assert verify_run(outcome.run_dir).intact


async def test_fails_twice_then_passes_gets_a_receipt(tmp_path: Path) -> None:
    run_result, run_dir = await run(
        scenario(
            tmp_path, [{"draft": BAD}, {"draft": BAD}, {"draft": GOOD}], model_check=[NO_FINDINGS]
        ),
        tmp_path,
    )
    assert run_result.end_reason == "stop_condition"
    assert [report(run_dir, n)["passed"] for n in (1, 2, 3)] == [False, False, True]
    [receipt] = receipts(run_dir)
    assert receipt["sample"] == "ch07" and receipt["subjects"]["draft"]["path"] == "ch07/draft-3.md"
    assert receipt["subjects"]["report"]["path"] == "ch07/report-3.json"
    assert (run_dir / "artifacts" / "ch07" / "chapter.md").read_text() == GOOD
    assert notes(run_dir, "receipt_issued")[0]["seq"] == 1
    assert verify_run(run_dir).intact


async def test_fails_three_times_goes_to_the_user_without_a_receipt(tmp_path: Path) -> None:
    run_result, run_dir = await run(scenario(tmp_path, [{"draft": BAD}]), tmp_path)
    assert run_result.end_reason == "stop_condition"
    assert "ch07 went to the user without a receipt" in run_result.detail
    assert [report(run_dir, n)["passed"] for n in (1, 2, 3)] == [False, False, False]
    assert not (run_dir / "artifacts" / "ch07" / "draft-4.md").exists()  # no third repair
    assert receipts(run_dir) == [] and notes(run_dir, "receipt_issued") == []
    to_user = (run_dir / "artifacts" / "ch07" / "to_user.md").read_text()
    assert "FACT-card:orrin-dead" in to_user and "no receipt" in to_user
    assert not (run_dir / "artifacts" / "ch07" / "chapter.md").exists()


async def test_receipts_chain_across_samples(tmp_path: Path) -> None:
    second = tmp_path / "ch08.toml"
    second.write_text((DATA / "outline.toml").read_text().replace('id = "ch07"', 'id = "ch08"', 1))
    scn = scenario(
        tmp_path, [{"draft": GOOD}], sop={"outlines": [str(DATA / "outline.toml"), str(second)]}
    )
    run_result, run_dir = await run(scn, tmp_path)
    assert run_result.end_reason == "stop_condition"
    raw = (run_dir / "artifacts" / "receipts.jsonl").read_bytes().splitlines()
    first, then = (msgspec.json.decode(line) for line in raw)
    assert [first["sample"], then["sample"]] == ["ch07", "ch08"]
    assert (
        first["_h"][:8] == then["_prev"]
    )  # the second seal names the first (_h covers it in full)


def test_manifest_is_deterministic_sorted_and_hashed() -> None:
    store, outline = load_store(DATA), load_outline(DATA / "outline.toml")
    a = manifest_bytes(plan(store, outline, budget_chars=1200, fact_share=0.6))
    b = manifest_bytes(plan(load_store(DATA), outline, budget_chars=1200, fact_share=0.6))
    assert a == b
    doc = json.loads(a)
    ids = [i["id"] for i in doc["items"]]
    assert ids == sorted(ids)
    assert doc["used_chars"] <= 1200
    assert sum(i["chars"] for i in doc["items"] if i["kind"] == "fact") <= 720
    digest = doc.pop("sha256")
    import hashlib

    assert hashlib.sha256(msgspec.json.encode(doc, order="sorted")).hexdigest() == digest


# -- fail-closed causes -----------------------------------------------------------------------


def assert_failed(run_result: RunSummary, run_dir: Path, cause: str) -> None:
    """The sample failed closed with ``cause``: event, artifact, summary, and nothing delivered."""
    assert [n["cause"] for n in notes(run_dir, "sample_failed")] == [cause]
    failed = json.loads((run_dir / "artifacts" / "ch07" / "failed.json").read_text())
    assert failed["status"] == "failed" and failed["cause"] == cause
    summary = json.loads((run_dir / "summary.json").read_text())
    assert f"cause={cause}" in (summary["error"] or summary["detail"])
    assert receipts(run_dir) == []
    assert not (run_dir / "artifacts" / "ch07" / "chapter.md").exists()
    assert verify_run(run_dir).intact


async def test_checker_timeout_fails_closed(tmp_path: Path) -> None:
    scn = scenario(
        tmp_path,
        [{"draft": GOOD}],
        sop={"checker": ["python", "-c", "import time; time.sleep(30)"], "checker_timeout_s": 0.5},
    )
    run_result, run_dir = await run(scn, tmp_path)
    assert run_result.status == "failed"
    assert_failed(run_result, run_dir, "timeout")


async def test_model_timeout_fails_closed(tmp_path: Path) -> None:
    scn = scenario(tmp_path, [{"draft": GOOD}], latency_ms=5000, sop={"stage_timeout_s": 0.2})
    run_result, run_dir = await run(scn, tmp_path)
    assert run_result.status == "failed"
    assert_failed(run_result, run_dir, "timeout")
    assert not (run_dir / "artifacts" / "ch07" / "draft-1.md").exists()


async def test_checker_nonzero_exit_fails_closed(tmp_path: Path) -> None:
    scn = scenario(
        tmp_path, [{"draft": GOOD}], sop={"checker": ["python", "-c", "import sys; sys.exit(3)"]}
    )
    run_result, run_dir = await run(scn, tmp_path)
    assert_failed(run_result, run_dir, "nonzero_exit")
    assert "exited with 3" in notes(run_dir, "sample_failed")[0]["detail"]


@pytest.mark.parametrize(
    "answer",
    [
        {"draft": GOOD, "evidence_requests": [{"kind": "fact", "query": "the bell"}]},  # both
        {"evidence_requests": [{"kind": "fact", "query": f"query {n}"} for n in range(4)]},  # 4 > 3
        {"text": GOOD},  # not the schema at all
    ],
)
async def test_schema_violation_fails_closed(tmp_path: Path, answer: dict[str, Any]) -> None:
    run_result, run_dir = await run(scenario(tmp_path, [answer]), tmp_path)
    assert_failed(run_result, run_dir, "schema_violation")
    assert not (run_dir / "artifacts" / "ch07" / "draft-1.md").exists()  # no silent repair


async def test_requests_over_the_quota_across_turns_fail_closed(tmp_path: Path) -> None:
    two = {
        "evidence_requests": [{"kind": "prose", "query": "gulls"}, {"kind": "fact", "query": "oil"}]
    }
    run_result, run_dir = await run(scenario(tmp_path, [two, two]), tmp_path)
    assert_failed(run_result, run_dir, "schema_violation")
    assert "1 left of 3" in notes(run_dir, "sample_failed")[0]["detail"]


async def test_budget_fails_closed(tmp_path: Path) -> None:
    run_result, run_dir = await run(
        scenario(tmp_path, [{"draft": GOOD}], budget="0.0001"), tmp_path
    )
    assert run_result.end_reason == "budget_exhausted"
    assert_failed(run_result, run_dir, "budget")


class OtherModel:
    """Answers as the simulator does, but says another model wrote it."""

    name = "sim"

    def __init__(self, inner: SimProvider, model: str):
        self.inner, self.model = inner, model

    async def complete(self, request: LLMRequest) -> Completion:
        answer = await self.inner.complete(request)
        return msgspec.structs.replace(answer, model=self.model)


async def test_another_model_fails_closed_without_retry(tmp_path: Path) -> None:
    scn = scenario(tmp_path, [{"draft": GOOD}])
    provider = OtherModel(SimProvider(fixtures=load_fixtures(scn.fixture_paths())), "gpt-4o")
    run_result, run_dir = await run(scn, tmp_path, provider)
    assert_failed(run_result, run_dir, "model_mismatch")
    calls = list(read_jsonl(run_dir / "costs.jsonl", dict[str, Any]))
    assert [c["model"] for c in calls] == ["gpt-4o-mini"]  # one call; no retry on another model


def test_a_dated_snapshot_is_the_same_model() -> None:
    assert same_model("gpt-4o-2024-08-06", "gpt-4o")
    assert not same_model("gpt-4o-mini", "gpt-4o")
    assert not same_model("gpt-4o", "gpt-4o-mini")


async def test_provider_error_fails_closed(tmp_path: Path) -> None:
    class Down:
        name = "sim"

        async def complete(self, request: LLMRequest) -> Completion:
            raise ProviderError("HTTP 500 from the test", retryable=True)

    run_result, run_dir = await run(scenario(tmp_path, [{"draft": GOOD}]), tmp_path, Down())
    assert_failed(run_result, run_dir, "provider_error")


@pytest.mark.parametrize(
    "checker",
    [
        ["python", "-c", "print('not json')"],
        ["python", "-c", 'print(\'{"schema": "gate-report/1"}\')'],
        # valid shape, but about another draft
        [
            "python",
            "-c",
            "import json; print(json.dumps({'schema': 'gate-report/1', 'sample': 'ch07', "
            "'draft_sha256': '0' * 64, 'passed': True, 'errors': [], 'warnings': []}))",
        ],
        # 'passed' while reporting an error
        [
            "python",
            "-c",
            "import json,hashlib; d=json.load(open('input.json'))['draft']; print(json.dumps("
            "{'schema': 'gate-report/1', 'sample': 'ch07', 'draft_sha256': "
            "hashlib.sha256(d.encode()).hexdigest(), 'passed': True, 'errors': [{'id': "
            "'OUTLINE-HE1', 'rule': 'outline', 'message': 'x'}], 'warnings': []}))",
        ],
    ],
)
async def test_invalid_checker_report_fails_closed(tmp_path: Path, checker: list[str]) -> None:
    run_result, run_dir = await run(
        scenario(tmp_path, [{"draft": GOOD}], sop={"checker": checker}), tmp_path
    )
    assert_failed(run_result, run_dir, "invalid_detector_report")


@pytest.mark.parametrize(
    "finding",
    [
        {
            "fact_id": "card:mara-eyes",
            "quote": "her violet eyes",
            "problem": "eye colour",
        },  # not in the draft
        {"fact_id": "card:nobody", "quote": "grey eyes", "problem": "no such fact"},
    ],
)
async def test_unverifiable_model_finding_fails_closed(
    tmp_path: Path, finding: dict[str, str]
) -> None:
    scn = scenario(tmp_path, [{"draft": GOOD}], model_check=[{"findings": [finding]}])
    run_result, run_dir = await run(scn, tmp_path)
    assert_failed(run_result, run_dir, "invalid_detector_report")


async def test_verifiable_model_finding_blocks(tmp_path: Path) -> None:
    finding = {"fact_id": "state:tomas-arm", "quote": "Working one-handed", "problem": "test"}
    scn = scenario(tmp_path, [{"draft": GOOD}], model_check=[{"findings": [finding]}, NO_FINDINGS])
    _run_result, run_dir = await run(scn, tmp_path)
    assert [e["id"] for e in report(run_dir, 1)["errors"]] == ["MODEL-state:tomas-arm"]
    assert report(run_dir, 2)["passed"] is True
    assert len(receipts(run_dir)) == 1


async def test_publisher_refuses_a_receipt_whose_files_changed(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "run", "run")
    art = store.artifacts_dir
    for rel, text in (
        ("ch07/draft-1.md", GOOD),
        ("ch07/manifest-0.json", "{}"),
        ("ch07/report-1.json", "{}"),
    ):
        store.write_artifact(rel, text, role="Gate", round=1)
    _, digest = issue_receipt(
        art,
        sample="ch07",
        gate="Gate",
        round=1,
        subjects={
            "draft": "ch07/draft-1.md",
            "manifest": "ch07/manifest-0.json",
            "report": "ch07/report-1.json",
        },
    )
    (art / "ch07" / "draft-1.md").write_text(GOOD.replace("grey", "blue"))  # after the gate
    from sopbus.bus import Message

    passed = Message(
        cause_by="GateChapter",
        sent_from="Gate",
        id="m1",
        payload={
            "sample": "ch07",
            "verdict": "passed",
            "receipt": digest,
            "draft": "ch07/draft-1.md",
        },
    )
    publisher = ChapterPublisher(name="Publisher")
    with pytest.raises(SampleFailed) as failed:
        await publisher.step(
            [passed], Turn(run_id="run", round=2, role="Publisher", services=store)
        )
    store.close()
    assert failed.value.cause == "receipt_invalid"
    assert "ch07/draft-1.md has changed" in failed.value.detail
    assert not (art / "ch07" / "chapter.md").exists()


async def test_publisher_refuses_a_broken_receipt_chain(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "run", "run")
    art = store.artifacts_dir
    store.write_artifact("ch07/draft-1.md", GOOD, role="Gate", round=1)
    _, digest = issue_receipt(
        art, sample="ch07", gate="Gate", round=1, subjects={"draft": "ch07/draft-1.md"}
    )
    path = art / "receipts.jsonl"
    path.write_bytes(path.read_bytes().replace(b'"round":1', b'"round":2'))
    from sopbus.bus import Message

    passed = Message(
        cause_by="GateChapter",
        sent_from="Gate",
        id="m1",
        payload={
            "sample": "ch07",
            "verdict": "passed",
            "receipt": digest,
            "draft": "ch07/draft-1.md",
        },
    )
    with pytest.raises(SampleFailed) as failed:
        await ChapterPublisher(name="Publisher").step(
            [passed], Turn(run_id="run", round=2, role="Publisher", services=store)
        )
    store.close()
    assert failed.value.cause == "receipt_invalid"
    assert "receipts.jsonl:1: edited" in failed.value.detail
    events = list(read_jsonl(tmp_path / "run" / "events.jsonl", dict[str, Any]))
    assert [e["data"]["cause"] for e in events if e["kind"] == "sample_failed"] == [
        "receipt_invalid"
    ]


# -- the detector's checks, one by one ------------------------------------------------------


def detector_input(draft: str) -> dict[str, Any]:
    from sopbus.roles.gated._check import check

    store, outline = load_store(DATA), load_outline(DATA / "outline.toml")
    manifest = plan(store, outline, budget_chars=1200, fact_share=0.6)
    prose = [
        {"id": i.id, "text": store.items[i.id].text} for i in manifest.items if i.kind == "prose"
    ]
    facts = [{"id": i.id, "text": i.text, "forbid": list(i.forbid)} for i in store.facts()]
    assert prose and facts
    data = {
        "sample": "ch07",
        "draft": draft,
        "outline": msgspec.to_builtins(outline),
        "facts": facts,
        "prose": prose,
    }
    return check(data) | {"prose": prose}


def error_ids(draft: str) -> list[str]:
    return [e["id"] for e in detector_input(draft)["errors"]]


def test_the_detector_blocks_each_verifiable_error_by_its_id() -> None:
    assert detector_input(GOOD)["passed"] is True and error_ids(GOOD) == []
    assert error_ids(GOOD.replace("unmoored", "adrift")) == ["OUTLINE-HE1"]
    assert error_ids("The tide bell was silent that evening. " + GOOD) == ["TIMELINE-HE3"]
    assert error_ids("# Chapter 7\n\n" + GOOD) == ["CONTRACT-FORBID-1"]
    assert "CONTRACT-LENGTH" in error_ids(GOOD[:400])
    assert error_ids(GOOD.replace("red hand", "red mark")) == ["NEWFACT-N1"]
    prose = detector_input(GOOD)["prose"][0]
    copied = " ".join(prose["text"].split()[:14])
    assert error_ids(copied + " " + GOOD) == [f"COPY-{prose['id']}"]
    # an adjustable beat left out is a warning, never a block
    no_gulls = detector_input(GOOD.replace("gulls", "terns").replace("Gulls", "Terns"))
    assert no_gulls["passed"] is True and [w["id"] for w in no_gulls["warnings"]] == ["BEAT-B2"]
