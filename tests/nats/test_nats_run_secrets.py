"""A run over NATS whose base URL has credentials (issue 28, item 13): the worker hosting a
role calls the whole URL (taken from the user's scenario file, since the scenario the run
shares keeps it blanked) and no form of a secret reaches a file, the NATS server's streams
and buckets included, even when every answer echoes them; a worker that cannot build the team ends the waiting run at once, in its own
words, instead of a traceback on the worker and a run that waits for a claim in vain."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import pytest

from support.cli import ARGV, environ, start
from support.leaks import leaks, secret_forms
from support.nats_server import NatsServer
from support.openai_server import Echo, OpenAIServer
from support.teams import pipeline

USER, PASSWORD, KEY = "ann", "run?>>~~pw5", "sk-nats-run-0123456789"
FORMS = secret_forms(USER, PASSWORD, KEY)
PAIR = (("Dora", "Draft"), ("Pete", "Polish"))


@contextmanager
def worker(tmp: Path, url: str, env: dict[str, str | None]) -> Iterator[Path]:
    """A ``sopbus worker`` hosting Pete; yields its log, complete once the block ends."""
    log = tmp / "worker.log"
    with open(log, "wb") as out:
        argv = ["worker", "--bus", url, "--workdir", str(tmp / "w"), "--roles", "Pete"]
        proc = subprocess.Popen(
            [*ARGV, *argv, "--id", "w-pete", "--runs-dir", str(tmp / "w-runs")],
            cwd=tmp,
            env=environ({"PYTHONUNBUFFERED": "1", **env}),
            stdout=out,
            stderr=out,
        )
        try:
            yield log
        finally:
            proc.kill()
            proc.wait()


def run_pair(tmp: Path, server: OpenAIServer, url: str) -> subprocess.CompletedProcess[str]:
    base = server.base_url.replace("http://", f"http://{USER}:{quote(PASSWORD, safe='')}@")
    llm = {"provider": "openai", "base_url": base, "max_tokens": 100, "max_attempts": 1}
    scenario = tmp / "pair.toml"
    scenario.write_text(pipeline(*PAIR, llm=llm), encoding="utf-8")
    argv = ["run", str(scenario), "--bus", url, "--remote", "Pete", "--wait-workers", "120"]
    proc = start(
        *argv,
        "--quiet",
        "--runs-dir",
        str(tmp / "runs"),
        cwd=tmp,
        env={"OPENAI_API_KEY": KEY},
        text=True,
    )
    try:
        out, err = proc.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        proc.kill()  # waiting for a claim in vain: the failure this file guards against
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.mark.slow
def test_a_worker_calls_the_whole_url_and_no_form_of_a_secret_is_written(
    tmp_path: Path, shared_nats_server: NatsServer
) -> None:
    with (
        OpenAIServer() as server,
        worker(tmp_path, shared_nats_server.url, {"OPENAI_API_KEY": KEY}) as log,
    ):
        server.script(Echo(" ".join(FORMS)))
        done = run_pair(tmp_path, server, shared_nats_server.url)
        requests = len(server.requests)
    assert done.returncode == 0, done.stdout + done.stderr
    assert requests == 2 and b"hosting Pete of run" in log.read_bytes()
    texts = {"stdout": done.stdout, "stderr": done.stderr}
    # the server's streams and buckets are files too (on its machine)
    stores = [tmp_path / "runs", tmp_path / "w", log, shared_nats_server.store]
    assert leaks(FORMS, stores, texts) == {}
    assert b"Traceback" not in log.read_bytes()


@pytest.mark.slow
def test_a_worker_that_cannot_build_the_team_ends_the_waiting_run_in_its_words(
    tmp_path: Path, shared_nats_server: NatsServer
) -> None:
    with (
        OpenAIServer() as server,
        worker(tmp_path, shared_nats_server.url, {"OPENAI_API_KEY": None}) as log,
    ):
        done = run_pair(tmp_path, server, shared_nats_server.url)
        requests = len(server.requests)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "worker w-pete cannot host the run" in done.stderr
    assert "needs an API key" in done.stderr and requests == 0
    assert b"Traceback" not in log.read_bytes()
