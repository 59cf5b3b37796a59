"""Scorers on real HumanEval data: the canonical solutions pass in the sandbox, broken
ones fail, every form a model writes code in is extracted, a hanging or forking check is a
timeout, and an answer that attacks the machine is held by the sandbox."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sopbus.eval import Task, extract_completion, load_dataset
from sopbus.eval._scorers import ScoreContext, score
from support.humaneval import problems

PROBLEMS = problems()
TASKS = {t.id: t for t in load_dataset("humaneval").tasks}
CTX = ScoreContext(timeout_s=3.0, base=Path("."))


def test_the_dataset_is_the_packages_164_problems() -> None:
    assert len(TASKS) == 164
    assert list(TASKS)[:2] == ["HumanEval/0", "HumanEval/1"]
    assert len(load_dataset("humaneval", limit=20).tasks) == 20


@pytest.mark.parametrize("task_id", [f"HumanEval/{i}" for i in range(0, 164, 8)])
async def test_a_canonical_solution_passes_and_a_broken_one_fails(task_id: str) -> None:
    task, problem = TASKS[task_id], PROBLEMS[task_id]
    good = await score(task, problem["canonical_solution"], "humaneval", CTX)
    assert (good.passed, good.kind) == (True, "passed"), good.detail
    broken = await score(task, "    return None\n", "humaneval", CTX)
    assert (broken.passed, broken.kind) == (False, "wrong")
    assert broken.detail.startswith("failed")


def _forms(task_id: str) -> dict[str, str]:
    """One solution written the ways models write it."""
    p = PROBLEMS[task_id]
    whole = p["prompt"] + p["canonical_solution"]
    import textwrap

    body = textwrap.dedent(p["canonical_solution"])
    return {
        "body": p["canonical_solution"],
        "dedented body": body,
        "fenced body": f"Here you go:\n```python\n{body}```\n",
        "prompt and body, bare": whole,
        "prompt and body, fenced": f"```python\n{whole}\n```\nThis sorts the list.",
        "function without the prompt, fenced": (
            "Sure!\n```py\n" + _without_docstring(whole, p["entry_point"]) + "```"
        ),
        "prose then bare code": "The function is:\n\n" + whole,
    }


def _without_docstring(whole: str, entry: str) -> str:
    import ast

    tree = ast.parse(whole)
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == entry)
    fn.body = [
        s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
    ]
    return ast.unparse(fn) + "\n"


@pytest.mark.parametrize("task_id", ["HumanEval/0", "HumanEval/2", "HumanEval/12"])
async def test_every_form_of_a_solution_is_extracted_and_passes(task_id: str) -> None:
    for form, answer in _forms(task_id).items():
        verdict = await score(TASKS[task_id], answer, "humaneval", CTX)
        assert verdict.passed, f"{form}: {verdict.detail}\n{answer}"


def test_a_whole_function_replaces_the_prompts_stub() -> None:
    p = PROBLEMS["HumanEval/2"]
    answer = "```python\ndef truncate_number(number: float) -> float:\n    return number % 1.0\n```"
    completion = extract_completion(answer, p["prompt"], p["entry_point"])
    assert completion.startswith("\ndef truncate_number")
    assert extract_completion("return number % 1.0", p["prompt"], "truncate_number") == (
        "    return number % 1.0\n"
    )


async def test_a_hanging_answer_is_a_timeout() -> None:
    verdict = await score(TASKS["HumanEval/2"], "    while True:\n        pass\n", "humaneval", CTX)
    assert (verdict.passed, verdict.kind) == (False, "timeout")


@pytest.mark.parametrize(
    ("kind", "want", "answer", "passed"),
    [
        ("exact", "4", " 4\n", True),
        ("exact", "4", "4.0", False),
        ("contains", "Paris", "It is Paris.", True),
        ("contains", "Paris", "Lyon", False),
        ("regex", r"\b42\b", "the answer is 42!", True),
        ("regex", r"^\d+$", "forty-two", False),
    ],
)
async def test_text_scorers(kind: str, want: str, answer: str, passed: bool) -> None:
    task = Task(id="t", input="q", expected=want)
    assert (await score(task, answer, kind, CTX)).passed is passed
    assert (await score(Task(id="t", input="q"), answer, f"{kind}:{want}", CTX)).passed is passed


CHECKS = """
import os, time

def even(answer, task):
    return int(answer) % 2 == 0, f"{answer} checked"

def hang(answer, task):
    while True:
        time.sleep(1)

def fork(answer, task):
    while True:
        try:
            os.fork()
        except OSError:
            time.sleep(0.1)
"""


async def test_a_python_check_function_decides(tmp_path: Path) -> None:
    (tmp_path / "checks.py").write_text(CHECKS)
    ctx = ScoreContext(timeout_s=2.0, base=tmp_path)
    task = Task(id="t", input="q", check="python:checks:even")
    yes = await score(task, "10", "python:checks:even", ctx)
    no = await score(task, "7", "python:checks:even", ctx)
    assert (yes.passed, yes.detail) == (True, "10 checked")
    assert (no.passed, no.kind) == (False, "wrong")


@pytest.mark.parametrize("function", ["hang", "fork"])
async def test_a_check_that_hangs_or_forks_is_a_timeout(tmp_path: Path, function: str) -> None:
    (tmp_path / "checks.py").write_text(CHECKS)
    ctx = ScoreContext(timeout_s=1.0, base=tmp_path)
    verdict = await score(Task(id="t", input="q"), "1", f"python:checks:{function}", ctx)
    assert (verdict.passed, verdict.kind) == (False, "timeout")


async def test_an_answer_that_attacks_the_machine_is_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It writes outside its directory and reads a secret variable: neither happens."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-eval-secret-1234")
    marker = tmp_path / "escaped.txt"
    attack = (
        "    import builtins, os\n"
        "    open = builtins.open\n"
        f"    open({str(marker)!r}, 'w').write(os.environ.get('OPENAI_API_KEY', 'none'))\n"
        "    assert os.environ.get('OPENAI_API_KEY') == 'sk-eval-secret-1234'\n"
        "    return number % 1.0\n"
    )
    verdict = await score(TASKS["HumanEval/2"], attack, "humaneval", CTX)
    assert not marker.exists()
    assert not verdict.passed  # the secret was not there to read
    assert "sk-eval-secret" not in verdict.detail
    assert os.environ["OPENAI_API_KEY"] == "sk-eval-secret-1234"
