"""Credentials in a base URL never reach what a run writes (issue 13, item 12): not the run
directory's files, not stdout or stderr, whether the calls succeed, fail or cannot connect;
the run's copy of its scenario keeps the URL with the credentials blanked."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from sopbus.bus._util._redact import redact_text, redact_url, url_secrets
from support.cli import sopbus as cli
from support.openai_server import Answer, Fail, OpenAIServer

PASSWORD = "hunter2-pass-77"
QUERY_KEY = "qk-5511-secret"
API_KEY = "sk-live-abcdef123456"
PAIR = (("Dora", "Draft"), ("Pete", "Polish"))
LLM = {"provider": "openai", "max_tokens": 100, "max_attempts": 1}


def test_redact_url() -> None:
    assert redact_url("http://bob:pw@host:8000/v1") == "http://***@host:8000/v1"
    assert (
        redact_url("https://host/v1?api-key=abc&x=1&access_token=t0k")
        == "https://host/v1?api-key=***&x=1&access_token=***"
    )
    assert redact_url("http://host/v1") == "http://host/v1"
    assert redact_url("not a url") == "not a url"
    assert set(url_secrets("http://bob:pw-99@h/v1?key=k3y9&sig=%2Fs1")) == {
        "bob:pw-99",
        "pw-99",
        "k3y9",
        "%2Fs1",
        "/s1",
    }
    assert (
        redact_text("at http://bob:pw-99@h/v1", url_secrets("http://bob:pw-99@h/v1"))
        == "at http://***@h/v1"
    )


def sopbus(
    *args: str | Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return cli(*args, env={"OPENAI_API_KEY": API_KEY, **(env or {})}, timeout=120)


def with_credentials(base_url: str) -> str:
    return base_url.replace("http://", f"http://bob:{PASSWORD}@") + f"?api-key={QUERY_KEY}"


def leaks(done: subprocess.CompletedProcess[str], runs: Path) -> list[str]:
    """Where any of the secrets shows up: the outputs, or a file of the run directory."""
    found = [
        name
        for name, text in (("stdout", done.stdout), ("stderr", done.stderr))
        if any(s in text for s in (PASSWORD, QUERY_KEY, API_KEY))
    ]
    for path in runs.rglob("*"):
        if path.is_file() and any(
            s.encode() in path.read_bytes() for s in (PASSWORD, QUERY_KEY, API_KEY)
        ):
            found.append(str(path.relative_to(runs)))
    return found


@pytest.mark.parametrize("case", ["answered", "http error", "unreachable"])
def test_no_secret_of_the_base_url_is_written(
    case: str, openai_server: OpenAIServer, tmp_path: Path, team_file: Callable[..., Path]
) -> None:
    scripts: dict[str, list[Answer | Fail]] = {
        "answered": [Answer("a draft"), Answer("a haiku")],
        "http error": [Fail(400, message="bad request")],
        "unreachable": [Answer("unused")],
    }
    openai_server.script(*scripts[case])
    url = with_credentials(
        openai_server.base_url if case != "unreachable" else "http://127.0.0.1:9/v1"
    )
    scenario = team_file(*PAIR, file="pair.toml", llm=LLM)
    runs = tmp_path / "runs"
    done = sopbus("run", scenario, "--base-url", url, "--runs-dir", runs)
    if case == "unreachable":  # refused before it starts (issue 41): nothing is written
        assert done.returncode == 2, done.stderr
        assert not runs.exists() and leaks(done, runs) == []
        assert "nothing answers at the model server http://***@127.0.0.1:9/v1" in done.stderr
        return
    assert done.returncode == (0 if case == "answered" else 1), done.stderr
    [run_dir] = list(runs.iterdir())
    assert {"scenario.toml", "events.jsonl", "costs.jsonl", "summary.json", "run.log"} <= {
        p.name for p in run_dir.iterdir()
    }
    assert leaks(done, runs) == []
    kept = (run_dir / "scenario.toml").read_text()
    assert f'base_url = "{redact_url(url)}"' in kept and "***@127.0.0.1" in kept
    if case != "answered":  # the failure still names the server, without its credentials
        assert "http://***@127.0.0.1" in (run_dir / "summary.json").read_text()
    assert sopbus("verify", run_dir).returncode == 0


def test_a_run_with_credentials_resumes_with_the_whole_url_from_the_environment(
    openai_server: OpenAIServer, tmp_path: Path, team_file: Callable[..., Path]
) -> None:
    openai_server.script(Answer("a draft"), Answer("a haiku"))
    url = with_credentials(openai_server.base_url)
    scenario = team_file(*PAIR, file="pair.toml", llm=LLM)
    runs = tmp_path / "runs"
    first = sopbus("run", scenario, "--base-url", url, "--runs-dir", runs, "--max-rounds", "1")
    assert first.returncode == 0, first.stderr
    [run_dir] = list(runs.iterdir())

    refused = sopbus("resume", run_dir, "--max-rounds", "5")
    assert refused.returncode == 2 and "set OPENAI_BASE_URL to the whole URL" in refused.stderr

    done = sopbus("resume", run_dir, "--max-rounds", "5", env={"OPENAI_BASE_URL": url})
    assert done.returncode == 0, done.stderr
    assert (
        len(openai_server.requests) == 2
        and f"api-key={QUERY_KEY}" in openai_server.requests[-1].path
    )
    assert leaks(done, runs) == [] and leaks(refused, runs) == []


def test_the_redactor_blanks_every_form_of_a_secret_and_keeps_json_valid() -> None:
    import base64
    import json

    from sopbus.bus._util._redact import Redactor

    pair = 'bob:p"w?>~'  # a quote: escaped inside a JSON string
    redactor = Redactor((*url_secrets("http://bob:p%22w%3F%3E~@h/v1"), API_KEY))
    coded = base64.b64encode(pair.encode()).decode()
    forms = [
        API_KEY,
        pair,
        coded,
        coded.rstrip("="),
        base64.urlsafe_b64encode(pair.encode()).decode(),
    ]
    line = json.dumps({"text": " ".join(forms) + " p%22w%3F%3E~"}).encode()
    scrubbed = redactor.data(line)
    assert json.loads(scrubbed)["text"].split() == ["***"] * (len(forms) + 1)
    assert redactor.text(f"Basic {coded}") == "Basic ***"
