"""``sopbus mcp`` against a caller that tries to read files through it (issue 40, item 2): the
real server in a subprocess, driven by the SDK's client as a prompt-injected IDE agent
would drive it. ``validate_scenario`` once answered ``{"scenario": "/etc/shadow"}`` with a
TOML syntax error that quoted the file's first line. Every attack here asserts on the
outcome: the secret's text is in no answer, and a refused run made no run directory.
Malformed JSON-RPC is sent as raw lines (no client library sends it) and must be answered."""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from support.cli import ARGV, environ, sopbus
from support.mcp_session import served, text

pytestmark = pytest.mark.slow

MARK = "sk-MARK-41c0de"  # stands for a secret: it must be in no answer of the server


def layout(tmp_path: Path) -> Path:
    """Secrets outside the server's roots, odd files inside its --scenario-dir; the
    server's working directory is returned."""
    home, work = tmp_path / "home", tmp_path / "work"
    (work / "project").mkdir(parents=True)
    home.mkdir()
    (home / ".env").write_text(f"OPENAI_API_KEY={MARK}\n", encoding="utf-8")
    (home / "shadow").write_text(f"root:$6${MARK}:19000:0:99999:7:::\n", encoding="utf-8")
    (home / "secrets.toml").write_text(f'token = "{MARK}"\n', encoding="utf-8")
    (home / "team.toml").write_text(f'[scenario]\nname = "{MARK}"\n', encoding="utf-8")
    project = work / "project"
    (project / "link.toml").symlink_to(home / "shadow")
    (project / "keys.toml").write_text(f'api_key = "{MARK}"\n', encoding="utf-8")
    (project / "notes.toml").write_text(f"password: {MARK}\n", encoding="utf-8")
    (project / "blob.toml").write_bytes(b"\x7fELF\x02\x01\x00" + MARK.encode() + b"\xff\n")
    (project / "latin.toml").write_bytes(f'[scenario]\nname = "caf\xe9{MARK}"\n'.encode("latin-1"))
    (project / "secret.env").write_text(f"KEY={MARK}\n", encoding="utf-8")
    return work


def outside_paths(work: Path) -> list[str]:
    home = work.parent / "home"
    return [
        str(home / "shadow"),
        str(home / ".env"),
        str(home / "secrets.toml"),
        str(home / "team.toml"),  # a scenario, but not in a root
        "../home/secrets.toml",
        "project/../../home/team.toml",
        "project/link.toml",  # a link in the root, to a file outside it
        "project/secret.env",  # in the root, but not a .toml file
        "/etc/passwd",
    ]


def leaked(answer: object) -> bool:
    return MARK in json.dumps(answer, default=str) or "root:x:0:0" in json.dumps(answer)


async def test_no_path_outside_the_roots_is_read_or_run(tmp_path: Path) -> None:
    work = layout(tmp_path)
    async with served(work, "--scenario-dir", "project") as server:
        for ref in outside_paths(work):
            for tool, args in (
                ("validate_scenario", {}),
                ("run_scenario", {"budget": 0.01}),
            ):
                said = await server.call(tool, scenario=ref, **args)
                assert said.is_error, (ref, said.structured_content)
                assert not leaked(said.model_dump()), (tool, ref, said.model_dump())
                assert "--scenario-dir" in text(said) or "no such scenario" in text(said)
        shipped = await server.data("validate_scenario", scenario="flower_shop")
    assert shipped["valid"] is True
    assert not (work / "runs").exists()


async def test_a_file_in_a_root_that_is_no_scenario_is_said_so_without_its_content(
    tmp_path: Path,
) -> None:
    work = layout(tmp_path)
    async with served(work, "--scenario-dir", "project") as server:
        answers = {}
        for name in ("keys.toml", "notes.toml", "blob.toml", "latin.toml"):
            answers[name] = await server.data("validate_scenario", scenario=f"project/{name}")
            ran = await server.call("run_scenario", scenario=f"project/{name}", budget=0.01)
            assert ran.is_error and not leaked(ran.model_dump()), ran.model_dump()
    for name, answer in answers.items():
        assert answer["valid"] is False and not leaked(answer), (name, answer)
        assert "is not shown" in answer["errors"][0], answer
    assert "no [scenario] table" in answers["keys.toml"]["errors"][0]
    assert "TOML syntax error at line 1" in answers["notes.toml"]["errors"][0]
    assert "binary data" in answers["blob.toml"]["errors"][0]
    assert "not UTF-8" in answers["latin.toml"]["errors"][0]
    assert not (work / "runs").exists()


async def test_runs_are_read_only_from_the_runs_directory(tmp_path: Path) -> None:
    work = layout(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    made = sopbus(
        "run", "flower_shop", "--idea", f"a bouquet for {MARK}", "--max-rounds", "1",
        "--runs-dir", elsewhere, "--quiet", cwd=tmp_path,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    (outside,) = list(elsewhere.iterdir())
    (work / "runs").mkdir()
    (work / "runs" / "linked").symlink_to(outside)
    refs = [str(outside), f"../elsewhere/{outside.name}", "runs/../../elsewhere", "linked", ".."]
    async with served(work) as server:
        for ref in refs:
            for tool in ("run_summary", "run_costs", "run_messages"):
                said = await server.call(tool, run=ref)
                assert said.is_error, (tool, ref, said.structured_content)
                assert not leaked(said.model_dump()), (tool, ref, said.model_dump())
        ran = await server.data("run_scenario", scenario="flower_shop", budget=0.01, max_rounds=1)
        own = await server.data("run_summary", run=ran["run_id"])
        again = await server.data(
            "validate_scenario", scenario=f"runs/{ran['run_id']}/scenario.toml"
        )
    assert own["run_id"] == ran["run_id"]
    # A run's own scenario.toml is read (not refused): the copy names the original's files.
    assert again["scenario"] == f"runs/{ran['run_id']}/scenario.toml"
    assert again["valid"] is True or "$.llm.fixtures" in again["errors"][0], again


async def test_odd_arguments_are_error_results_and_run_nothing(tmp_path: Path) -> None:
    work = layout(tmp_path)
    async with served(work, "--max-budget", "0.5") as server:
        typed = await server.error("run_scenario", scenario="flower_shop", budget=True)
        huge = await server.error("run_scenario", scenario="flower_shop", budget=1e308)
        rounds = await server.error(
            "run_scenario", scenario="flower_shop", budget=0.01, max_rounds=True
        )
        long = await server.error("validate_scenario", scenario="a" * 100_000)
        long_run = await server.error("run_scenario", scenario="b/" * 50_000, budget=0.01)
        nul = await server.error("validate_scenario", scenario="flower\0shop")
        run_nul = await server.error("run_summary", run="x" * 100_000)
        after = await server.data("list_examples")  # the session still serves
    assert "budget" in typed and "valid number" in typed
    assert "1e+308" in huge and "$0.50" in huge and "nothing was run" in huge
    assert "max_rounds" in rounds
    assert "100000 characters" in long and "at most 4096" in long
    assert "100000 characters" in long_run and "100000 characters" in run_nul
    assert "NUL" in nul
    assert after["examples"]
    assert "Traceback" not in server.stderr.read_text(encoding="utf-8")
    assert not (work / "runs").exists()


MALFORMED = {
    "no method": (1, '{"jsonrpc": "2.0", "id": 1}', -32600),
    "params a string": (2, '{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": "x"}', -32600),
    "not JSON": (None, "this is not JSON", -32700),
    "a batch": (None, "[1, 2]", -32600),
    "an old version": (3, '{"jsonrpc": "1.0", "id": 3, "method": "tools/list"}', -32600),
}  # fmt: skip


def test_malformed_json_rpc_gets_a_json_rpc_error(tmp_path: Path) -> None:
    hello = {"protocolVersion": "2025-06-18", "capabilities": {}}
    hello["clientInfo"] = {"name": "test", "version": "1"}
    lines = [
        json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello}),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        *(line for _, line, _ in MALFORMED.values()),
        json.dumps({"jsonrpc": "2.0", "id": 99, "method": "tools/list"}),
    ]
    answers = _exchange(tmp_path, lines, last_id=99)
    errors = [a for a in answers if "error" in a]
    assert len(errors) == len(MALFORMED), answers
    for (what, (request_id, _, code)), error in zip(MALFORMED.items(), errors, strict=True):
        assert error["id"] == request_id and error["error"]["code"] == code, (what, error)
    assert "method" in errors[0]["error"]["message"] and "params" in errors[1]["error"]["message"]
    assert answers[-1]["id"] == 99 and answers[-1]["result"]["tools"]  # still serving


def _exchange(cwd: Path, lines: list[str], last_id: int) -> list[dict[str, Any]]:
    """Writes ``lines`` to ``sopbus mcp``'s stdin; its answers up to the one of ``last_id``
    (the server is killed after 120 s, so a server that never answers fails the test)."""
    with subprocess.Popen(
        [*ARGV, "mcp", "--runs-dir", "runs"], cwd=cwd, env=environ(), text=True,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    ) as proc:  # fmt: skip
        watchdog = threading.Timer(120, proc.kill)
        watchdog.start()
        try:
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write("".join(f"{line}\n" for line in lines))
            proc.stdin.flush()
            answers: list[dict[str, Any]] = []
            for line in proc.stdout:
                answers.append(json.loads(line))
                if answers[-1].get("id") == last_id:
                    break
            return answers
        finally:
            watchdog.cancel()
            proc.kill()
