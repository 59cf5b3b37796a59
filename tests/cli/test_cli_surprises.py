"""What a new user found silent or surprising on a second pass (issue 41), as the CLI now
answers it: hints that paste into a shell, ``fork --set`` keys it cannot apply, a scenario
file in the working directory over a shipped one of that name, every schema error of a file
at once, cost counts that add up after a resume, ``validate`` without an API key, a server
that is not there. Every command is a subprocess (``python -m sopbus``)."""

from __future__ import annotations

import json
import shlex
import socket
from pathlib import Path

import pytest

from support.cli import sopbus
from support.paths import DATA

pytestmark = pytest.mark.slow  # every test here starts sopbus as a subprocess


def test_the_hint_of_new_pastes_into_a_shell_when_the_folder_has_a_space(tmp_path: Path) -> None:
    made = sopbus("new", "a b", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    hints = [line.split("sopbus ", 1)[1] for line in made.stdout.splitlines() if "sopbus " in line]
    assert [shlex.split(h)[0] for h in hints] == ["validate", "run"]
    # The shell's reading of the hint is the one file `new` wrote, and validate accepts it.
    (scenario,) = {shlex.split(h)[1] for h in hints}
    assert (tmp_path / scenario).is_file() and " " in scenario
    checked = sopbus(*shlex.split(hints[0]), cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr


# -- fork --set: what a fork cannot apply is refused -------------------------------------------


@pytest.fixture(scope="module")
def flower_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished run of the shipped flower_shop (nobody in it watches UserEdit)."""
    cwd = tmp_path_factory.mktemp("flowers")
    done = sopbus("run", "flower_shop", "--quiet", cwd=cwd)
    assert done.returncode == 0, done.stderr
    (run,) = (cwd / "runs").iterdir()
    return run


@pytest.mark.parametrize(
    ("setting", "named"),
    [
        ("inject=Use SQLite", "would reach no role of this team"),
        ('inject={ content = "x", send_to = ["Nobody"] }', "which is no role of the team"),
        ('inject={ content = "x", cause_by = "WriteCode" }', "would reach no role"),
        ("run.runs_dir=elsewhere", "a fork cannot apply run.runs_dir"),
        ("sweep.seeds=3", "a fork cannot apply sweep.seeds"),
        ("scenario.idea=a bakery", "a fork cannot apply scenario.idea"),
    ],
)
def test_a_fork_setting_that_cannot_apply_is_refused_naming_what_can(
    flower_run: Path, tmp_path: Path, setting: str, named: str
) -> None:
    into = tmp_path / "forks"
    done = sopbus(
        "fork", flower_run, "--at-round", "1", "--set", setting, "--into", into, cwd=tmp_path
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert not into.exists()  # no fork was started
    assert f"--set {setting!r}" in done.stderr and named in done.stderr
    # What can apply is named: the roles to address, or the keys a fork applies.
    if setting.startswith("inject"):
        assert "OrderDesk, StockKeeper, CustomerService" in done.stderr
        if "reach no role" in named:
            assert "UserRequirement" in done.stderr  # an action a role watches
    else:
        assert "a fork applies llm.*" in done.stderr and "run.max_rounds" in done.stderr


def test_an_injection_a_role_receives_is_delivered_in_the_fork(
    flower_run: Path, tmp_path: Path
) -> None:
    into = tmp_path / "forks"
    inject = 'inject={ content = "Use SQLite", send_to = ["StockKeeper"] }'
    done = sopbus("fork", flower_run, "--at-round", "1", "--set", inject, "--into", into, "--quiet")
    assert done.returncode == 0, done.stderr
    (fork,) = into.iterdir()
    events = [json.loads(line) for line in (fork / "events.jsonl").read_text().splitlines()]
    sent = [e for e in events if e.get("message", {}).get("content") == "Use SQLite"]
    assert [e["kind"] for e in sent] == ["message_published"]
    assert sent[0]["message"]["round"] == 2


# -- a file in the working directory wins over a shipped scenario of that name ----------------


def test_a_scenario_file_in_the_working_directory_wins_over_the_shipped_one(
    tmp_path: Path,
) -> None:
    copied = sopbus("new", ".", "--from", "flower_shop", cwd=tmp_path)
    assert copied.returncode == 0, copied.stderr
    mine = tmp_path / "flower_shop.toml"
    text = mine.read_text()
    assert 'name = "flower-shop"' in text
    mine.write_text(text.replace('name = "flower-shop"', 'name = "my-flowers"', 1))

    done = sopbus("run", "flower_shop", "--quiet", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (run,) = (tmp_path / "runs").iterdir()
    assert "my-flowers" in run.name
    summary = json.loads((run / "summary.json").read_text())
    assert Path(summary["scenario_path"]).resolve() == mine.resolve()
    # `--from` still copies the shipped one, whatever the working directory holds.
    again = sopbus("new", "copy", "--from", "flower_shop", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert 'name = "flower-shop"' in (tmp_path / "copy" / "flower_shop.toml").read_text()


# -- costs after a resume: the counts add up --------------------------------------------------


def test_costs_after_a_resume_counts_calls_and_refusals_so_they_add_up(tmp_path: Path) -> None:
    pair = DATA / "scenarios" / "review_pair.toml"
    stopped = sopbus("run", pair, "--runs-dir", "runs", "--budget", "0.0001", cwd=tmp_path)
    assert stopped.returncode == 3, stopped.stderr
    resumed = sopbus("resume", "last", "--budget", "1", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    report = json.loads(sopbus("costs", "last", "--json", cwd=tmp_path).stdout)
    assert report["outcomes"] == {"ok": 2, "refused": 1} and report["calls"] == 2
    table = sopbus("costs", "last", cwd=tmp_path, columns=200).stdout
    (total,) = [line for line in table.splitlines() if line.startswith("total ")]
    assert total.endswith(", 2 calls (2 ok), 1 refused (not sent)"), total


# -- validate without an API key --------------------------------------------------------------


def test_validate_passes_without_an_api_key_and_notes_that_the_run_needs_one(
    tmp_path: Path,
) -> None:
    scenario = tmp_path / "pair.toml"
    pair = (DATA / "scenarios" / "review_pair.toml").read_text()
    scenario.write_text(pair.replace('provider = "sim"', 'provider = "openai"'))
    keyless = {"OPENAI_API_KEY": None}
    checked = sopbus("validate", scenario, env=keyless, cwd=tmp_path, columns=200)
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.startswith(f"{scenario}: ok")
    (note,) = [line for line in checked.stdout.splitlines() if line.startswith("note: ")]
    assert "`sopbus run` needs an API key for provider 'openai': set OPENAI_API_KEY" in note
    # The other checks of the file still run: a model with no price is still refused.
    unpriced = tmp_path / "unpriced.toml"
    unpriced.write_text(scenario.read_text().replace('"gpt-4o-mini"', '"house-model-7"'))
    wrong = sopbus("validate", unpriced, env=keyless, cwd=tmp_path)
    assert wrong.returncode == 2 and "no price for model 'house-model-7'" in wrong.stderr
    # The run does need the key: refused before anything is written.
    ran = sopbus("run", scenario, "--runs-dir", "runs", env=keyless, cwd=tmp_path)
    assert ran.returncode == 2 and "needs an API key: set OPENAI_API_KEY" in ran.stderr
    assert not (tmp_path / "runs").exists()
    # With the key (from ./.env, as run reads it) there is no note.
    (tmp_path / ".env").write_text("OPENAI_API_KEY=local\n")
    keyed = sopbus("validate", scenario, env=keyless, cwd=tmp_path)
    assert keyed.returncode == 0 and "note:" not in keyed.stdout


# -- validate: every schema error at once, the closest few names -------------------------------

SCHEMA_MISTAKES = """\
[scenario]
name = "mistakes"
idea = 3

[run]
max_rounds = "ten"

[[roles]]
name = "Ann"
watch = "UserRequirement"

[[roles]]
name = "Ben"

[[roles]]
name = "Cy"
react_mode = "whenever"

[actions.Draft]
instruction = 5
"""


def test_validate_reports_every_schema_error_of_a_file_at_its_place(tmp_path: Path) -> None:
    scenario = tmp_path / "mistakes.toml"
    scenario.write_text(SCHEMA_MISTAKES)
    done = sopbus("validate", scenario, cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    lines = done.stderr.removeprefix("sopbus: error: ").splitlines()
    assert [line.rsplit(" - at ", 1)[1].split("`")[1] for line in lines] == [
        "$.scenario.idea",
        "$.run.max_rounds",
        "$.roles[0].watch",
        "$.roles[2].react_mode",
        "$.actions.Draft.instruction",
    ]
    assert all(line.startswith(f"{scenario}: ") for line in lines)
    assert 'invalid value "whenever"' in lines[3] and "`react`" in lines[3]
    # `run` refuses the file with the same errors.
    ran = sopbus("run", scenario, "--runs-dir", "runs", cwd=tmp_path)
    assert ran.returncode == 2 and ran.stderr == done.stderr


def test_an_unknown_name_is_shown_with_the_closest_few_not_a_page_of_others(
    tmp_path: Path,
) -> None:
    scenario = tmp_path / "typo.toml"
    scenario.write_text(
        '[scenario]\nname = "typo"\nidea = "y"\n\n[[roles]]\nname = "Archi"\n'
        'watch = ["WritePDR"]\nactions = ["WriteDesign"]\n'
    )
    done = sopbus("validate", scenario, cwd=tmp_path)
    assert done.returncode == 2
    assert "unknown action 'WritePDR' at $.roles[0].watch[0] (did you mean 'WritePRD'" in (
        done.stderr
    )
    assert "Board." not in done.stderr and "`sopbus roles` lists" in done.stderr


# -- when the server is not there ---------------------------------------------------------------


def _closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then let go)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_base_url_where_nothing_listens_fails_at_once_with_the_fix(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    flags = ("--provider", "openai", "--model", "smollm2", "--price", "0,0")
    done = sopbus(
        "run",
        "flower_shop",
        *flags,
        "--base-url",
        url,
        "--runs-dir",
        "runs",
        cwd=tmp_path,
        env={"OPENAI_API_KEY": "local"},
        timeout=60,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert not (tmp_path / "runs").exists()  # a run that never started leaves nothing
    said = done.stderr
    port = url.split(":")[2].split("/")[0]
    assert f"nothing answers at the model server {url}" in said
    assert f"tried a TCP connect to 127.0.0.1:{port}" in said and "refused" in said.lower()
    assert "--base-url URL" in said and "OPENAI_BASE_URL" in said and "local-models" in said
    assert "Traceback" not in said and done.stdout == ""


def test_export_otel_says_at_once_that_no_collector_listens(tmp_path: Path) -> None:
    ran = sopbus("run", "flower_shop", "--quiet", "--runs-dir", "runs", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    endpoint = f"http://127.0.0.1:{_closed_port()}"
    # The exporter alone retried for over a minute; the timeout makes that a failure here.
    done = sopbus("export-otel", "last", "--endpoint", endpoint, cwd=tmp_path, timeout=30)
    assert done.returncode == 1
    assert f"nothing listens at the OTLP endpoint {endpoint}/v1/traces" in done.stderr
    assert "--endpoint URL" in done.stderr and "OTEL_EXPORTER_OTLP_ENDPOINT" in done.stderr
