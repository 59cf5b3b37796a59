"""A server that echoes what it was sent cannot put the run's secrets in any file (issue 28,
item 12): the key, the base URL's password and user info, and the Basic auth that the HTTP
client makes of them (base64, standard or urlsafe, padded or not), whether the answer carries
them in clear, percent-encoded or encoded.

The run records a cassette (``--record``), writes its report and sends its trace to a real
OTLP collector; then every file of the run directory, the cassette, the report, the spans,
stdout and stderr are searched for each form.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

from support.cli import sopbus
from support.leaks import basic, leaks, secret_forms
from support.openai_server import Echo, OpenAIServer
from support.otlp_server import Collected

USER = "bob"
PASSWORD = "pw?>>~~x1"  # its Basic auth has '+' (urlsafe '-') and '=' padding
API_KEY = "sk-live-echo-0123456789"
PAIR = (("Dora", "Draft"), ("Pete", "Polish"))
LLM = {"provider": "openai", "max_tokens": 100, "max_attempts": 1}
FORMS = secret_forms(USER, PASSWORD, API_KEY)


def test_the_forms_are_distinct() -> None:
    # else the test below would check fewer forms than it says
    assert len(set(FORMS)) == len(FORMS)


def test_no_form_of_a_secret_an_answer_echoes_is_written(
    openai_server: OpenAIServer,
    tmp_path: Path,
    team_file: Callable[..., Path],
    otlp: tuple[str, Collected],
) -> None:
    endpoint, collected = otlp
    # The answers repeat the request's headers (Bearer key, Basic auth) after every form.
    openai_server.script(Echo(" ".join(FORMS)))
    url = openai_server.base_url.replace("http://", f"http://{USER}:{quote(PASSWORD, safe='')}@")
    scenario = team_file(*PAIR, file="pair.toml", llm=LLM)
    runs, cassette = tmp_path / "runs", tmp_path / "cassette.jsonl"
    env = {"OPENAI_API_KEY": API_KEY, "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint}

    done = sopbus(
        "run",
        scenario,
        "--base-url",
        url,
        "--runs-dir",
        runs,
        "--record",
        cassette,
        "--otel",
        env=env,
    )
    assert done.returncode == 0, done.stderr
    [run_dir] = list(runs.iterdir())
    report = sopbus("report", run_dir, env=env)
    assert report.returncode == 0, report.stderr

    # The server did send each secret back: the check below is not vacuous.
    # (The HTTP client sends the URL's user info as Basic auth, in place of the Bearer key.)
    headers = openai_server.requests[0].headers
    assert headers["authorization"] == f"Basic {basic(f'{USER}:{PASSWORD}')[0]}"
    assert len(openai_server.requests) == 2
    assert {"report.html", "calls.jsonl", "events.jsonl"} <= {p.name for p in run_dir.iterdir()}
    texts = {
        "stdout": done.stdout,
        "stderr": done.stderr,
        "spans": json.dumps(collected.spans, default=str),
    }
    assert leaks(FORMS, [runs, cassette], texts) == {}
    assert collected.spans, "the trace was sent"
    assert "***" in (run_dir / "calls.jsonl").read_text()
    assert sopbus("verify", run_dir).returncode == 0
