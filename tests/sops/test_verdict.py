"""A run's verdict: each built-in SOP states one, summary.json carries it, and a run that
completed with a failed verdict exits 4. The CLI tests run ``sopbus`` as a subprocess on
copies of the shipped scenarios made to miss their purpose."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from sopbus.bus import Environment, Message, Runner, RunRecord, RunStore, Verdict
from sopbus.sops import builtin_sops
from sopbus.sops.builtin.camel_roleplay import task_done
from sopbus.sops.builtin.code_and_run import checker_passed
from sopbus.sops.builtin.group_chat import said_done
from sopbus.sops.builtin.software_company import qa_passed
from support.cli import sopbus
from support.paths import ROOT

SCENARIOS = ROOT / "scenarios"


def copy_scenario(name: str, where: Path, *replacements: tuple[str, str]) -> Path:
    """``scenarios/<name>.toml`` copied into ``where`` with its fixture paths made absolute
    and each ``(old, new)`` replaced (each must be found)."""
    text = (SCENARIOS / f"{name}.toml").read_text(encoding="utf-8")
    text = text.replace('"fixtures/', f'"{SCENARIOS}/fixtures/').replace(
        '"data/', f'"{SCENARIOS}/data/'
    )
    text = text.replace(
        "[scenario]\n", "[scenario]\nallow_outside = true  # the shipped fixtures\n", 1
    )
    for old, new in replacements:
        assert old in text, old
        text = text.replace(old, new)
    path = where / f"{name}.toml"
    path.write_text(text, encoding="utf-8")
    return path


def _has_git_server() -> bool:
    beside = Path(sys.executable).parent / "mcp-server-git"
    return beside.exists() or shutil.which("mcp-server-git") is not None


def summary_of(runs: Path) -> dict[str, Any]:
    (run,) = runs.iterdir()
    result: dict[str, Any] = json.loads((run / "summary.json").read_text())
    return result


def said(cause_by: str, content: str = "", payload: Any = None, sender: str = "A") -> Message:
    return Message(cause_by=cause_by, sent_from=sender, content=content, payload=payload)


# -- the SOPs' verdicts, on what a run produced ----------------------------------------------


def test_software_company_passes_only_when_qas_last_test_run_passed() -> None:
    def ran(passed: bool, n: int) -> Message:
        return said("RunCode", payload={"passed": passed, "test_round": n, "totals": "x"})

    assert qa_passed(RunRecord(end_reason="idle", messages=(ran(False, 1), ran(True, 2)))).passed
    failed = qa_passed(RunRecord(end_reason="idle", messages=(ran(True, 1), ran(False, 2))))
    assert not failed.passed and "failed in test round 2" in failed.reason
    never = qa_passed(RunRecord(end_reason="budget_exhausted", detail="refused"))
    assert (
        not never.passed
        and "never ran the tests" in never.reason
        and "budget_exhausted" in never.reason
    )


def test_code_and_run_passes_when_a_script_passed_the_check() -> None:
    def ran(ok: bool, n: int) -> Message:
        return said(
            "RunScript", payload={"accepted": ok, "attempt": n, "exit_code": 0 if ok else 1}
        )

    assert checker_passed(
        RunRecord(end_reason="stop_condition", messages=(ran(False, 1), ran(True, 2)))
    ) == Verdict(passed=True, reason="the script passed the acceptance check on attempt 2")
    assert not checker_passed(RunRecord(end_reason="error", messages=(ran(False, 1),))).passed


def test_chats_pass_only_when_their_done_token_was_said() -> None:
    solved = said("GiveSolution", "Solution: x\nNext request.")
    done = said("GiveInstruction", "<CAMEL_TASK_DONE>")
    assert task_done(RunRecord(end_reason="stop_condition", messages=(solved, done))).passed
    limit = task_done(
        RunRecord(
            end_reason="stop_condition",
            detail="turn limit reached: 1 exchanges",
            messages=(said("GiveSolution", "Solution: x"),),
        )
    )
    assert not limit.passed and "turn limit reached" in limit.reason
    judge = said_done("TERMINATE")
    assert judge(
        RunRecord(
            end_reason="stop_condition", messages=(said("Speak", "ok TERMINATE", sender="W"),)
        )
    ) == Verdict(passed=True, reason="W said 'TERMINATE' after 1 chat message(s)")
    assert not judge(
        RunRecord(
            end_reason="stop_condition",
            detail="12 messages reached the limit of 12",
            messages=(said("Speak", "more?"),),
        )
    ).passed


class _Talker:
    """A member that says one thing when it hears the seed."""

    name, aliases, watch = "Talker", (), frozenset({"Go"})

    async def step(self, news: Any, turn: Any) -> list[Message]:
        return [Message(cause_by="Said", sent_from=self.name, content="hello")]


async def test_the_runner_writes_the_verdict_into_the_summary(tmp_path: Path) -> None:
    def judge(record: RunRecord) -> Verdict:
        assert record.artifacts_dir is not None and record.artifacts_dir.is_dir()
        return Verdict(passed=False, reason=f"{len(record.of('Said'))} said, {record.end_reason}")

    store = RunStore.create(tmp_path, "t")
    env = Environment(store.run_id, log=store.log)
    env.add(_Talker())
    result = await Runner(
        env, seed=[Message(cause_by="Go", sent_from="Boss")], store=store, judge=judge
    ).run()
    store.close()
    assert result.verdict == Verdict(passed=False, reason="1 said, idle")
    summary = json.loads((store.run_dir / "summary.json").read_text())
    assert summary["verdict"] == {"passed": False, "reason": "1 said, idle"}


async def test_no_judge_is_a_null_verdict_and_a_broken_judge_a_failed_one(tmp_path: Path) -> None:
    def broken(record: RunRecord) -> Verdict:
        raise KeyError("payload")

    for judge, expected in (
        (None, None),
        (
            broken,
            {"passed": False, "reason": ("the verdict could not be reached: KeyError: 'payload'")},
        ),
    ):
        store = RunStore.create(tmp_path, "t")
        env = Environment(store.run_id, log=store.log)
        env.add(_Talker())
        await Runner(
            env, seed=[Message(cause_by="Go", sent_from="Boss")], store=store, judge=judge
        ).run()
        store.close()
        assert json.loads((store.run_dir / "summary.json").read_text())["verdict"] == expected


# -- the CLI: exit 4, and the verdict in the table, runs and show ----------------------------

slow = pytest.mark.slow  # these start sopbus as a subprocess


@slow
def test_qa_failing_its_tests_exits_4_and_every_view_says_failed(tmp_path: Path) -> None:
    failing = tmp_path / "failing_tests.toml"
    failing.write_text(
        '# SIMULATED OUTPUT\nsimulated = true\n[[fixture]]\naction = "WriteTest"\n'
        'responses = [{ code = "def test_fails():\\n    assert 1 == 2\\n" }]\n'
    )
    scenario = copy_scenario(
        "software_company",
        tmp_path,
        ("max_test_rounds = 3", "max_test_rounds = 0"),
        ('fixtures = ["', f'fixtures = ["{failing}", "'),
    )
    done = sopbus("run", scenario, "--runs-dir", "runs", "--quiet", cwd=tmp_path)
    assert done.returncode == 4, done.stdout + done.stderr
    summary = summary_of(tmp_path / "runs")
    assert (summary["status"], summary["end_reason"]) == ("completed", "idle")
    assert summary["verdict"]["passed"] is False
    assert "QA's tests failed in test round 1 (2 failed)" in summary["verdict"]["reason"]
    assert "FAILED: QA's tests failed" in done.stdout  # the summary table
    (row,) = json.loads(sopbus("runs", "--json", cwd=tmp_path).stdout)
    assert row["verdict"] == summary["verdict"] and row["simulated"] is True
    assert "FAILED" in sopbus("runs", cwd=tmp_path).stdout
    assert "verdict FAILED: QA's tests failed" in " ".join(
        sopbus("show", "last", cwd=tmp_path).stdout.split()
    )


@slow
def test_camel_stopped_by_its_turn_limit_exits_4(tmp_path: Path) -> None:
    scenario = copy_scenario("camel_roleplay", tmp_path, ("turn_limit = 30 ", "turn_limit = 1 "))
    done = sopbus("run", scenario, "--runs-dir", "runs", "--quiet", cwd=tmp_path)
    assert done.returncode == 4, done.stdout + done.stderr
    verdict = summary_of(tmp_path / "runs")["verdict"]
    assert verdict["passed"] is False and "without '<CAMEL_TASK_DONE>'" in verdict["reason"]
    assert "turn limit reached" in verdict["reason"]


@slow
@pytest.mark.parametrize("name", builtin_sops())  # the registry: a new SOP is tested too
def test_every_shipped_sop_states_a_verdict_its_scenario_passes(tmp_path: Path, name: str) -> None:
    if name == "repo_analyst" and not _has_git_server():
        pytest.skip("repo_analyst's tools need mcp-server-git: pip install -e '.[test]'")
    done = sopbus("run", SCENARIOS / f"{name}.toml", "--runs-dir", "runs", "--quiet", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    verdict = summary_of(tmp_path / "runs")["verdict"]
    assert verdict["passed"] is True and verdict["reason"]


@slow
def test_a_team_without_an_sop_has_a_null_verdict_and_exits_0(tmp_path: Path) -> None:
    done = sopbus(
        "run", SCENARIOS / "flower_shop.toml", "--runs-dir", "runs", "--quiet", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    summary = summary_of(tmp_path / "runs")
    assert "verdict" in summary and summary["verdict"] is None


@slow
def test_a_python_sop_declares_its_own_verdict(tmp_path: Path) -> None:
    (tmp_path / "strict_chat.py").write_text(
        "from sopbus import SOP as Sop, Verdict\nfrom sopbus.sops.group_chat import SOP as CHAT\n\n"
        "def ten_messages(record):\n"
        "    spoken = len(record.of('Speak'))\n"
        "    return Verdict(passed=spoken >= 10, reason=f'{spoken} of 10 messages')\n\n"
        "SOP = Sop(name='strict', description='a chat of ten', build=CHAT.build, verdict=ten_messages)\n"
    )
    scenario = copy_scenario(
        "group_chat", tmp_path, ('sop = "group_chat"', 'sop = "strict_chat:SOP"')
    )
    done = sopbus("run", scenario, "--runs-dir", "runs", "--quiet", cwd=tmp_path)
    assert done.returncode == 4, done.stdout + done.stderr
    assert summary_of(tmp_path / "runs")["verdict"] == {
        "passed": False,
        "reason": "4 of 10 messages",
    }
