"""Running a shipped scenario, varied for a test, and reading what the run wrote.

Shared by the tests of the conversation SOPs (CAMEL, group chat, code-and-run): each test
takes a shipped scenario, changes ``[sop]`` options or the fixtures, and runs it through
the same assembly as ``sopbus run`` (:func:`sopbus._assemble._execute.execute`).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import msgspec

from sopbus._assemble import Outcome, execute
from sopbus.bus import Scenario, load_scenario, read_events, read_jsonl, scenario_with_overrides
from support.cli import ARGV
from support.paths import ROOT

SCENARIOS = ROOT / "scenarios"
MARK = "# SIMULATED OUTPUT: canned answers for a test; no model wrote them.\nsimulated = true\n"


def scenario(
    name: str,
    tmp: Path,
    *,
    sop: dict[str, Any] | None = None,
    fixtures: str | None = None,
    max_rounds: int | None = None,
) -> Scenario:
    """The shipped ``scenarios/<name>.toml`` with runs under ``tmp``, ``sop`` laid over its
    ``[sop]`` table and, if given, ``fixtures`` (TOML ``[[fixture]]`` entries) instead of its own."""
    sc = scenario_with_overrides(
        load_scenario(SCENARIOS / f"{name}.toml"), runs_dir=tmp / "runs", max_rounds=max_rounds
    )
    changes: dict[str, Any] = {}
    if sop:
        changes["sop_options"] = {**sc.sop_options, **sop}
    if fixtures is not None:
        path = tmp / f"{name}-fixtures.toml"
        path.write_text(MARK + fixtures, encoding="utf-8")
        changes["llm"] = msgspec.structs.replace(sc.llm, fixtures=(str(path),))
        # the test's fixtures live outside scenarios/, as the file now says it allows
        changes["info"] = msgspec.structs.replace(sc.info, allow_outside=True)
    return msgspec.structs.replace(sc, **changes)


async def run(sc: Scenario) -> Outcome:
    return await execute(sc)


def events(outcome: Outcome, kind: str | None = None) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = list(read_events(outcome.run_dir / "events.jsonl"))
    return [e for e in found if kind is None or e["kind"] == kind]


def messages(outcome: Outcome, cause_by: str | None = None) -> list[dict[str, Any]]:
    """The published messages (delivered or not), in order."""
    out = [e["message"] for e in events(outcome) if e["kind"].startswith("message_")]
    return [m for m in out if cause_by is None or m["cause_by"] == cause_by]


def ledger(outcome: Outcome) -> list[dict[str, Any]]:
    return list(read_jsonl(outcome.run_dir / "costs.jsonl"))


def cli_run(name: str, runs_dir: Path) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """``sopbus run scenarios/<name>.toml`` as a user runs it; the process and the summary."""
    done = subprocess.run(
        [*ARGV, "run", str(SCENARIOS / f"{name}.toml"), "--runs-dir", str(runs_dir), "--quiet"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    summaries = sorted(runs_dir.glob("*/summary.json"))
    assert len(summaries) == 1, (done.stdout, done.stderr)
    return done, msgspec.json.decode(summaries[0].read_bytes())
