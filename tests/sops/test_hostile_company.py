"""The software company against a hostile OpenAI-compatible server (issue 13).

Each run is ``sopbus run scenarios/software_company.toml --provider openai --base-url ...
--model gpt-4o-mini`` (in-process through the CLI's ``main``, one in a subprocess), three
rounds, ``timeout_s = 0.5``, two attempts per call. The server answers the first request
honestly (real token counts) and then turns hostile: for good, or once. Every run is checked
the same way: its end reason and exit code, spend against the cap (or the overrun rule: the
provider's own bill is ledgered even past the cap, and nothing is spent after it), and the
ledger against what the server reported: the tokens of every answer it completed, at their
price, plus each attempt that may have been billed at exactly its reservation.
"""

from __future__ import annotations

import json
import random
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from sopbus.bus import ChatMessage, LedgerLine, LLMRequest, PriceBook, Usage, read_jsonl
from sopbus.bus.llm._sim import _generate
from sopbus.bus.llm._tokens import count_prompt, count_text
from sopbus.bus.store._verify import verify_run
from sopbus.cli import main
from support.cli import ARGV
from support.openai_server import (
    Answer,
    BadChunk,
    Cut,
    Huge,
    OpenAIServer,
    Raw,
    Static,
    StreamError,
    Trickle,
)
from support.paths import ROOT

MAIN = ROOT / "scenarios" / "software_company.toml"
FIXTURES = ROOT / "scenarios" / "fixtures" / "software_company.toml"
PRICE = PriceBook.load().price("gpt-4o-mini")
HTML = b"<!DOCTYPE html><html><body><h1>502 Bad Gateway</h1></body></html>"
CAP = Decimal("0.05")


def honest(body: dict[str, Any]) -> Answer:
    """A schema-valid answer with the token counts a real server would report."""
    schema = (body.get("response_format") or {}).get("json_schema", {}).get("schema")
    request = LLMRequest(
        messages=tuple(ChatMessage(m["role"], m["content"]) for m in body["messages"]),
        model=body["model"],
        schema=schema,
        max_tokens=max_tokens(body),
    )
    text = _generate(request, random.Random(len(body["messages"][-1]["content"])))
    return Answer(
        text, prompt_tokens=count_prompt(request), completion_tokens=count_text(text, body["model"])
    )


def max_tokens(body: dict[str, Any]) -> int:
    return int(body.get("max_completion_tokens") or body["max_tokens"])


class Script:
    """The server's side of a run: honest answers, ``hostile`` ones from request ``first``
    on (``times`` of them, or for good), and every usage the server reported."""

    def __init__(
        self,
        hostile: Callable[[dict[str, Any]], Static],
        *,
        first: int = 2,
        times: int | None = None,
    ):
        self.hostile, self.first, self.times = hostile, first, times
        self.reported: list[Usage] = []
        self._seen = 0
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> Static:
        with self._lock:
            self._seen += 1
            n = self._seen
        turned = n >= self.first and (self.times is None or n < self.first + self.times)
        reply = self.hostile(body) if turned else honest(body)
        if isinstance(reply, Answer):  # a whole answer with its usage: the server billed it
            with self._lock:
                self.reported.append(Usage(reply.prompt_tokens or 0, reply.completion_tokens or 0))
        return reply


@dataclass(frozen=True)
class Mode:
    name: str
    hostile: Callable[[dict[str, Any]], Static]
    stream: bool = False


MODES = {
    mode.name: mode
    for mode in (
        Mode("inflated usage", lambda b: replace(honest(b), completion_tokens=10 * max_tokens(b))),
        Mode("negative usage", lambda b: replace(honest(b), prompt_tokens=-50_000)),
        Mode(
            "huge usage",
            lambda b: replace(honest(b), prompt_tokens=10**12, completion_tokens=10**9),
        ),
        Mode("trickle", lambda b: Trickle(honest(b))),
        Mode("huge body", lambda b: Huge(32 * 1024 * 1024)),
        Mode("html body", lambda b: Raw(HTML)),
        Mode("stream cut", lambda b: Cut(honest(b), events=2), stream=True),
        Mode("bad chunk", lambda b: BadChunk(honest(b), after=2), stream=True),
        Mode("error event", lambda b: StreamError(honest(b), after=1, code="500"), stream=True),
    )
}


def scenario(tmp: Path, *, stream: bool, llm: str = "") -> Path:
    text = MAIN.read_text(encoding="utf-8").replace(
        'fixtures = ["fixtures/software_company.toml"]',
        f"fixtures = [{json.dumps(str(FIXTURES))}]\ntimeout_s = 0.5\nmax_attempts = 2\n"
        f"stream = {str(stream).lower()}\n{llm}",
    )
    # the shipped fixtures are outside the test's folder, as the file says it allows
    text = text.replace("[scenario]\n", "[scenario]\nallow_outside = true\n", 1)
    path = tmp / "company.toml"
    path.write_text(text, encoding="utf-8")
    return path


@dataclass
class Run:
    code: int
    run_dir: Path
    summary: dict[str, Any]
    lines: list[LedgerLine]
    events: list[dict[str, Any]]
    requests: int
    reported: list[Usage]
    bodies: list[dict[str, Any]]


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local-test")


def company_run(
    tmp: Path,
    script: Script,
    *,
    stream: bool = False,
    cap: Decimal = CAP,
    extra: tuple[str, ...] = (),
    llm: str = "",
) -> Run:
    runs = tmp / "runs"
    with OpenAIServer() as server:
        server.script(script)
        code = main(
            [
                "run",
                str(scenario(tmp, stream=stream, llm=llm)),
                "--provider",
                "openai",
                "--base-url",
                server.base_url,
                "--model",
                "gpt-4o-mini",
                "--budget",
                str(cap),
                "--max-rounds",
                "3",
                "--runs-dir",
                str(runs),
                "--quiet",
                *extra,
            ]
        )
        bodies = [received.body for received in server.requests]
    (run_dir,) = runs.iterdir()
    return Run(
        code,
        run_dir,
        json.loads((run_dir / "summary.json").read_text()),
        list(read_jsonl(run_dir / "costs.jsonl", LedgerLine)),
        list(read_jsonl(run_dir / "events.jsonl")),
        len(bodies),
        script.reported,
        bodies,
    )


def check_money(run: Run) -> None:
    """Spend against the cap, and the ledger against what the server reported."""
    lines, summary = run.lines, run.summary
    total = sum((line.cost_usd for line in lines), Decimal(0))
    assert Decimal(str(summary["total_usd"])) == total == (lines[-1].total_usd if lines else 0)
    overruns = [i for i, line in enumerate(lines) if line.outcome == "overrun"]
    if overruns:  # the provider's own bill may pass the cap; nothing is spent after it
        first = overruns[0]
        assert total - lines[first].cost_usd <= CAP or total <= CAP
        assert all(line.outcome in ("refused", "overrun") for line in lines[first + 1 :])
        assert Decimal(str(summary["overrun"]["cost_usd"])) == lines[first].cost_usd
    else:
        assert total <= Decimal(str(summary["budget_usd"])) and summary["overrun"] is None
    # Every completed answer the server sent is in the ledger with its usage, at its price.
    billed = [line for line in lines if line.outcome in ("ok", "overrun")]
    assert [(ln.prompt_tokens, ln.completion_tokens) for ln in billed] == [
        (u.prompt_tokens, u.completion_tokens) for u in run.reported
    ]
    for line in billed:
        if not line.estimated:
            assert line.cost_usd == PRICE.cost(Usage(line.prompt_tokens, line.completion_tokens))
    # An attempt that may have been billed counts exactly its reservation; others nothing.
    reserved = {
        e["data"]["call"]: Decimal(str(e["data"]["amount"]))
        for e in run.events
        if e["kind"] == "llm_reserved"
    }
    released = [e["data"] for e in run.events if e["kind"] == "llm_released"]
    for note in released:
        if note.get("estimated"):
            assert Decimal(str(note["cost_usd"])) == reserved[note["call"]]
    estimated = [line for line in lines if line.estimated]
    assert sum((ln.cost_usd for ln in estimated), Decimal(0)) == sum(
        (reserved[n["call"]] for n in released if n.get("estimated")), Decimal(0)
    )
    assert run.requests == sum(1 for line in lines if line.outcome != "refused")
    # The run's record holds together however hostile the provider was (issue 13, item 5/6).
    verdict = verify_run(run.run_dir)
    assert verdict.intact, verdict.problems


def shape(run: Run) -> list[tuple[str, bool]]:
    return [(line.outcome, line.estimated) for line in run.lines]


# -- hostile for good: the run ends, the cap and the ledger hold ---------------------------


@pytest.mark.parametrize("name", ["inflated usage", "negative usage", "huge usage"])
def test_usage_that_cannot_be_true_ends_the_run_at_once(
    tmp_path: Path, key: None, name: str
) -> None:
    run = company_run(tmp_path, Script(MODES[name].hostile))

    assert (run.code, run.summary["end_reason"]) == (3, "budget_exhausted")
    assert [line.outcome for line in run.lines] == ["ok", "overrun"] and run.requests == 2
    overrun = run.summary["overrun"]
    assert (overrun["role"], overrun["action"], overrun["provider"]) == (
        "Bob",
        "WriteDesign",
        "openai",
    )
    assert overrun["reported"]["prompt_tokens"] == run.lines[1].prompt_tokens
    assert "cannot be true" in run.summary["detail"]
    check_money(run)
    if name == "negative usage":
        assert run.lines[1].estimated and run.lines[1].cost_usd > 0
    if name == "huge usage":  # the provider's bill, past the cap, shown as it is
        assert run.lines[1].total_usd > CAP and Decimal(str(overrun["over_cap_usd"])) > 0


@pytest.mark.parametrize(
    "name, attempts",
    [
        ("trickle", 2),
        ("huge body", 1),
        ("html body", 2),
        ("stream cut", 2),
        ("bad chunk", 2),
        ("error event", 2),
    ],
)
def test_a_broken_provider_fails_the_run_with_each_attempt_counted(
    tmp_path: Path, key: None, name: str, attempts: int
) -> None:
    mode = MODES[name]
    run = company_run(tmp_path, Script(mode.hostile), stream=mode.stream)

    assert (run.code, run.summary["end_reason"]) == (1, "error")
    assert shape(run) == [("ok", False)] + [("error", True)] * attempts
    assert "ProviderError" in run.summary["error"]
    check_money(run)
    failed = run.lines[1]
    assert failed.error and (failed.status == 500) == (name == "error event")
    log = (run.run_dir / "run.log").read_text()
    assert log.count("Total running cost:") == 1  # the answered call only
    assert log.count("LLM call failed: Bob WriteDesign") == attempts


# -- hostile once: retried, and the run goes on -------------------------------------------


@pytest.mark.parametrize("name", ["trickle", "html body", "stream cut", "bad chunk", "error event"])
def test_a_transient_failure_is_retried_and_the_run_completes(
    tmp_path: Path, key: None, name: str
) -> None:
    mode = MODES[name]
    run = company_run(tmp_path, Script(mode.hostile, times=1), stream=mode.stream)

    # Completed at the round limit, before QA ever ran: the company's verdict fails (exit 4).
    assert (run.code, run.summary["end_reason"]) == (4, "max_rounds")
    assert run.summary["verdict"]["passed"] is False
    assert shape(run) == [("ok", False), ("error", True), ("ok", False), ("ok", False)]
    check_money(run)


def test_estimated_attempts_run_the_budget_out_before_the_cap(tmp_path: Path, key: None) -> None:
    run = company_run(tmp_path, Script(MODES["trickle"].hostile), cap=Decimal("0.002"))

    assert (run.code, run.summary["end_reason"]) == (3, "budget_exhausted")
    assert shape(run) == [("ok", False), ("error", True), ("refused", False)]
    assert Decimal(str(run.summary["total_usd"])) == run.lines[-1].total_usd <= Decimal("0.002")


# -- the real process, and a recording of an openai run -----------------------------------


@pytest.mark.slow
def test_the_cli_exits_3_and_names_the_overrun(tmp_path: Path) -> None:
    script = Script(MODES["inflated usage"].hostile)
    with OpenAIServer() as server:
        server.script(script)
        done = subprocess.run(
            [
                *ARGV,
                "run",
                str(scenario(tmp_path, stream=False)),
                "--provider",
                "openai",
                "--base-url",
                server.base_url,
                "--model",
                "gpt-4o-mini",
                "--budget",
                str(CAP),
                "--runs-dir",
                str(tmp_path / "runs"),
                "--quiet",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            env={"PATH": "/usr/bin:/bin", "OPENAI_API_KEY": "sk-local-test", "COLUMNS": "200"},
        )
    assert done.returncode == 3, done.stderr
    assert "Provider overrun: Bob WriteDesign" in done.stderr and "Traceback" not in done.stderr
    assert "openai billed $" in done.stdout and "WriteDesign in round 2" in done.stdout  # the table
    (run_dir,) = (tmp_path / "runs").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["overrun"]["reason"].startswith("15000 completion tokens, above")


def test_record_with_the_openai_provider_writes_a_cassette_that_replays(
    tmp_path: Path, key: None
) -> None:
    cassette = tmp_path / "company.cassette.jsonl"
    run = company_run(
        tmp_path,
        Script(honest, first=10**9),
        extra=("--record", str(cassette)),
        llm='max_tokens_param = "max_tokens"',
    )
    assert run.code == 4 and run.requests == 3  # three rounds: no test ran, the verdict fails
    # [llm] max_tokens_param reaches the wire: the backend gets the field it accepts
    assert [b.get("max_tokens") for b in run.bodies] == [1500, 1500, 1500]
    assert not any("max_completion_tokens" in b for b in run.bodies)
    recorded = list(read_jsonl(cassette))
    assert [r["action"] for r in recorded] == ["WritePRD", "WriteDesign", "WriteTasks"]
    assert [r["completion"]["usage"]["prompt_tokens"] for r in recorded] == [
        u.prompt_tokens for u in run.reported
    ]

    replay = scenario(tmp_path, stream=False)
    replay.write_text(
        replay.read_text().replace(
            'provider = "sim"', f'provider = "replay"\ncassette = {json.dumps(str(cassette))}'
        )
    )
    assert (
        main(
            [
                "run",
                str(replay),
                "--max-rounds",
                "3",
                "--runs-dir",
                str(tmp_path / "again"),
                "--quiet",
            ]
        )
        == 4
    )  # the same three rounds: again no test ran
    (again,) = (tmp_path / "again").iterdir()
    assert {line.outcome for line in read_jsonl(again / "costs.jsonl", LedgerLine)} == {"replayed"}
