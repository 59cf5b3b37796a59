"""Every command of sopbus at 80 and at 200 columns (issue 41, "width and layout").

Each subcommand runs as a user runs it (a subprocess, ``COLUMNS`` set) on runs and sweeps
this module makes on the simulator. At each width no line of its output is longer than the
width, and nothing the wide terminal shows is lost at 80: every word of the 200-column
output is a word of the 80-column one (a cell wraps or moves under its row; a path too long
for a line breaks after one of its ``/``), so an id or a name is never cut. JSON, CSV and
Mermaid outputs are data for programs, not layout, and are not rendered here.

A command that makes something (a run, a sweep, a team) runs once per width in a copy of
the same folder; what it made is named the same in both outputs before they are compared
(its id, and the times and durations that differ from one run to the next).
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Sequence
from pathlib import Path

import pytest

from support.cli import sopbus
from support.otlp_server import otlp_collector

pytestmark = pytest.mark.slow  # every test here starts sopbus as a subprocess

NARROW, WIDE = 80, 200
_BOX = re.compile("[\u2500-\u257f]")  # rich's table borders, which differ with the width
# What differs from one run to the next: clock times, durations, a sweep's mean wall time.
_TIMES = re.compile(r"\d\d:\d\d:\d\d|\d+(\.\d+)? ?(ms|s)\b|(?<![$\d.])\d+\.\d\d\b")
# A path too long for a line breaks after a slash; the next line goes on with it.
_BROKEN_PATH = re.compile(r"/\n\s*")
# The scenarios the runs are made of: short and long role and action names, tool calls.
SCENARIOS = (
    "software_company",
    "software_company_reviewed",
    "book_writer",
    "repo_analyst",
    "guess_two_thirds",  # a population: one line per population in show and costs
)
# A one-role team and three tasks for the eval commands (tests/eval/data).
EVAL_DATA = Path(__file__).parent.parent / "eval" / "data"
EVAL_FILES = ("arith.toml", "arith_fixtures.toml", "arith.jsonl")
DEEP = "a/folder/whose/path/alone/is/longer/than/a/narrow/terminal/is/wide/so/it/must/break"


def words(text: str) -> set[str]:
    return set(_BOX.sub(" ", text).split())


# The headers of the cells that head a stacked row (an id, a name, a variant and its
# settings): the row's first line is those cells alone, unlabelled, as
# tests/cli/test_cli_commands.py pins it.
UNLABELLED = {"run", "sweep", "variant", "settings", "name", "profile", "id", "tool"}


def lost(wide: str, narrow: str) -> set[str]:
    """The words of ``wide`` that ``narrow`` does not show."""
    joined = _BROKEN_PATH.sub("/", narrow)
    return {w for w in words(wide) - words(narrow) - UNLABELLED if w not in joined}


def too_long(text: str, width: int) -> list[str]:
    return [line for line in text.splitlines() if len(line) > width]


def rendered(
    argv: Sequence[str | Path], cwd: Path, width: int, codes: tuple[int, ...] = (0,), **kw: str
) -> str:
    done = sopbus(*argv, cwd=cwd, columns=width, env=kw or None, timeout=600)
    assert done.returncode in codes, (argv, done.stdout, done.stderr)
    return done.stdout


def assert_fits(wide: str, narrow: str) -> None:
    assert not too_long(wide, WIDE), wide
    assert not too_long(narrow, NARROW), narrow
    missing = lost(wide, narrow)
    assert not missing, (sorted(missing), narrow)


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with a run of each of :data:`SCENARIOS` in ``runs/``, a sweep in
    ``sweeps/``, two runs killed in their fifth call (to resume) in ``killed/``, and a
    team in a folder whose path is longer than 80 columns."""
    work = tmp_path_factory.mktemp("width")
    ids = {}
    for name in SCENARIOS:
        before = set(listed(work / "runs"))
        done = sopbus("run", name, "--runs-dir", "runs", "--quiet", cwd=work)
        assert done.returncode == 0, done.stderr
        (ids[name],) = set(listed(work / "runs")) - before
    (work / "ids.json").write_text(json.dumps(ids))
    sweep = sopbus(
        "sweep", "software_company", "--seeds", "1", "--set", "sop.max_review_rounds=1,2",
        "--runs-dir", "sweep-runs", "--jobs", "1", cwd=work, timeout=600,
    )  # fmt: skip
    assert sweep.returncode == 0, sweep.stderr
    for _ in range(2):
        killed = sopbus(
            "run", "software_company", "--runs-dir", "killed", "--quiet", cwd=work,
            env={"SOPBUS_KILL_AT": "llm:answered#5"},
        )  # fmt: skip
        assert killed.returncode < 0, killed.stderr
    assert sopbus("new", DEEP, cwd=work).returncode == 0
    for name in EVAL_FILES:
        shutil.copy(EVAL_DATA / name, work / name)
    evaluated = sopbus("eval", "arith.toml", "--dataset", "arith.jsonl", "--epochs", "2", cwd=work)
    assert evaluated.returncode == 0, evaluated.stderr
    return work


def listed(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir()] if folder.is_dir() else []


def run_id(base: Path, scenario: str) -> str:
    ids: dict[str, str] = json.loads((base / "ids.json").read_text())
    return ids[scenario]


def reads(base: Path) -> dict[str, list[list[str]]]:
    """The commands that only read, by command, each with the arguments it is given."""
    sc, scr = run_id(base, "software_company"), run_id(base, "software_company_reviewed")
    ids = [run_id(base, s) for s in SCENARIOS]
    shipped = [*SCENARIOS, "code_and_run", "group_chat", "gated_writer"]
    return {
        "show": [["show", i] for i in ids] + [["show", i, "--full"] for i in ids],
        "runs": [["runs"]],
        "costs": [["costs", i] for i in ids],
        "diff": [["diff", sc, scr]],
        "examples": [["examples"]],
        "roles": [["roles"]],
        "sops": [["sops"]],
        "prices": [["prices"], ["prices", "gpt-4o-mini"]],
        "validate": [["validate", s] for s in shipped] + [["validate", f"{DEEP}/scenario.toml"]],
        "sweeps": [["sweeps"]],
        "sweep-show": [["sweep-show", "last"]],
        "verify": [["verify", sc]],
        "evals": [["evals"]],
        "eval-show": [["eval-show", "last"]],
        "populations": [["populations", run_id(base, "guess_two_thirds")]],
    }


def test_every_reading_command_fits_80_columns_and_shows_what_200_show(base: Path) -> None:
    for argv in (a for runs in reads(base).values() for a in runs):
        codes = (0, 5) if argv[0] == "diff" else (0,)
        wide = rendered(argv, base, WIDE, codes)
        narrow = rendered(argv, base, NARROW, codes)
        assert_fits(wide, narrow)


def test_show_keeps_every_id_and_name_whole_at_80_columns(base: Path) -> None:
    for scenario in SCENARIOS:
        rid = run_id(base, scenario)
        narrow = rendered(["show", rid], base, NARROW)
        assert not too_long(narrow, NARROW), narrow
        shown = {w.rstrip(",") for w in words(narrow)}
        assert rid in shown
        for line in rendered(["show", rid, "--json"], base, WIDE).splitlines():
            m = json.loads(line)
            assert {m["id"], m["from"], m["cause_by"], *m["to"]} <= shown, (m, narrow)
        events = (base / "runs" / rid / "events.jsonl").read_text().splitlines()
        for event in map(json.loads, events):
            if event.get("kind") == "tool_called" and "server" in event["data"]:
                data = event["data"]
                assert {event["role"], data["action"], f"{data['server']}.{data['tool']}"} <= shown


def made(before: set[str], folder: Path) -> list[str]:
    """What a command made in ``folder``: names of new run, sweep and team folders."""
    now = {
        p.name
        for d in ("runs", "sweeps", "killed", "sweep-runs", "evals")
        if (folder / d).is_dir()
        for p in (folder / d).iterdir()
    }
    return sorted(now - before, key=len)


def named_alike(text: str, new: list[str]) -> str:
    for n, name in enumerate(new):  # shortest first: a sweep's id is in its runs' ids
        text = text.replace(name, f"<made{n}>")
    return _TIMES.sub("<time>", text)


def twice(base: Path, tmp_path: Path, argv: Sequence[str | Path], **env: str) -> tuple[str, str]:
    """``argv`` once at each width, each in its own copy of ``base``; its outputs (stdout
    and stderr, where a run's and a sweep's progress goes) with what it made named alike."""
    out = []
    for width in (WIDE, NARROW):
        folder = tmp_path / str(width)
        shutil.copytree(base, folder, symlinks=True)
        before = {
            p.name
            for d in ("runs", "sweeps", "killed", "sweep-runs", "evals")
            if (folder / d).is_dir()
            for p in (folder / d).iterdir()
        }
        done = sopbus(*argv, cwd=folder, columns=width, env=env or None, timeout=600)
        assert done.returncode == 0, (argv, done.stdout, done.stderr)
        new = made(before, folder)
        out.append(named_alike(done.stdout + done.stderr, new))
    return out[0], out[1]


def killed_run(base: Path) -> str:
    return sorted(p.name for p in (base / "killed").iterdir())[0]


def writes(base: Path) -> dict[str, list[str]]:
    sc = run_id(base, "software_company")
    return {
        "run": ["run", "software_company", "--runs-dir", "runs"],
        "replay": ["replay", sc],
        "fork": ["fork", sc, "--at-round", "3", "--set", "sop.max_review_rounds=2"],
        "resume": ["resume", killed_run(base), "--runs-dir", "killed"],
        "report": ["report", sc],
        "new": ["new", "team"],
        "sweep": [
            "sweep",
            "software_company",
            "--seeds",
            "2",
            "--set",
            "sop.max_review_rounds=1,2",
            "--runs-dir",
            "sweep-runs",
            "--jobs",
            "1",
        ],
        "eval": ["eval", "arith.toml", "arith.toml", "--dataset", "arith.jsonl"],
    }


@pytest.mark.parametrize(
    "command", ["run", "replay", "fork", "resume", "report", "new", "sweep", "eval"]
)
def test_every_making_command_fits_80_columns(base: Path, tmp_path: Path, command: str) -> None:
    argv = writes(base)[command]
    if command in LIVE:
        # The live progress prints the rounds its polls saw, which differ from one run to
        # the next: its lines are held to the width here, its words compared without it.
        _, progress = twice(base, tmp_path / "live", argv)
        assert not too_long(progress, NARROW), progress
        argv = [*argv, "--quiet"]
    wide, narrow = twice(base, tmp_path, argv)
    assert_fits(wide, narrow)


LIVE = ("run", "replay", "fork", "resume")


def test_export_otel_fits_80_columns(base: Path, tmp_path: Path) -> None:
    with otlp_collector() as (endpoint, _):
        sc = run_id(base, "software_company")
        wide, narrow = twice(base, tmp_path, ["export-otel", sc, "--endpoint", endpoint])
    assert_fits(wide, narrow)


def test_every_commands_help_fits_80_columns(tmp_path: Path) -> None:
    for argv in ([], *([c] for c in commands())):
        wide = rendered([*argv, "--help"], tmp_path, WIDE)
        narrow = rendered([*argv, "--help"], tmp_path, NARROW)
        assert_fits(wide, narrow)


def commands() -> list[str]:
    """Every subcommand, as sopbus names them when one is mistyped."""
    done = sopbus("no-such-command")
    listed = done.stderr.rpartition("(choose from ")[2].partition(")")[0]
    return sorted(name.strip("' ") for name in listed.split(","))


def test_the_tests_here_cover_every_command(base: Path) -> None:
    # mcp speaks JSON-RPC on stdio, a2a serves HTTP until stopped and worker waits for
    # NATS: their terminal output is their help, rendered above for every command.
    covered = {*reads(base), *writes(base), "export-otel", "mcp", "a2a", "worker"}
    assert covered == set(commands())
