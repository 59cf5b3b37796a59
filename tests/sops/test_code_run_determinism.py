"""Code-and-run with a real (HTTP) model is deterministic: the sandbox's scratch path never
reaches a prompt (a traceback shows ``/sandbox/script.py``), so two runs send the same
prompts, resuming a finished run pays no call again and a replay finds every answer. Also:
``auto`` without bubblewrap warns when a real model's code runs, and only then."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from sopbus.cli._cmd_diff import messages
from support.cli import sopbus
from support.openai_server import Answer, OpenAIServer
from support.sandbox import code_run_scenario, needs_bwrap, run_dirs

pytestmark = pytest.mark.slow
KEY = {"OPENAI_API_KEY": "sk-test-not-a-secret"}
BROKEN = "import sys\nprint(undefined_name)\n"  # a NameError whose traceback names the file
FIXED = "print('fixed')\n"


@pytest.fixture
def model() -> Iterator[OpenAIServer]:
    """A model that first writes a failing script, then a fixed one."""
    with OpenAIServer() as server:
        server.script(*[Answer(json.dumps({"plan": "p", "code": c})) for c in (BROKEN, FIXED)])
        yield server


def prompts(server: OpenAIServer) -> list[list[dict[str, str]]]:
    return [r.body["messages"] for r in server.requests]


def scenario(tmp: Path, server: OpenAIServer, backend: str) -> Path:
    return code_run_scenario(
        tmp, [BROKEN, FIXED], backend=backend, provider="openai", base_url=server.base_url
    )


@pytest.mark.parametrize("backend", [pytest.param("bwrap", marks=needs_bwrap), "local"])
def test_two_runs_resume_and_replay_agree(
    tmp_path: Path, model: OpenAIServer, backend: str
) -> None:
    first = sopbus("run", scenario(tmp_path / "a", model, backend), "--quiet", env=KEY)
    assert first.returncode == 0, first.stderr
    asked = prompts(model)
    assert len(asked) == 2
    fix_prompt = json.dumps(asked[1])
    assert "/sandbox/script.py" in fix_prompt and "NameError" in fix_prompt
    assert str(tmp_path) not in fix_prompt and "sopbus-sandbox" not in fix_prompt

    model.script(*[Answer(json.dumps({"plan": "p", "code": c})) for c in (BROKEN, FIXED)])
    second = sopbus("run", scenario(tmp_path / "b", model, backend), "--quiet", env=KEY)
    assert second.returncode == 0, second.stderr
    assert prompts(model)[2:] == asked  # the same prompts, byte for byte
    (run_a,), (run_b,) = run_dirs(tmp_path / "a"), run_dirs(tmp_path / "b")
    assert messages(run_a) == messages(run_b)

    resumed = sopbus("resume", run_a, "--quiet", env=KEY)
    assert resumed.returncode == 0, resumed.stderr
    replayed = sopbus("replay", run_a, "--into", tmp_path / "replay", "--quiet", env=KEY)
    assert replayed.returncode == 0, replayed.stderr
    assert len(model.requests) == 4  # neither the resume nor the replay called the model
    (replay,) = [p for p in (tmp_path / "replay").iterdir() if p.is_dir()]
    assert messages(replay) == messages(run_a)


def test_auto_without_bubblewrap_warns_when_a_real_models_code_runs(
    tmp_path: Path, model: OpenAIServer
) -> None:
    no_bwrap = {**KEY, "PATH": str(tmp_path / "empty-path")}
    real = sopbus("run", scenario(tmp_path / "real", model, "auto"), "--quiet", env=no_bwrap)
    assert real.returncode == 0, real.stderr
    warning = "model-written code runs without isolation; install bubblewrap"
    assert real.stderr.count(warning) == 1  # once per run, not per script
    (run_dir,) = run_dirs(tmp_path / "real")
    assert warning in (run_dir / "run.log").read_text()
    simulated = sopbus("run", code_run_scenario(tmp_path / "sim", [FIXED]), "--quiet", env=no_bwrap)
    assert simulated.returncode == 0, simulated.stderr
    assert warning not in simulated.stderr  # the simulator's scripts are the user's own


@needs_bwrap
def test_auto_with_bubblewrap_does_not_warn(tmp_path: Path, model: OpenAIServer) -> None:
    done = sopbus("run", scenario(tmp_path, model, "auto"), "--quiet", env=KEY)
    assert done.returncode == 0, done.stderr
    assert "without isolation" not in done.stderr
    (run_dir,) = run_dirs(tmp_path)
    events = (run_dir / "events.jsonl").read_text()
    assert '"network_isolated":true' in events.replace(" ", "")
    assert os.path.isdir(run_dir) and not (run_dir / ".sandbox").exists()
