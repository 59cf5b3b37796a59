"""``sopbus`` end to end, as a user runs it: ``run`` a small TOML team on the simulator,
then read the run back with ``runs``, ``show`` and ``costs``; ``validate`` with its watch
graph; ``roles``. Every command is a subprocess (``python -m sopbus``) in a scratch
directory, so the default ``--runs-dir runs`` is the scratch directory's."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from sopbus.bus import PriceBook
from support.cli import sopbus
from support.paths import DATA, ROOT

pytestmark = pytest.mark.slow  # every test here starts sopbus as a subprocess

SCENARIOS = DATA / "scenarios"
PAIR = SCENARIOS / "review_pair.toml"
COSTS_KEYS = [
    "run_id",
    "simulated",
    "status",
    "end_reason",
    "stopped",
    "total_usd",
    "budget_usd",
    "calls",
    "outcomes",
    "by_role",
    "by_action",
    "by_model",
]


def ok(*args: str | Path, cwd: Path) -> str:
    done = sopbus(*args, cwd=cwd)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return done.stdout


def jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A scratch directory in which the review pair ran once (into ``runs/``)."""
    cwd = tmp_path_factory.mktemp("cli")
    done = sopbus("run", PAIR, "--runs-dir", "runs", "--quiet", cwd=cwd)
    assert done.returncode == 0, done.stderr
    return cwd


@pytest.fixture(scope="module")
def run_dir(work: Path) -> Path:
    (only,) = (work / "runs").iterdir()
    return only


# -- run ------------------------------------------------------------------------------------


def test_run_exits_0_and_leaves_a_run_directory(run_dir: Path) -> None:
    assert {p.name for p in run_dir.iterdir()} >= {
        "events.jsonl",
        "costs.jsonl",
        "summary.json",
        "scenario.toml",
        "artifacts",
    }
    summary = json.loads((run_dir / "summary.json").read_text())
    assert (summary["status"], summary["end_reason"], summary["llm_calls"]) == (
        "completed",
        "idle",
        2,
    )
    assert summary["run_id"] == run_dir.name and summary["scenario"] == "review pair"


def test_a_tiny_budget_exits_3_and_the_ledger_shows_the_refusal(tmp_path: Path) -> None:
    done = sopbus(
        "run", PAIR, "--runs-dir", "tight", "--budget", "0.00001", "--quiet", cwd=tmp_path
    )
    assert done.returncode == 3, done.stderr
    (run,) = (tmp_path / "tight").iterdir()
    assert json.loads((run / "summary.json").read_text())["end_reason"] == "budget_exhausted"
    assert [line["outcome"] for line in jsonl(run / "costs.jsonl")] == ["refused"]
    report = json.loads(ok("costs", "last", "--runs-dir", "tight", "--json", cwd=tmp_path))
    assert (report["calls"], Decimal(report["total_usd"]), report["budget_usd"]) == (
        0,
        0,
        "0.00001",
    )
    listed = json.loads(ok("runs", "--runs-dir", "tight", "--json", cwd=tmp_path))
    assert [(r["status"], r["end_reason"]) for r in listed] == [
        ("budget_exhausted", "budget_exhausted")
    ]


def test_an_action_that_fails_for_good_exits_1_with_the_reason(tmp_path: Path) -> None:
    # The writer's answers always miss `body`: one ask and two repairs, then the run fails.
    (tmp_path / "no_body.toml").write_text(
        "# SIMULATED OUTPUT: canned answers for sopbus's sim provider; no model wrote them.\n"
        'simulated = true\n[[fixture]]\naction = "Draft"\nresponses = [\'{"title": "T"}\']\n'
    )
    scenario = tmp_path / "pair.toml"
    scenario.write_text(
        PAIR.read_text().replace(
            "max_tokens = 256", 'max_tokens = 256\nfixtures = ["no_body.toml"]'
        )
    )
    done = sopbus("run", scenario, "--runs-dir", "runs", "--quiet", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    assert "failed (error)" in done.stdout and "Field required" in done.stdout
    (run,) = (tmp_path / "runs").iterdir()
    summary = json.loads((run / "summary.json").read_text())
    assert (summary["status"], summary["end_reason"], summary["llm_calls"]) == (
        "failed",
        "error",
        3,
    )
    assert summary["error"].startswith(
        "role 'Writer' failed in round 1: ModelOutputError: action 'Draft'"
    )
    assert [(line["role"], line["attempt"]) for line in jsonl(run / "costs.jsonl")] == [
        ("Writer", 1),
        ("Writer", 2),
        ("Writer", 3),
    ]
    (row,) = json.loads(ok("runs", "--json", cwd=tmp_path))
    assert (row["status"], row["end_reason"], row["calls"]) == ("failed", "error", 3)


# -- runs -----------------------------------------------------------------------------------


def test_runs_lists_the_run_from_its_summary(work: Path, run_dir: Path) -> None:
    summary = json.loads((run_dir / "summary.json").read_text())
    (row,) = json.loads(ok("runs", "--json", cwd=work))
    assert row["run_id"] == run_dir.name and row["scenario"] == "review pair"
    assert (row["status"], row["end_reason"], row["calls"], row["rounds"]) == (
        "completed",
        "idle",
        2,
        3,
    )
    assert (row["total_usd"], row["budget_usd"]) == (summary["total_usd"], "1.0")
    assert row["started_at"] == summary["started_at"]
    table = ok("runs", cwd=work)
    (line,) = [ln for ln in table.splitlines() if run_dir.name in ln]
    assert "review pair" in line and "completed" in line and "idle" in line and "$1.00" in line


def copy_run(
    src: Path, runs: Path, name: str, *, started_at: float | None = None, events: int | None = None
) -> Path:
    """A copy of the run ``src`` as ``runs/name``. With ``started_at`` its summary says it
    started then; with ``events`` it has no summary and only its first ``events`` event
    lines plus half of the next one, as if killed while writing."""
    dst = runs / name
    shutil.copytree(src, dst)
    if events is not None:
        lines = (src / "events.jsonl").read_text().splitlines(keepends=True)
        torn = lines[events][: len(lines[events]) // 2]
        (dst / "events.jsonl").write_text("".join(lines[:events]) + torn)
        (dst / "summary.json").unlink()
    if started_at is not None:
        summary = json.loads((dst / "summary.json").read_text())
        summary.update(started_at=started_at, run_id=name)
        (dst / "summary.json").write_text(json.dumps(summary))
    return dst


def test_a_killed_run_is_listed_with_what_its_logs_say(tmp_path: Path, run_dir: Path) -> None:
    ledger = jsonl(run_dir / "costs.jsonl")
    copy_run(run_dir, tmp_path / "runs", "killed", events=10)  # killed during round 2
    (row,) = json.loads(ok("runs", "--json", cwd=tmp_path))
    assert (row["run_id"], row["status"], row["end_reason"]) == ("killed", "killed?", "unfinished")
    assert (row["scenario"], row["rounds"], row["budget_usd"]) == ("review pair", 2, "1.0")
    assert (row["calls"], row["total_usd"]) == (2, ledger[-1]["total_usd"])
    assert "killed?" in ok("runs", cwd=tmp_path)
    shown = [json.loads(line) for line in ok("show", "killed", "--json", cwd=tmp_path).splitlines()]
    assert [m["id"] for m in shown] == ["m1", "m2"]  # m3 was logged after the kill point
    assert "the run was killed or is still going" in ok("show", "killed", cwd=tmp_path)


def test_runs_are_listed_newest_first_and_last_is_the_newest(tmp_path: Path, run_dir: Path) -> None:
    runs = tmp_path / "runs"
    copy_run(run_dir, runs, "old", started_at=1_000.0)
    copy_run(run_dir, runs, "new", started_at=3_000.0)
    killed = copy_run(run_dir, runs, "middle", events=5)
    first = json.loads((killed / "events.jsonl").read_text().splitlines()[0])
    first["t"] = 2_000.0
    lines = (killed / "events.jsonl").read_text().splitlines(keepends=True)
    (killed / "events.jsonl").write_text(json.dumps(first) + "\n" + "".join(lines[1:]))
    listed = json.loads(ok("runs", "--json", cwd=tmp_path))
    assert [r["run_id"] for r in listed] == ["new", "middle", "old"]
    assert json.loads(ok("costs", "last", "--json", cwd=tmp_path))["run_id"] == "new"


def test_last_tilde_n_is_the_nth_run_before_the_last(tmp_path: Path, run_dir: Path) -> None:
    runs = tmp_path / "runs"
    for name, started in (("old", 1_000.0), ("middle", 2_000.0), ("new", 3_000.0)):
        copy_run(run_dir, runs, name, started_at=started)
    found = {
        ref: json.loads(ok("costs", ref, "--json", cwd=tmp_path))["run_id"]
        for ref in ("last~0", "last~1", "last~2")
    }
    assert found == {"last~0": "new", "last~1": "middle", "last~2": "old"}
    done = sopbus("show", "last~3", cwd=tmp_path)
    assert done.returncode == 2 and "runs/ holds 3 run(s)" in done.stderr
    assert "'last~2'" in done.stderr and "Traceback" not in done.stderr


def test_runs_in_an_empty_or_missing_directory(tmp_path: Path) -> None:
    assert json.loads(ok("runs", "--json", "--runs-dir", "nothing", cwd=tmp_path)) == []
    assert ok("runs", "--runs-dir", "nothing", cwd=tmp_path).strip() == "no runs in nothing/"


# -- RUN resolution -------------------------------------------------------------------------


def test_run_can_be_an_id_a_prefix_a_directory_or_last(work: Path, run_dir: Path) -> None:
    ids = {
        ref: json.loads(ok("costs", ref, "--json", cwd=work))["run_id"]
        for ref in (run_dir.name, run_dir.name[:18], str(run_dir), f"runs/{run_dir.name}", "last")
    }
    assert set(ids.values()) == {run_dir.name}


@pytest.mark.parametrize(
    ("ref", "runs_dir", "fragments"),
    [
        (
            "nope",
            "runs",
            ["no run 'nope'", "looked for runs/nope/", "the most recent runs in runs/"],
        ),
        ("last", "missing", ["cannot find the last run", "missing/ does not exist"]),
        ("last", "empty", ["cannot find the last run", "empty/ is empty"]),
        ("abc", "empty", ["cannot find run 'abc'", "empty/ is empty"]),
    ],
)
@pytest.mark.parametrize("command", ["show", "costs"])
def test_a_run_that_cannot_be_found_exits_2_saying_what_and_where(
    tmp_path: Path, run_dir: Path, command: str, ref: str, runs_dir: str, fragments: list[str]
) -> None:
    copy_run(run_dir, tmp_path / "runs", run_dir.name)
    (tmp_path / "empty").mkdir()
    done = sopbus(command, ref, "--runs-dir", runs_dir, cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("sopbus: error: ") and "Traceback" not in done.stderr
    assert all(f in done.stderr for f in fragments), done.stderr


def test_an_ambiguous_prefix_exits_2_naming_the_candidates(tmp_path: Path, run_dir: Path) -> None:
    copy_run(run_dir, tmp_path / "runs", "2026-a")
    copy_run(run_dir, tmp_path / "runs", "2026-b")
    done = sopbus("show", "2026", cwd=tmp_path)
    assert done.returncode == 2
    assert (
        "run '2026' is ambiguous" in done.stderr
        and "2026-a" in done.stderr
        and "2026-b" in done.stderr
    )


# -- show -----------------------------------------------------------------------------------


def test_show_json_is_the_message_timeline(work: Path) -> None:
    shown = [json.loads(line) for line in ok("show", "last", "--json", cwd=work).splitlines()]
    assert [
        (m["id"], m["round"], m["from"], m["to"], m["cause_by"], m["parents"]) for m in shown
    ] == [
        ("m1", 0, "Boss", ["Writer"], "UserRequirement", []),
        ("m2", 1, "Writer", ["Rita"], "Draft", ["m1"]),
        ("m3", 2, "Rita", [], "Review", ["m2"]),
    ]
    assert [m["undelivered"] for m in shown] == [None, None, "no role watches Review"]
    assert shown[0]["content"] == "a todo app for the command line"


def test_show_table_has_one_row_per_message(work: Path) -> None:
    shown = [json.loads(line) for line in ok("show", "last", "--json", cwd=work).splitlines()]
    table = ok("show", "last", cwd=work)
    rows = {m["id"]: [ln for ln in table.splitlines() if f" {m['id']} " in ln] for m in shown}
    assert all(len(found) == 1 for found in rows.values()), table
    assert all(word in rows["m2"][0] for word in (" 1 ", "Writer", "Rita", "Draft", "## Title"))
    assert all(word in rows["m3"][0] for word in (" 2 ", "Rita", "undelivered", "Review"))
    assert "completed (idle) after 3 rounds; 3 messages, 1 undelivered" in table


# -- costs ----------------------------------------------------------------------------------


def test_costs_json_totals_equal_the_ledger_and_the_summary(work: Path, run_dir: Path) -> None:
    ledger = jsonl(run_dir / "costs.jsonl")
    summary = json.loads((run_dir / "summary.json").read_text())
    report = json.loads(ok("costs", run_dir.name, "--json", cwd=work))
    assert list(report) == COSTS_KEYS
    total = sum(Decimal(line["cost_usd"]) for line in ledger)
    assert Decimal(report["total_usd"]) == total == Decimal(summary["total_usd"]) > 0
    assert (report["run_id"], report["budget_usd"], report["calls"]) == (run_dir.name, "1.0", 2)
    for key, field in (("by_role", "role"), ("by_action", "action"), ("by_model", "model")):
        expected: dict[str, Decimal] = {}
        for line in ledger:
            expected[line[field]] = expected.get(line[field], Decimal(0)) + Decimal(
                line["cost_usd"]
            )
        assert {k: Decimal(v["cost_usd"]) for k, v in report[key].items()} == expected
    assert set(report["by_role"]) == {"Writer", "Rita"}
    assert report["by_role"]["Rita"]["prompt_tokens"] == ledger[1]["prompt_tokens"]


def test_costs_table_groups_and_totals(work: Path, run_dir: Path) -> None:
    table = ok("costs", "last", cwd=work)
    for heading in ("by role", "by action", "by model"):
        assert heading in table
    assert f"costs of run {run_dir.name}" in table
    assert "of $1.00" in table and "2 calls" in table
    (model_row,) = [ln for ln in table.splitlines() if "│ gpt-4o-mini" in ln]
    assert " 2 " in model_row and "2 ok" in model_row
    assert "would have cost at gpt-4o-mini prices" in table  # the run was simulated


def test_costs_csv_is_the_ledger(work: Path, run_dir: Path) -> None:
    ledger = jsonl(run_dir / "costs.jsonl")
    rows = list(csv.DictReader(io.StringIO(ok("costs", "last", "--csv", cwd=work))))
    assert len(rows) == len(ledger) == 2
    for row, line in zip(rows, ledger, strict=True):
        assert (int(row["seq"]), row["role"], row["action"], row["model"]) == (
            line["seq"],
            line["role"],
            line["action"],
            line["model"],
        )
        assert Decimal(row["cost_usd"]) == Decimal(line["cost_usd"])


def expected_cost(
    ledger: list[dict[str, Any]], inp: Decimal, out: Decimal, cached: Decimal
) -> Decimal:
    return sum(
        (
            (line["prompt_tokens"] - line["cached_tokens"]) * inp
            + line["cached_tokens"] * cached
            + line["completion_tokens"] * out
        )
        / Decimal(1_000_000)
        for line in ledger
    )


def test_reprice_on_a_packaged_model(work: Path, run_dir: Path) -> None:
    ledger = jsonl(run_dir / "costs.jsonl")
    price = PriceBook.load().price("gpt-4o")
    report = json.loads(ok("costs", "last", "--json", "--reprice", "gpt-4o", cwd=work))
    assert list(report) == [*COSTS_KEYS, "repriced_to", "actual_total_usd"]
    want = expected_cost(ledger, price.input, price.output, price.cached_input)
    assert Decimal(report["total_usd"]) == want
    assert want != Decimal(report["actual_total_usd"])
    assert Decimal(report["actual_total_usd"]) == sum(Decimal(line["cost_usd"]) for line in ledger)
    assert list(report["by_model"]) == ["gpt-4o"] and report["repriced_to"] == "gpt-4o"
    table = ok("costs", "last", "--reprice", "gpt-4o", cwd=work)
    assert "repriced on gpt-4o: the same tokens would have cost $" in table
    csv_rows = list(
        csv.DictReader(io.StringIO(ok("costs", "last", "--csv", "--reprice", "gpt-4o", cwd=work)))
    )
    assert {row["model"] for row in csv_rows} == {"gpt-4o"}
    assert Decimal(csv_rows[-1]["total_usd"]) == want


def test_reprice_uses_the_runs_own_prices(work: Path, run_dir: Path) -> None:
    # house-model is priced only in the scenario's [prices] (input 1.0, output 2.0).
    report = json.loads(ok("costs", "last", "--json", "--reprice", "house-model", cwd=work))
    want = expected_cost(jsonl(run_dir / "costs.jsonl"), Decimal(1), Decimal(2), Decimal(1))
    assert Decimal(report["total_usd"]) == want > 0


def test_reprice_on_an_unpriced_model_exits_2(work: Path) -> None:
    done = sopbus("costs", "last", "--reprice", "gpt-9-imaginary", cwd=work)
    assert done.returncode == 2 and done.stdout == ""
    assert "no price for model 'gpt-9-imaginary'" in done.stderr and "[prices." in done.stderr


def test_json_and_csv_are_exclusive(work: Path) -> None:
    done = sopbus("costs", "last", "--json", "--csv", cwd=work)
    assert done.returncode == 2 and "not allowed with argument" in done.stderr


# -- validate -------------------------------------------------------------------------------


def test_validate_prints_the_watch_graph_and_warns_about_the_unwatched_action(
    tmp_path: Path,
) -> None:
    lines = ok("validate", PAIR, cwd=tmp_path).splitlines()
    assert lines[0] == f"{PAIR}: ok"
    start = lines.index("watch graph (who watches what, who publishes what):")
    assert lines[start + 1 : start + 11] == [
        "  Writer (Technical Writer)  watches UserRequirement; publishes Draft",
        "  Rita (Reviewer)            watches Draft; publishes Review",
        "routes:",
        "  Boss --UserRequirement--> Writer  (first message)",
        "  Writer --Draft--> Rita",
        "  Rita --Review--> (nobody: undelivered)",
        "max_tokens (the longest answer each action's calls ask for):",
        "  Writer  Draft 256",
        "  Rita    Review 256",
        "warning: action Review (published by Rita) is watched by nobody; its messages "
        "will be recorded as undelivered",
    ]


def mermaid_edges(text: str) -> set[tuple[str, str, str, str]]:
    """(from, arrow, action, to) with node ids replaced by their labels' first line."""
    import re

    names = {
        m[1]: m[2] for m in re.finditer(r'^\s+(\w+)\W*"([^"<]*)', text, re.M) if "|" not in m[0]
    }
    return {
        (names[m[1]], m[2], m[3], names[m[4]])
        for m in re.finditer(r'^\s+(\w+) (-->|==>|-\.->)\|"([^"]*)"\| (\w+)$', text, re.M)
    }


def test_validate_mermaid_prints_a_flowchart_with_the_routes(tmp_path: Path) -> None:
    done = sopbus("validate", PAIR, "--mermaid", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "flowchart LR"
    assert mermaid_edges(done.stdout) == {
        ("Boss", "-->", "UserRequirement", "Writer"),
        ("Writer", "-->", "Draft", "Rita"),
        ("Rita", "-.->", "Review", "undelivered"),
    }
    assert "ok" not in done.stdout  # only the chart, so that it can be piped to a .mmd file
    assert "warning: action Review (published by Rita) is watched by nobody" in done.stderr


def test_validate_names_routes_by_send_to_and_cycles(tmp_path: Path) -> None:
    text = PAIR.read_text().replace('watch = ["Draft"]', 'watch = ["Draft"]\nsend_to = ["Writer"]')
    text = text.replace('watch = ["UserRequirement"]', 'watch = ["UserRequirement", "Review"]')
    path = tmp_path / "loop.toml"
    path.write_text(text)
    out = ok("validate", path, cwd=tmp_path)
    assert "  Rita --Review--> Writer  (by name)" in out
    assert "warning: cycle Rita -> Writer -> Rita is bounded only by [run].max_rounds" in out
    assert "watched by nobody" not in out
    chart = ok("validate", path, "--mermaid", cwd=tmp_path)
    assert ("Rita", "==>", "Review", "Writer") in mermaid_edges(chart)


def test_a_typo_in_watch_exits_2_with_the_closest_name(tmp_path: Path) -> None:
    path = tmp_path / "typo.toml"
    path.write_text(PAIR.read_text().replace('watch = ["Draft"]', 'watch = ["Drafts"]'))
    for args in (("validate", path), ("validate", path, "--mermaid"), ("run", path, "--quiet")):
        done = sopbus(*args, cwd=tmp_path)
        assert done.returncode == 2 and done.stdout == ""
        assert (
            "unknown action 'Drafts' at $.roles[1].watch[0] (did you mean 'Draft'?)" in done.stderr
        )
        assert "Traceback" not in done.stderr
    assert not (tmp_path / "runs").exists()


# -- roles ----------------------------------------------------------------------------------

REFERENCE = """
import json, roles.builtin
from sopbus.roles import registry
rows = []
for cls in registry.roles.values():
    try:
        role = cls()
    except Exception:
        continue
    rows.append([cls.name, role.profile, [a.name for a in role.actions], list(role.watch_order)])
print(json.dumps(rows))
"""


def test_roles_lists_the_builtin_registry(tmp_path: Path) -> None:
    listed = json.loads(ok("roles", "--json", cwd=tmp_path))
    assert all(
        set(row) == {"name", "profile", "goal", "actions", "watch", "react_mode", "module"}
        for row in listed
    )
    assert all(isinstance(n, str) for row in listed for n in (*row["actions"], *row["watch"]))
    # A fresh process that resolves each built-in role as a team would (instances resolve
    # their actions and watch list by name): the listing says the same.
    done = subprocess.run(
        [sys.executable, "-c", REFERENCE],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    by_name = {row["name"]: row for row in listed}
    for name, profile, actions, watch in json.loads(done.stdout):
        assert (by_name[name]["profile"], by_name[name]["actions"], by_name[name]["watch"]) == (
            profile,
            actions,
            watch,
        )
    # Roles declared by a scenario live in that scenario's registry, not among the built-ins.
    assert not {"Writer", "Rita"} & set(by_name)


def test_roles_table_names_every_role_with_its_profile_actions_and_watch(tmp_path: Path) -> None:
    listed = json.loads(ok("roles", "--json", cwd=tmp_path))
    table = ok("roles", cwd=tmp_path)
    if not listed:
        assert "no built-in roles are registered" in table
        return
    # Stacked (the watch lists are too long for a line): each role's name and profile head a
    # line of their own, its actions and watched actions follow, indented.
    heads = [ln for ln in table.splitlines() if ln and not ln.startswith(" ")]
    assert heads[0] == "built-in roles"
    assert heads[1:] == [f"{r['name']}  {r['profile']}".strip() for r in listed]
    words = " ".join(table.split())
    for row in listed:
        for key in ("actions", "watch"):
            assert f"{key} {', '.join(row[key]) or '-'}" in words, (row["name"], key)
