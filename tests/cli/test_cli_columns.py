"""The read commands at 80 columns, and the usage errors that name the closest valid value
(issue 30, items 8 and 9). At 80 columns every line fits and nothing that tells rows apart
is cut: a role's name, a variant's settings, the digits of a spend. Every command is a
subprocess (``python -m sopbus``), as a user runs it."""

from __future__ import annotations

import json
import re
from decimal import Decimal
from pathlib import Path

import pytest

from sopbus.bus.money import money
from support.cli import sopbus
from support.paths import ROOT

pytestmark = pytest.mark.slow  # every test here starts sopbus as a subprocess

WIDTH = 80
SHIPPED = sorted((ROOT / "scenarios").glob("*.toml"))


def at_80(*args: str | Path, cwd: Path) -> str:
    done = sopbus(*args, cwd=cwd, columns=WIDTH)
    assert done.returncode == 0, done.stderr
    too_long = [line for line in done.stdout.splitlines() if len(line) > WIDTH]
    assert not too_long, done.stdout
    assert "…" not in done.stdout, done.stdout
    return done.stdout


def words(text: str) -> str:
    """``text`` with its line breaks and runs of spaces as single spaces (wrapped text)."""
    return " ".join(text.split())


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with a run of the software company and a sweep of it: two review-round
    limits by two models, one seed, so two variants differ only in a spend's digits."""
    work = tmp_path_factory.mktemp("columns")
    run = sopbus("run", "software_company", "--runs-dir", "runs", "--quiet", cwd=work)
    assert run.returncode == 0, run.stderr
    sweep = sopbus(
        "sweep",
        "software_company",
        "--seeds",
        "1",
        "--set",
        "sop.max_review_rounds=1,2",
        "--set",
        "llm.model=gpt-4o-mini,gpt-4o",
        "--runs-dir",
        "sweep-runs",
        cwd=work,
        columns=WIDTH,
        timeout=600,
    )
    assert sweep.returncode == 0, sweep.stderr
    assert all(len(line) <= WIDTH for line in sweep.stdout.splitlines()), sweep.stdout
    return work


# -- item 8: each command fits 80 columns, whole -----------------------------------------


def test_sweeps_shows_each_sweep_whole_at_80_columns(work: Path) -> None:
    (row,) = json.loads(sopbus("sweeps", "--json", cwd=work).stdout)
    table = at_80("sweeps", cwd=work)
    assert re.search(rf"^{row['sweep_id']}(\s|$)", table, re.M), table
    spend = f"{money(Decimal(row['spent_usd']))} / {money(Decimal(row['budget_usd']))}"
    assert spend in table and row["state"] in table and f"{row['ended']}/{row['runs']}" in table


def test_sweep_show_tells_the_variants_apart_at_80_columns(work: Path) -> None:
    shown = json.loads(sopbus("sweep-show", "last", "--json", cwd=work).stdout)
    table = at_80("sweep-show", "last", cwd=work)
    assert shown["sweep_id"] in words(table)
    for row in shown["variants"]:
        # The settings whole, beside the variant's id.
        assert re.search(rf"^{row['variant']}\s+{re.escape(row['settings'])}", table, re.M)
        spend = " / ".join(
            money(Decimal(row[k]).quantize(Decimal("0.000001")))
            for k in ("spend_mean_usd", "spend_median_usd", "spend_max_usd")
        )
        assert spend in words(table), (spend, table)
    assert len({row["settings"] for row in shown["variants"]}) == 4


def test_roles_names_every_role_whole_at_80_columns(work: Path) -> None:
    listed = json.loads(sopbus("roles", "--json", cwd=work).stdout)
    table = at_80("roles", cwd=work)
    for row in listed:
        assert re.search(rf"^{row['name']}(\s|$)", table, re.M), row["name"]
        for key in ("actions", "watch"):
            assert f"{key} {', '.join(row[key]) or '-'}" in words(table), (row["name"], key)


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_validate_wraps_under_its_labels_at_80_columns(path: Path, tmp_path: Path) -> None:
    text = at_80("validate", path, cwd=tmp_path)
    assert text.startswith(f"{path}: ok\n") and "watch graph" in text
    wide = sopbus("validate", path, cwd=tmp_path, columns=1000).stdout
    assert max(map(len, wide.splitlines())) > WIDTH  # there was something to wrap
    assert words(text) == words(wide)  # the same words, only wrapped


def test_prices_fit_80_columns(tmp_path: Path) -> None:
    listed = at_80("prices", cwd=tmp_path)
    assert "`sopbus prices MODEL` shows one and why." in words(listed)
    one = at_80("prices", "claude-sonnet-4-5", cwd=tmp_path)
    assert "matched: claude-sonnet-4-5 (Claude Sonnet 4.5) of Anthropic [anthropic]" in words(one)


def test_show_puts_its_title_and_ending_on_lines_of_their_own(work: Path) -> None:
    table = at_80("show", "last", "--runs-dir", "runs", "--round", "3", cwd=work)
    run_id = next((work / "runs").iterdir()).name
    lines = table.splitlines()
    assert lines[0] == f"messages of run {run_id}"
    bottom = max(i for i, line in enumerate(lines) if line.startswith("└"))
    assert words("\n".join(lines[bottom + 1 :])).startswith("completed (idle) after")


# -- item 9: a usage error names what is valid ---------------------------------------------


def test_a_round_without_messages_is_a_usage_error_naming_the_rounds(work: Path) -> None:
    summary = json.loads(next((work / "runs").iterdir()).joinpath("summary.json").read_text())
    shown = [
        json.loads(line)
        for line in sopbus("show", "last", "--json", cwd=work).stdout.split("\n")
        if line
    ]
    last = max(m["round"] for m in shown)
    done = sopbus("show", "last", "--round", "99", cwd=work, columns=WIDTH)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (
        f"sopbus: error: --round 99: no messages in round 99 (the run had {summary['rounds']} "
        f"rounds; its messages are in rounds 0 to {last}); did you mean `{last}`?\n"
    )


def test_filters_that_match_only_apart_say_so_and_exit_0(work: Path) -> None:
    done = sopbus("show", "last", "--role", "Alice", "--round", "0", cwd=work, columns=WIDTH)
    assert done.returncode == 0, done.stderr
    assert "┃" not in done.stdout  # no empty table
    assert "matches --role Alice --round 0 together" in words(done.stdout)


def test_a_mistyped_command_suggests_the_closest(tmp_path: Path) -> None:
    done = sopbus("shwo", cwd=tmp_path)
    assert done.returncode == 2
    assert "invalid choice: 'shwo'; did you mean `show`?" in done.stderr


def test_an_unknown_option_is_the_commands_error_with_the_closest_option(tmp_path: Path) -> None:
    done = sopbus("run", "--budgt", "3", cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("usage: sopbus run ")  # run's usage, not the top level's
    assert "--max-rounds N" in done.stderr
    assert done.stderr.endswith(
        "sopbus run: error: unrecognized arguments: --budgt; did you mean `--budget`?\n"
    )
    two = sopbus("show", "last", "--rle", "Alex", "--rund", "1", cwd=tmp_path)
    assert two.returncode == 2 and two.stderr.startswith("usage: sopbus show ")
    assert "did you mean `--role` for --rle, `--round` for --rund?" in two.stderr
