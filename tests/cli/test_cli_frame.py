"""The frame of the ``sopbus`` command line: commands, flags, exit codes, error output and
the import weight of ``--help``. Most tests run ``python -m sopbus`` as a user would."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

import pytest

from sopbus.bus import ConfigError
from sopbus.cli import ExitCode, _args, _cmd_run, _cmd_validate, main
from sopbus.cli._app import build_parser
from support.cli import ARGV, sopbus
from support.paths import DATA, ROOT

BAD = DATA / "bad_scenarios"
HEAVY = (
    "trio",
    "openai",
    "rich",
    "pydantic",
    "loguru",
    "bpe_openai",
    "sopbus.roles",
    "sopbus.sops",
)


def heavy(modules: set[str]) -> list[str]:
    """The packages of ``HEAVY`` that ``modules`` reach into."""
    return sorted(h for h in HEAVY if any(m == h or m.startswith(h + ".") for m in modules))


def good_file(directory: Path) -> Path:
    (directory / "fixtures").mkdir()
    # A real fixture file: validate loads it as run does (an empty one is refused by both).
    (directory / "fixtures" / "team.toml").write_text(
        "simulated = true\n[[fixture]]\naction = \"WritePRD\"\nresponses = ['{}']\n",
        encoding="utf-8",
    )
    path = directory / "ok.toml"
    path.write_text(
        '[scenario]\nname = "demo"\nsop = "software_company"\nidea = "a todo CLI"\n'
        '[run]\nbudget_usd = 0.5\n[llm]\nfixtures = ["fixtures/team.toml"]\n'
        '[sop]\nreview = true\n[[roles]]\nname = "Rita"\nprofile = "Code Reviewer"\n'
        'watch = ["WriteCode"]\nactions = ["ReviewCode"]\n'
        '[actions.ReviewCode]\ninstruction = "Review."\n'
        'output = { approved = "bool", problems = "list[str]" }\n'
        '[[inject]]\nround = 20\ncontent = "late"\n',
        encoding="utf-8",
    )
    return path


def test_exit_codes_are_the_documented_ones() -> None:
    assert [int(c) for c in ExitCode] == [0, 1, 2, 3, 4, 5, 130]
    assert (
        ExitCode.COMPLETED,
        ExitCode.FAILED,
        ExitCode.USAGE,
        ExitCode.BUDGET_EXHAUSTED,
        ExitCode.VERDICT_FAILED,
    ) == (0, 1, 2, 3, 4)


def test_help_lists_the_commands_and_exit_codes() -> None:
    done = sopbus("--help")
    assert done.returncode == 0
    assert done.stdout.index("run ") < done.stdout.index("validate ")
    assert "3  budget exhausted" in done.stdout
    assert "4  completed, but the SOP's verdict failed" in done.stdout
    assert "130  interrupted (Ctrl-C)" in done.stdout


def test_version_prints_the_installed_version() -> None:
    from importlib.metadata import version

    done = sopbus("--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"sopbus {version('sopbus')}"


def test_help_imports_nothing_heavy() -> None:
    # -X importtime lists every module imported; `--help` must stay clear of these.
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "sopbus", "--help"],
        cwd=ROOT,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0
    imported = {
        line.rsplit("|", 1)[1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    assert "sopbus.cli._app" in imported  # the listing is real
    # sopbus/__init__.py and sopbus/bus/__init__.py re-export many names, so this needs them
    # to load their heavy modules (gateway, openai, tokens, environment) lazily; see
    # bench/cli_help.py.
    assert heavy(imported) == []


def test_the_cli_frame_itself_adds_no_heavy_import() -> None:
    # What sopbus.cli imports on top of `import sopbus.bus`: the frame's own share of --help.
    code = (
        "import sys, sopbus.bus; before = set(sys.modules)\n"
        "from sopbus.cli._app import build_parser; build_parser()\n"
        f"heavy = {HEAVY!r}\n"
        "print(sorted({h for h in heavy for m in set(sys.modules) - before\n"
        "             if m == h or m.startswith(h + '.')}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_no_command_is_a_usage_error(cli: Callable[..., subprocess.CompletedProcess[str]]) -> None:
    done = cli()
    assert done.returncode == 2
    assert "required: COMMAND" in done.stderr


def test_validate_prints_a_summary_of_a_good_file(tmp_path: Path) -> None:
    done = sopbus("validate", good_file(tmp_path))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"{tmp_path / 'ok.toml'}: ok"
    assert "  scenario  demo" in lines
    assert "  sop       software_company (options: review)" in lines
    assert (
        "  run       rounds mode, at most 10 rounds, budget $0.50, seed 0, runs in runs/" in lines
    )
    assert f"  fixture   {tmp_path.resolve() / 'fixtures' / 'team.toml'}" in lines
    assert "  role      Rita (Code Reviewer); watches WriteCode; actions ReviewCode" in lines
    assert "  action    ReviewCode -> approved: bool, problems: list[str]" in lines
    assert lines[-1].startswith("warning: $.inject[0].round: round 20 is after the last round")


def test_validate_on_a_broken_file_exits_2_with_the_message(tmp_path: Path) -> None:
    done = sopbus("validate", BAD / "run_unknown_key.toml")
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith(
        f"sopbus: error: {BAD / 'run_unknown_key.toml'}: unknown key "
        "`max_round` - at `$.run.max_round`"
    )
    assert "did you mean `max_rounds`?" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("path", sorted((ROOT / "scenarios").glob("*.toml")), ids=lambda p: p.stem)
def test_validate_passes_on_every_shipped_scenario(path: Path) -> None:
    # A subprocess, as a user runs it: other tests register roles into the process's registry.
    done = sopbus("validate", path)
    assert done.returncode == ExitCode.COMPLETED, done.stderr
    assert done.stdout.startswith(f"{path}: ok\n") and "watch graph" in done.stdout


@pytest.mark.parametrize("path", sorted(BAD.glob("*.toml")), ids=lambda p: p.stem)
def test_validate_in_process_fails_on_every_broken_file(
    path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate", str(path)]) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert err.startswith(f"sopbus: error: {path}: ")
    fragments = [
        line.removeprefix("# expect: ")
        for line in path.read_text().splitlines()
        if line.startswith("# expect: ")
    ]
    assert fragments and all(f in err for f in fragments)


def test_validate_on_a_missing_file(tmp_path: Path) -> None:
    done = sopbus("validate", tmp_path / "nope.toml")
    assert done.returncode == 2
    assert done.stderr == f"sopbus: error: {tmp_path / 'nope.toml'}: no such scenario file\n"


def test_run_rejects_bad_flags_before_loading_anything(tmp_path: Path) -> None:
    done = sopbus("run", tmp_path / "nope.toml", "--budget", "-1")
    assert done.returncode == 2
    assert "argument --budget: expected an amount of USD greater than 0, got '-1'" in done.stderr
    done = sopbus("run", tmp_path / "nope.toml", "--mode", "later")
    assert done.returncode == 2
    assert "argument --mode: invalid choice: 'later'" in done.stderr


def test_run_reports_a_broken_scenario_as_a_config_error() -> None:
    done = sopbus("run", BAD / "bad_mode.toml", "--quiet")
    assert done.returncode == 2
    assert "- at `$.run.mode`" in done.stderr and "Traceback" not in done.stderr


def test_run_parses_every_flag(tmp_path: Path) -> None:
    args = build_parser().parse_args(
        [
            "run",
            "s.toml",
            "--idea",
            "a game",
            "--provider",
            "openai",
            "--model",
            "gpt-4o",
            "--base-url",
            "http://127.0.0.1:9",
            "--budget",
            "0.30",
            "--max-rounds",
            "4",
            "--seed",
            "3",
            "--mode",
            "events",
            "--runs-dir",
            "out",
            "--record",
            "tape.jsonl",
            "--quiet",
        ]
    )
    assert args.handler is _cmd_run.run
    assert (args.scenario, args.record, args.quiet) == (Path("s.toml"), Path("tape.jsonl"), True)
    assert _cmd_run.overrides(args) == {
        "idea": "a game",
        "provider": "openai",
        "model": "gpt-4o",
        "base_url": "http://127.0.0.1:9",
        "budget_usd": Decimal("0.30"),
        "max_rounds": 4,
        "seed": 3,
        "mode": "events",
        "runs_dir": "out",
    }
    bare = build_parser().parse_args(["run", "s.toml"])
    assert _cmd_run.overrides(bare) == {} and (bare.record, bare.quiet) == (None, False)


@pytest.mark.parametrize(
    ("text", "error"), [("0", "greater than 0"), ("nan", "greater than 0"), ("abc", "such as 3.0")]
)
def test_budget_flag_rejects_non_positive_amounts(text: str, error: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=error):
        _args.usd(text)


def test_config_error_from_a_command_is_printed_without_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def fail(args: argparse.Namespace) -> int:
        raise ConfigError("x.toml: something - at `$.run`")

    monkeypatch.setattr(_cmd_validate, "run", fail)
    assert main(["validate", "x.toml"]) == 2
    assert capsys.readouterr().err == "sopbus: error: x.toml: something - at `$.run`\n"


def test_ctrl_c_exits_130(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupted(args: argparse.Namespace) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(_cmd_validate, "run", interrupted)
    assert main(["validate", "x.toml"]) == 130
    assert capsys.readouterr().err == "sopbus: interrupted\n"


def test_a_reader_that_goes_away_gets_no_traceback() -> None:
    # `sopbus roles --json | head -1`: the pipe closes before sopbus has written everything.
    env = dict(os.environ)
    proc = subprocess.Popen(
        [*ARGV, "roles", "--json"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(timeout=120) == ExitCode.FAILED
    assert err == ""


def test_ctrl_c_inside_a_run_exits_130_too(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupted_run(args: argparse.Namespace) -> int:  # trio's nurseries wrap the interrupt
        raise BaseExceptionGroup("run", [BaseExceptionGroup("turns", [KeyboardInterrupt()])])

    monkeypatch.setattr(_cmd_validate, "run", interrupted_run)
    assert main(["validate", "x.toml"]) == 130
    assert capsys.readouterr().err == "sopbus: interrupted\n"

    def buggy_run(args: argparse.Namespace) -> int:
        raise ExceptionGroup("run", [RuntimeError("a bug")])

    monkeypatch.setattr(_cmd_validate, "run", buggy_run)
    with pytest.raises(ExceptionGroup):
        main(["validate", "x.toml"])


def test_other_exceptions_are_bugs_and_propagate(monkeypatch: pytest.MonkeyPatch) -> None:
    def buggy(args: argparse.Namespace) -> int:
        raise RuntimeError("a bug")

    monkeypatch.setattr(_cmd_validate, "run", buggy)
    with pytest.raises(RuntimeError, match="a bug"):
        main(["validate", "x.toml"])


def test_command_return_value_is_the_exit_code(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_cmd_validate, "run", lambda args: ExitCode.BUDGET_EXHAUSTED)
    assert main(["validate", "x.toml"]) == 3
