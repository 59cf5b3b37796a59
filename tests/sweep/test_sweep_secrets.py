"""A sweep whose scenario has a base URL with credentials (issue 28, item 13): its runs call
the whole URL, though the sweep keeps its variants and each run its scenario with the URL
blanked, and no form of a secret (key, password, Basic auth) reaches a file of the sweep or
its runs, even when the server echoes them in every answer."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

from support.leaks import leaks, secret_forms
from support.openai_server import Echo, OpenAIServer
from support.sweeps import greet_sweep, record, sopbus, summary, sweep_dir

USER, PASSWORD, KEY = "ann", "sw?>>~~pw7", "sk-sweep-0123456789"
FORMS = secret_forms(USER, PASSWORD, KEY)


def credentialed(base_url: str) -> str:
    return base_url.replace("http://", f"http://{USER}:{quote(PASSWORD, safe='')}@")


def test_a_sweep_with_credentials_in_its_base_url_runs_and_writes_none_of_them(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    openai_server.script(Echo(" ".join(FORMS)))
    scenario = greet_sweep(tmp_path, credentialed(openai_server.base_url), 'seeds = "1..2"')

    done = sopbus(tmp_path, "sweep", str(scenario), env={"OPENAI_API_KEY": KEY})

    assert done.returncode == 0, done.stdout + done.stderr
    data = record(sweep_dir(tmp_path / "sweeps"))
    assert [e["state"] for e in data["runs"]] == ["done"] * 4
    assert all(summary(tmp_path / "runs" / e["run_id"])["llm_calls"] == 1 for e in data["runs"])
    assert len(openai_server.requests) == 4  # each run called the server with the whole URL
    texts = {"stdout": done.stdout, "stderr": done.stderr}
    assert leaks(FORMS, [tmp_path / "sweeps", tmp_path / "runs"], texts) == {}
