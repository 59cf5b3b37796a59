"""What a new user met in their first hour, as the CLI now answers it (issue 15): ``runs`` at
80 columns, ``show --full`` with filters, ``validate`` refusing what ``run`` refuses, every
group chat strategy on the simulator, refusals that explain themselves, ``--set`` and SOP
module mistakes named where they are, cost lines only with ``-v``, the ``--idea`` warning.
Every command is a subprocess (``python -m sopbus``)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from decimal import Decimal
from pathlib import Path

import pytest

from sopbus.bus.money import money
from support.cli import ARGV, sopbus
from support.paths import DATA, ROOT

pytestmark = pytest.mark.slow  # every test here starts sopbus as a subprocess

SCENARIOS = ROOT / "scenarios"
PAIR = DATA / "scenarios" / "review_pair.toml"


def only_run(runs: Path) -> Path:
    (run,) = runs.iterdir()
    return run


# -- runs at 80 columns -----------------------------------------------------------------------


def test_runs_fits_80_columns_with_whole_ids_status_verdict_spend_and_the_sim_flag(
    tmp_path: Path,
) -> None:
    long_name = tmp_path / "long.toml"
    long_name.write_text(
        PAIR.read_text().replace(
            'name = "review pair"', 'name = "a review pair with a rather long scenario name"'
        )
    )
    for scenario in (PAIR, long_name, SCENARIOS / "group_chat.toml"):
        assert (
            sopbus("run", scenario, "--runs-dir", "runs", "--quiet", cwd=tmp_path).returncode == 0
        )
    ids = sorted(p.name for p in (tmp_path / "runs").iterdir())
    for width in (80, 60):
        table = sopbus("runs", cwd=tmp_path, columns=width).stdout
        # Only a run id longer than the terminal may pass its edge (on a line of its own).
        assert all(len(line) <= width or line in ids for line in table.splitlines()), table
        assert "…" not in table
        for run_id in ids:
            assert re.search(rf"(^|\s){re.escape(run_id)}(\s|$)", table, re.M), (run_id, table)
        assert table.count("completed") == 3 and table.count("sim") >= 3
        assert "passed" in table  # the group chat's verdict; the pairs state none ("-")
    wide = sopbus("runs", cwd=tmp_path, columns=200).stdout
    assert "idle" in wide and "review pair" in wide and "$1.00" in wide  # the optional columns


# -- show --full and its filters --------------------------------------------------------------


def test_show_full_prints_whole_messages_and_filters_by_role_action_and_round(
    tmp_path: Path,
) -> None:
    assert (
        sopbus(
            "run", SCENARIOS / "group_chat.toml", "--runs-dir", "runs", "--quiet", cwd=tmp_path
        ).returncode
        == 0
    )
    events = [
        json.loads(line)
        for line in (only_run(tmp_path / "runs") / "events.jsonl").read_text().splitlines()
    ]
    writer = [
        e["message"]
        for e in events
        if e.get("kind") == "message_published" and e["message"]["sent_from"] == "Writer"
    ]
    full = sopbus("show", "last", "--full", "--role", "Writer", cwd=tmp_path, columns=80).stdout
    for message in writer:  # whole, line by line, however long
        for line in message["content"].splitlines():
            assert " ".join(line.split()) in " ".join(full.split())
    assert "messages of run" in full and f"({len(writer)} of " in full
    assert "Planner ->" not in full and "Writer ->" in full
    speeches = [
        json.loads(line)
        for line in sopbus(
            "show", "last", "--json", "--action", "Speak", cwd=tmp_path
        ).stdout.splitlines()
    ]
    assert len(speeches) == 4 and {m["cause_by"] for m in speeches} == {"Speak"}
    first, third = speeches[0]["round"], speeches[2]["round"]
    picked = [
        json.loads(line)
        for line in sopbus(
            "show",
            "last",
            "--json",
            "--action",
            "Speak",
            "--round",
            str(first),
            "--round",
            str(third),
            cwd=tmp_path,
        ).stdout.splitlines()
    ]
    assert picked == [speeches[0], speeches[2]]
    typo = sopbus("show", "last", "--role", "Writr", cwd=tmp_path)
    assert (
        typo.returncode == 2
        and "--role 'Writr'" in typo.stderr
        and "did you mean `Writer`" in typo.stderr
    )


# -- validate refuses what run refuses --------------------------------------------------------


def _bad_files(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    text = PAIR.read_text()
    cases = {
        "unpriced model": (text.replace('model = "gpt-4o-mini"', 'model = "my-model"'), "my-model"),
        # No API key: run refuses, validate passes with a note (issue 41; test_cli_surprises).
        "empty fixture file": (
            text.replace("max_tokens = 256", 'max_tokens = 256\nfixtures = ["empty.toml"]'),
            "simulated = true",
        ),
        "send_to typo": (
            text.replace('actions = ["Review"]', 'actions = ["Review"]\nsend_to = ["Writter"]'),
            "send_to names 'Writter', which is no role of the team - at `$.roles[1].send_to[0]`",
        ),
        "artifact placeholder": (
            text.replace(
                'output = { title = "str", body = "str" }',
                'output = { title = "str", body = "str" }\nartifact = "d/{when}.md"',
            ),
            "unknown placeholder {when}",
        ),
    }
    (tmp_path / "empty.toml").write_text("")
    out = {}
    for name, (body, expected) in cases.items():
        path = tmp_path / (name.replace(" ", "_") + ".toml")
        path.write_text(body)
        out[name] = (path, expected)
    return out


def test_validate_refuses_every_file_run_refuses_with_the_same_message(tmp_path: Path) -> None:
    for name, (path, expected) in _bad_files(tmp_path).items():
        env_free = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
        checked = subprocess.run(
            [*ARGV, "validate", str(path)],
            cwd=tmp_path,
            env=env_free,
            capture_output=True,
            text=True,
        )
        ran = subprocess.run(
            [*ARGV, "run", str(path), "--runs-dir", "runs"],
            cwd=tmp_path,
            env=env_free,
            capture_output=True,
            text=True,
        )
        assert (checked.returncode, ran.returncode) == (2, 2), (name, checked.stdout, ran.stdout)
        assert expected in checked.stderr, (name, checked.stderr)
        assert checked.stderr == ran.stderr, name
        assert "Traceback" not in checked.stderr + ran.stderr
    assert not (tmp_path / "runs").exists()  # run refused before creating anything


# -- every group chat strategy the file names runs --------------------------------------------


def test_every_strategy_group_chat_toml_names_runs_on_the_simulator(tmp_path: Path) -> None:
    text = (SCENARIOS / "group_chat.toml").read_text()
    named = set(re.findall(r'strategy = "(\w+)"', text))
    assert named >= {"model", "round_robin", "handoff"}
    for strategy in sorted(named):
        path = tmp_path / f"chat_{strategy}.toml"
        path.write_text(
            re.sub(r'^strategy = "\w+"', f'strategy = "{strategy}"', text, flags=re.M)
            .replace('"fixtures/', f'"{SCENARIOS}/fixtures/')
            .replace("[scenario]\n", "[scenario]\nallow_outside = true\n", 1)
        )
        done = sopbus("run", path, "--runs-dir", strategy, "--quiet", cwd=tmp_path)
        assert done.returncode == 0, (strategy, done.stdout, done.stderr)
        run = only_run(tmp_path / strategy)
        summary = json.loads((run / "summary.json").read_text())
        assert summary["verdict"]["passed"] is True, (strategy, summary["verdict"])
        assert "TERMINATE" in (run / "artifacts" / "result.md").read_text()


# -- a refusal says what the call needed ------------------------------------------------------


def test_a_refused_call_records_its_reservation_and_names_max_tokens(tmp_path: Path) -> None:
    done = sopbus("run", PAIR, "--runs-dir", "runs", "--budget", "0.0001", "--quiet", cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    run = only_run(tmp_path / "runs")
    (line,) = [json.loads(x) for x in (run / "costs.jsonl").read_text().splitlines()]
    assert line["outcome"] == "refused" and Decimal(line["reserved_usd"]) > Decimal("0.0001")
    detail = json.loads((run / "summary.json").read_text())["detail"]
    assert f"its worst case is {money(Decimal(line['reserved_usd']))} " in detail
    assert "max_tokens = 256" in detail and "lower max_tokens" in detail


# -- mistakes named where they are ------------------------------------------------------------


def test_a_bad_set_key_is_blamed_on_the_flag_not_the_scenario_file(tmp_path: Path) -> None:
    assert (
        sopbus(
            "run", SCENARIOS / "camel_roleplay.toml", "--runs-dir", "runs", "--quiet", cwd=tmp_path
        ).returncode
        == 0
    )
    done = sopbus("fork", "last", "--at-round", "1", "--set", "sop.turn_limt=3", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith("sopbus: error: --set 'sop.turn_limt=3': unknown key `turn_limt`")
    assert "did you mean `turn_limit`" in done.stderr and "camel_roleplay.toml" not in done.stderr


def test_a_module_without_sop_says_what_is_missing_and_where(tmp_path: Path) -> None:
    (tmp_path / "my_team.py").write_text("from sopbus.sops.group_chat import SOP as CHAT\n")
    path = tmp_path / "s.toml"
    path.write_text('[scenario]\nname = "x"\nsop = "my_team:SOP"\nidea = "i"\n')
    done = sopbus("validate", path, cwd=tmp_path)
    assert done.returncode == 2 and "NoneType" not in done.stderr
    assert f"module my_team ({tmp_path / 'my_team.py'}) has no attribute 'SOP'" in done.stderr
    assert "it has my_team:CHAT, name one of those" in done.stderr


# -- the terminal: cost lines with -v, the --idea warning, the summary's flags -----------------


def test_cost_lines_only_with_verbose_and_always_in_run_log(tmp_path: Path) -> None:
    quiet = sopbus("run", PAIR, "--runs-dir", "a", cwd=tmp_path)
    loud = sopbus("run", PAIR, "--runs-dir", "b", "-v", cwd=tmp_path)
    assert quiet.returncode == loud.returncode == 0
    assert "Total running cost" not in quiet.stderr and loud.stderr.count("Total running cost") == 2
    for runs in ("a", "b"):
        assert (only_run(tmp_path / runs) / "run.log").read_text().count("Total running cost") == 2
    assert "SIMULATED" in quiet.stdout  # the summary table flags simulated output


def test_another_idea_on_the_simulator_warns_naming_the_fixture_file(tmp_path: Path) -> None:
    shop = SCENARIOS / "flower_shop.toml"
    plain = sopbus("run", shop, "--runs-dir", "a", "--quiet", cwd=tmp_path)
    other = sopbus(
        "run", shop, "--runs-dir", "b", "--quiet", "--idea", "two white tulips", cwd=tmp_path
    )
    assert plain.returncode == other.returncode == 0
    assert "WARNING" not in plain.stderr
    assert (
        f"answers from the fixture file {SCENARIOS / 'fixtures' / 'flower_shop.toml'}"
        in other.stderr
    )
    assert "'two white tulips'" in other.stderr
    checked = sopbus("validate", shop, cwd=tmp_path)
    assert "answers from the fixture file" not in checked.stdout  # the file's own idea: no warning


def test_the_conversation_sops_keep_their_results_as_artifacts(tmp_path: Path) -> None:
    shop = sopbus(
        "run", SCENARIOS / "flower_shop.toml", "--runs-dir", "shop", "--quiet", cwd=tmp_path
    )
    camel = sopbus(
        "run", SCENARIOS / "camel_roleplay.toml", "--runs-dir", "camel", "--quiet", cwd=tmp_path
    )
    assert shop.returncode == camel.returncode == 0
    run = only_run(tmp_path / "shop")
    replies = sorted(p.name for p in (run / "artifacts" / "replies").iterdir())
    assert replies == ["3_CustomerService.md", "6_CustomerService.md", "9_CustomerService.md"]
    events = [json.loads(x) for x in (run / "events.jsonl").read_text().splitlines()]
    last = [
        e["message"]
        for e in events
        if e.get("kind") == "message_undelivered" and e["message"]["cause_by"] == "ReplyToCustomer"
    ][-1]
    assert (run / "artifacts" / "replies" / "9_CustomerService.md").read_text() == last[
        "content"
    ] + "\n"
    solution = (only_run(tmp_path / "camel") / "artifacts" / "solution.md").read_text()
    assert solution.count("## Solution") == 3 and solution.count("## Instruction") == 3
