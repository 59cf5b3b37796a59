"""Keys and endpoints from a ``.env`` file in the working directory.

End to end: the key and the endpoint are only in ``.env`` (not in the process
environment), ``sopbus run`` and ``sopbus.run_scenario`` call the tests' OpenAI-compatible
server on 127.0.0.1 with that key, and the key is in no file of the run directory and in
no output of the process.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from sopbus._assemble import run_environ
from sopbus.bus import ConfigError
from support.cli import ARGV
from support.openai_server import Answer, OpenAIServer
from support.teams import pipeline

SCENARIO = pipeline(
    ("Wes", "Write"),
    ("Pia", "Polish"),
    name="keyed",
    run={"budget_usd": 1.0},
    llm={"provider": "openai", "model": "gpt-4o-mini", "max_tokens": 100},
)


@pytest.fixture
def server(openai_server: OpenAIServer) -> OpenAIServer:
    """The shared OpenAI-compatible server, scripted for this team."""
    openai_server.script(Answer("a draft"), Answer("a polished haiku"))
    return openai_server


def without_keys() -> dict[str, str]:
    """The test process's environment without any OpenAI variable, plus the source tree."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env.pop("COLUMNS", None)
    return dict(env)


def files_holding(root: Path, secret: str) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


@pytest.mark.slow
def test_a_key_in_dotenv_is_used_and_written_nowhere(tmp_path: Path, server: OpenAIServer) -> None:
    key = f"sk-dotenv-{secrets.token_hex(16)}"
    (tmp_path / ".env").write_text(
        f"# keys for sopbus\nOPENAI_API_KEY={key}\nexport OPENAI_BASE_URL='{server.base_url}'\n"
    )
    (tmp_path / "keyed.toml").write_text(SCENARIO)

    cli = subprocess.run(
        [*ARGV, "run", "keyed.toml", "--runs-dir", "runs"],
        cwd=tmp_path,
        env=without_keys(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    api = subprocess.run(
        [
            sys.executable,
            "-c",
            textwrap.dedent("""
        from sopbus import run_scenario
        result = run_scenario("keyed.toml", runs_dir="runs")
        print(result.status, result.llm_calls, result.total_usd)
    """),
        ],
        cwd=tmp_path,
        env=without_keys(),
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert cli.returncode == 0, cli.stderr
    assert api.returncode == 0, api.stderr
    assert api.stdout.split()[:2] == ["completed", "2"]
    # Both runs reached the server (the endpoint came from .env) with the key from .env.
    assert len(server.requests) == 4
    assert {r.headers["authorization"] for r in server.requests} == {f"Bearer {key}"}
    runs = sorted((tmp_path / "runs").iterdir())
    assert len(runs) == 2 and all((run / "summary.json").is_file() for run in runs)
    assert files_holding(tmp_path / "runs", key) == []
    assert files_holding(tmp_path / "runs", key[len("sk-") :]) == []
    for done in (cli, api):
        assert key not in done.stdout and key not in done.stderr


def test_the_environment_wins_over_dotenv_and_dotenv_stays_out_of_os_environ(
    tmp_path: Path,
) -> None:
    (tmp_path / ".env").write_text(
        'OPENAI_API_KEY="from-file"\nOPENAI_BASE_URL=http://file/v1\n'
        "SOPBUS_TEST_ONLY_IN_FILE=1\nNO_VALUE\n"
    )
    found = run_environ(tmp_path, {"OPENAI_API_KEY": "from-env", "HOME": "/h"})
    assert found == {
        "OPENAI_API_KEY": "from-env",
        "OPENAI_BASE_URL": "http://file/v1",
        "SOPBUS_TEST_ONLY_IN_FILE": "1",
        "HOME": "/h",
    }
    assert "SOPBUS_TEST_ONLY_IN_FILE" not in os.environ
    assert run_environ(tmp_path / "elsewhere", {"A": "b"}) == {"A": "b"}  # no .env: as given


def test_an_unreadable_dotenv_is_a_config_error_naming_it(tmp_path: Path) -> None:
    (tmp_path / ".env").write_bytes(b"OPENAI_API_KEY=\xff\xfe\n")
    with pytest.raises(ConfigError, match=f"cannot read {tmp_path / '.env'}"):
        run_environ(tmp_path, {})


@pytest.mark.slow
def test_no_key_anywhere_names_both_places_to_put_it(tmp_path: Path) -> None:
    (tmp_path / "keyed.toml").write_text(SCENARIO)
    done = subprocess.run(
        [*ARGV, "run", "keyed.toml", "--runs-dir", "runs"],
        cwd=tmp_path,
        env=without_keys(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "OPENAI_API_KEY" in done.stderr and ".env" in done.stderr
    assert not (tmp_path / "runs").exists()
