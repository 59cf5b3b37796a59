"""``sopbus eval``, ``evals`` and ``eval-show`` as a user runs them (a subprocess), and
the bad input they meet: exit 2 naming the file and line, the flag, the close name."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from support.cli import sopbus
from support.report_page import marks, section

pytestmark = pytest.mark.slow  # every test here starts sopbus as a subprocess

DATA = Path(__file__).parent / "data"


@pytest.fixture
def work(tmp_path: Path) -> Path:
    for name in ("arith.toml", "arith_fixtures.toml", "arith.jsonl"):
        shutil.copy(DATA / name, tmp_path / name)
    return tmp_path


def test_eval_then_evals_then_eval_show(work: Path) -> None:
    ran = sopbus(
        "eval", "arith.toml", "arith.toml", "--dataset", "arith.jsonl", "--epochs", "2",
        "--concurrency", "2", "--budget", "0.50", cwd=work, columns=80,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert "worst case $0.60" in ran.stderr and "held to the eval's cap $0.50" in ran.stderr
    assert "pass@1 66.7%" in ran.stdout and "pass@2 66.7%" in ran.stdout
    assert "covers 3 of 3 tasks" in ran.stdout and "arith-2" in ran.stdout
    assert "SIMULATED" in ran.stdout and "failures: wrong 2" in ran.stdout
    assert all(len(line) <= 80 for line in ran.stdout.splitlines())
    listed = sopbus("evals", "--json", cwd=work)
    [row] = json.loads(listed.stdout)
    assert (row["ended"], row["runs"], row["simulated"]) == (12, 12, True)
    table = sopbus("evals", cwd=work, columns=80)
    assert row["eval_id"] in table.stdout
    assert all(len(line) <= 80 for line in table.stdout.splitlines())
    shown = sopbus("eval-show", "last", "--json", cwd=work)
    figures = json.loads(shown.stdout)
    assert figures["simulated"] is True
    assert [s["scenario"] for s in figures["scenarios"]] == ["arith", "arith-2"]
    report = sopbus("eval-show", "last", "--report", cwd=work)
    assert report.returncode == 0, report.stderr
    page = ((work / row["eval_dir"]) / "report.html").read_text()
    assert "SIMULATED" in page and "<svg" in page
    passk = section(page, "passk")  # two epochs: pass@1 and pass@2, as eval.json has them
    assert "pass@k" in passk and marks(passk, "passk", "path") == 2  # a line per scenario
    for k in (1, 2):
        shown_k = re.findall(rf'<td data-k="{k}" data-value="([^"]*)">', passk)
        assert [float(v) for v in shown_k] == [s[f"pass_at_{k}"] for s in figures["scenarios"]]
    run_id = json.loads((work / row["eval_dir"] / "results.jsonl").read_text().splitlines()[0])[
        "run_id"
    ]
    show = sopbus("show", (work / row["eval_dir"]) / "runs" / run_id, cwd=work)
    assert show.returncode == 0 and "Solver" in show.stdout
    verify = sopbus("verify", (work / row["eval_dir"]) / "runs" / run_id, cwd=work)
    assert verify.returncode == 0, verify.stdout + verify.stderr


def test_replay_gives_the_same_scores_at_no_cost(work: Path) -> None:
    assert sopbus("eval", "arith.toml", "--dataset", "arith.jsonl", cwd=work).returncode == 0
    again = sopbus("eval", "--replay", "last", cwd=work)
    assert again.returncode == 0, again.stderr
    assert "pass@1 66.7%" in again.stdout and "$0.00 in all" in again.stdout


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("{not json", "not JSON"),
        ('{"id": "x", "expected": "4"}', "lacks `input`"),
        ('{"id": "x", "input": "q"}', "lacks `expected` or `check`"),
        ('{"id": "x", "input": "q", "expect": "4"}', "did you mean `expected`"),
    ],
)
def test_a_bad_jsonl_line_is_exit_2_naming_the_file_and_line(
    work: Path, line: str, says: str
) -> None:
    (work / "bad.jsonl").write_text('{"id": "ok", "input": "q", "expected": "4"}\n' + line + "\n")
    ran = sopbus("eval", "arith.toml", "--dataset", "bad.jsonl", cwd=work)
    assert ran.returncode == 2
    assert "bad.jsonl:2:" in ran.stderr and says in ran.stderr
    assert not (work / "evals").exists()


@pytest.mark.parametrize("flag", ["--limit", "--epochs", "--concurrency"])
def test_a_count_below_one_is_exit_2_naming_the_flag(work: Path, flag: str) -> None:
    ran = sopbus("eval", "arith.toml", "--dataset", "arith.jsonl", flag, "0", cwd=work)
    assert ran.returncode == 2 and f"{flag} 0" in ran.stderr


def test_an_unknown_dataset_gets_close_names(work: Path) -> None:
    ran = sopbus("eval", "arith.toml", "--dataset", "human-eval", cwd=work)
    assert ran.returncode == 2 and "did you mean `humaneval`" in ran.stderr


def test_a_cap_that_runs_out_is_exit_3_and_says_what_it_covers(work: Path) -> None:
    lines = [
        json.dumps({"id": f"q{i}", "input": "What is 2+2?", "expected": "4"}) for i in range(8)
    ]
    (work / "many.jsonl").write_text("\n".join(lines) + "\n")
    ran = sopbus(
        "eval", "arith.toml", "--dataset", "many.jsonl", "--budget", "0.00018",
        "--concurrency", "1", cwd=work,
    )  # fmt: skip
    assert ran.returncode == 3, ran.stderr
    assert "of 8 tasks" in ran.stdout and "covers 8 of 8" not in ran.stdout
    assert "not run" in ran.stdout or "refused" in ran.stdout


def test_an_interrupted_eval_resumes_paying_no_finished_task_again(work: Path) -> None:
    import signal

    from sopbus.bus.store import ledger_of
    from support.cli import start
    from support.killed_runs import wait_for

    slow = (
        (work / "arith.toml")
        .read_text()
        .replace("max_tokens = 200", "max_tokens = 200\nlatency_ms = 400")
    )
    (work / "arith.toml").write_text(slow)
    lines = [
        json.dumps({"id": f"q{i}", "input": "What is 2+2?", "expected": "4"}) for i in range(6)
    ]
    (work / "many.jsonl").write_text("\n".join(lines) + "\n")
    proc = start(
        "eval", "arith.toml", "--dataset", "many.jsonl", "--concurrency", "1",
        cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip

    def first_result() -> Path | None:
        found = list((work / "evals").glob("*/results.jsonl"))
        return found[0] if found and found[0].read_text().strip() else None

    results = wait_for(first_result, proc)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=120) == 130
    edir = results.parent
    assert json.loads((edir / "eval.json").read_text())["state"] == "interrupted"
    done = [json.loads(x) for x in results.read_text().splitlines()]
    assert 1 <= len(done) < 6
    calls = {d["run_id"]: len(ledger_of(edir / "runs" / d["run_id"])) for d in done}
    resumed = sopbus("eval", "--resume", edir.name, cwd=work)
    assert resumed.returncode == 0, resumed.stderr
    assert "covers 6 of 6 tasks" in resumed.stdout
    for run_id, count in calls.items():
        assert len(ledger_of(edir / "runs" / run_id)) == count
    finished = [json.loads(x)["task_id"] for x in results.read_text().splitlines()]
    assert sorted(finished) == sorted(f"q{i}" for i in range(6))


def test_a_python_check_whose_module_is_missing_is_exit_2(work: Path) -> None:
    (work / "py.jsonl").write_text('{"id": "a", "input": "q", "check": "python:nochecks:ok"}\n')
    ran = sopbus("eval", "arith.toml", "--dataset", "py.jsonl", cwd=work)
    assert ran.returncode == 2 and "nochecks.py" in ran.stderr
