"""Attacks on ``sopbus verify`` that take a part of the record away or swap it (issue 40,
items 1 and 5): a deleted ``summary.json`` or ``scenario.toml`` no longer makes a finished
run look unfinished, so a message rewritten and sealed again is found, with the key and
without; ``summary.json``'s restated fields are held against the log and the ledger; a
whole record copied in from another run of the same scenario is not this directory's; an
edited ``scenario.toml`` is found.

Runs are made with ``sopbus run`` on the embedded simulator and verified as a user does
(subprocess); each test changes a copy."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from sopbus.bus.store import verify_run
from support.cli import sopbus
from support.tamper import copy_run, reseal

KEY = "k3y-for-the-tests-" + "5e" * 16
NO_KEY = {"SOPBUS_SEAL_KEY": None}
SCENARIO = "scenarios/software_company.toml"
Records = list[dict[str, Any]]


def made(where: Path, *flags: str | Path) -> Path:
    where.mkdir(parents=True, exist_ok=True)
    done = sopbus("run", SCENARIO, "--runs-dir", where, "--quiet", *flags, env=NO_KEY)
    assert done.returncode == 0, done.stdout + done.stderr
    [run_dir] = [p for p in where.iterdir() if p.is_dir()]
    return run_dir


@pytest.fixture(scope="module")
def key_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("key") / "seal.key"
    path.write_text(KEY + "\n")
    return path


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return made(tmp_path_factory.mktemp("plain"))


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory, key_file: Path) -> Path:
    return made(tmp_path_factory.mktemp("keyed"), "--seal-key-file", key_file)


@pytest.fixture(scope="module")
def other(tmp_path_factory: pytest.TempPathFactory, key_file: Path) -> Path:
    """A second keyed run of the same scenario: the source of a copied record."""
    return made(tmp_path_factory.mktemp("other"), "--seal-key-file", key_file)


def verify(run_dir: Path, *args: str | Path) -> Any:
    return sopbus("verify", run_dir, *args, env=NO_KEY)


def not_intact(run_dir: Path, *args: str | Path) -> str:
    done = verify(run_dir, *args)
    out: str = done.stdout
    assert done.returncode == 1, out + done.stderr
    assert out.strip().endswith("NOT intact") and "\nintact\n" not in out, out
    return out


def forge_prd(records: Records) -> Records:
    """The PRD message says what its answers never did."""
    for record in records:
        message = record.get("message") or {}
        if record.get("kind") == "message_published" and message.get("cause_by") == "WritePRD":
            message["content"] = "FORGED: ship it without tests"
    return records


def forged(run_dir: Path, tmp_path: Path) -> Path:
    copy = copy_run(run_dir, tmp_path)
    reseal(copy / "events.jsonl", forge_prd)
    assert b"FORGED" in (copy / "events.jsonl").read_bytes()
    return copy


def unparsable(path: Path) -> None:
    path.write_text(path.read_text().replace("[run]", "[run", 1))


# -- item 1: one file deleted ----------------------------------------------------------------


def test_the_runs_verify_intact_untouched(plain: Path, keyed: Path, key_file: Path) -> None:
    for done in (verify(plain), verify(keyed, "--key-file", key_file)):
        assert done.returncode == 0 and done.stdout.strip().endswith("intact"), done.stdout


@pytest.mark.parametrize("with_key", [True, False], ids=["keyed", "unkeyed"])
def test_summary_deleted_and_a_message_rewritten_is_not_intact(
    with_key: bool, plain: Path, keyed: Path, key_file: Path, tmp_path: Path
) -> None:
    run_dir = forged(keyed if with_key else plain, tmp_path)
    (run_dir / "summary.json").unlink()
    out = not_intact(run_dir, *(("--key-file", key_file) if with_key else ()))
    assert f"{run_dir / 'summary.json'}: missing, but" in out
    if with_key:
        assert f"{run_dir / 'events.jsonl'}: changed since the keyed seal" in out
        assert f"{run_dir / 'summary.json'}: missing since the keyed seal" in out


@pytest.mark.parametrize("with_key", [True, False], ids=["keyed", "unkeyed"])
@pytest.mark.parametrize("how", ["deleted", "unparsable"])
def test_scenario_taken_away_and_a_message_rewritten_is_not_intact(
    how: str, with_key: bool, plain: Path, keyed: Path, key_file: Path, tmp_path: Path
) -> None:
    run_dir = forged(keyed if with_key else plain, tmp_path)
    scenario = run_dir / "scenario.toml"
    if how == "deleted":
        scenario.unlink()
    else:
        unparsable(scenario)
    out = not_intact(run_dir, *(("--key-file", key_file) if with_key else ()))
    said = "missing, but the run finished" if how == "deleted" else "changed since the run"
    assert f"{scenario}: {said}" in out
    if with_key:
        assert f"{scenario}: {'missing' if how == 'deleted' else 'changed'} since the keyed" in out


def test_summary_deleted_and_the_end_cut_is_found_with_the_key(
    keyed: Path, key_file: Path, tmp_path: Path
) -> None:
    """The run made to look killed (no summary, no run_ended): the seal says it ended."""
    run_dir = copy_run(keyed, tmp_path)
    reseal(run_dir / "events.jsonl", lambda rs: forge_prd(rs)[:-1])
    (run_dir / "summary.json").unlink()
    out = not_intact(run_dir, "--key-file", key_file)
    assert f"{run_dir / 'events.jsonl'}: changed since the keyed seal" in out


def test_an_unkeyed_run_made_to_look_killed_says_authenticity_needs_a_key(
    plain: Path, keyed: Path, tmp_path: Path
) -> None:
    """Without a key nothing says the run had ended: the forgery verifies as an unfinished
    run, and verify says that only a keyed seal would show it (issue 40: not more)."""
    run_dir = copy_run(plain, tmp_path)
    reseal(run_dir / "events.jsonl", lambda rs: forge_prd(rs)[:-1])  # run_ended dropped
    (run_dir / "summary.json").unlink()
    done = verify(run_dir)
    said = " ".join(done.stdout.split())  # the note wraps at the terminal's width
    assert "not sealed with a key, so this checks consistency, not authenticity" in said
    assert "such as a run made to look killed" in said and "--seal-key-file FILE" in said
    # Every unkeyed run says it, untouched too; a keyed one verified without its key says
    # that it is keyed instead.
    assert "authenticity needs a run made" in " ".join(verify(plain).stdout.split())
    without_key = " ".join(verify(keyed).stdout.split())
    assert "the run is keyed" in without_key and "not sealed with a key" not in without_key


def test_a_rewritten_message_is_named_once_the_summary_is_back(plain: Path, tmp_path: Path) -> None:
    run_dir = forged(plain, tmp_path)
    out = not_intact(run_dir)
    assert "message m2 (round 1, Alice WritePRD) is not what its recorded answers give" in out


# -- item 5: summary.json's other fields -----------------------------------------------------

EDITS: dict[str, Any] = {
    "messages": 80,
    "undelivered": 3,
    "model": "gpt-4o",
    "provider": "openai",
    "seed": 7,
    "scenario": "another-scenario",
    "overrun": {"provider": "sim", "round": 1, "role": "Alice", "action": "WritePRD"},
}


@pytest.mark.parametrize("key", list(EDITS))
def test_an_edited_summary_field_is_reported(key: str, plain: Path, tmp_path: Path) -> None:
    run_dir = copy_run(plain, tmp_path)
    path = run_dir / "summary.json"
    summary = json.loads(path.read_text())
    assert summary[key] != EDITS[key]
    summary[key] = EDITS[key]
    path.write_text(json.dumps(summary, indent=2))
    assert f"{path}: {key} is " in not_intact(run_dir, "--no-replay")


def test_the_summary_counts_are_the_logs(plain: Path) -> None:
    """What the cross-check compares with, on the untouched run."""
    summary = json.loads((plain / "summary.json").read_text())
    kinds = [json.loads(line)["kind"] for line in (plain / "events.jsonl").read_text().splitlines()]
    assert summary["messages"] == kinds.count("message_published") + kinds.count(
        "message_undelivered"
    )
    assert summary["undelivered"] == kinds.count("message_undelivered")
    assert summary["overrun"] is None


# -- item 5: a record copied from another run --------------------------------------------------

RECORD = ("events.jsonl", "costs.jsonl", "calls.jsonl", "summary.json")


@pytest.mark.parametrize("with_seal", [False, True], ids=["record", "record-and-seal"])
def test_a_record_copied_from_another_run_is_not_this_directorys(
    with_seal: bool, keyed: Path, other: Path, key_file: Path, tmp_path: Path
) -> None:
    run_dir = copy_run(keyed, tmp_path)
    assert other.name != run_dir.name
    for name in (*RECORD, *(("keyed_seal.json",) if with_seal else ())):
        shutil.copyfile(other / name, run_dir / name)
    out = not_intact(run_dir)
    assert f'run_started names run "{other.name}", not {run_dir.name}' in out
    out = not_intact(run_dir, "--key-file", key_file)
    if with_seal:
        assert f"seals run {other.name}, not {run_dir.name}" in out


# -- item 5: scenario.toml -------------------------------------------------------------------


@pytest.mark.parametrize("with_key", [True, False], ids=["keyed", "unkeyed"])
def test_the_scenario_budget_raised_or_the_file_deleted_is_reported(
    with_key: bool, plain: Path, keyed: Path, key_file: Path, tmp_path: Path
) -> None:
    run_dir = copy_run(keyed if with_key else plain, tmp_path)
    scenario = run_dir / "scenario.toml"
    text = scenario.read_text()
    assert 'budget_usd = "2.0"' in text
    scenario.write_text(text.replace('budget_usd = "2.0"', 'budget_usd = "200"'))
    flags = ("--key-file", key_file) if with_key else ()
    assert f"{scenario}: changed since the run wrote it" in not_intact(run_dir, *flags)
    scenario.unlink()
    assert f"{scenario}: missing, but the run finished" in not_intact(run_dir, *flags)


def unhashed(records: Records) -> Records:
    """The log as sopbus wrote it before run_started hashed the scenario."""
    records[0]["settings"].pop("scenario_sha256")
    return records


def test_a_run_from_before_the_scenario_hash_verifies_and_its_budget_is_checked(
    plain: Path, tmp_path: Path
) -> None:
    run_dir = copy_run(plain, tmp_path)
    reseal(run_dir / "events.jsonl", unhashed)
    done = verify(run_dir)
    assert done.returncode == 0, done.stdout
    assert "before sopbus hashed its scenario in run_started" in done.stdout
    scenario = run_dir / "scenario.toml"
    scenario.write_text(scenario.read_text().replace('budget_usd = "2.0"', 'budget_usd = "200"'))
    out = not_intact(run_dir)
    assert f'{scenario}: run.budget_usd is "200" but run_started says "2.0"' in out
    unparsable(scenario)
    assert f"{scenario}: not TOML" in not_intact(run_dir)


def test_a_log_removed_from_a_run_is_reported(plain: Path, tmp_path: Path) -> None:
    run_dir = copy_run(plain, tmp_path)
    (run_dir / "events.jsonl").unlink()
    # A finding (exit 1), by path and by id, not "no such run" (exit 2).
    for ref, runs_dir in ((str(run_dir), "runs"), (run_dir.name, str(run_dir.parent))):
        out = not_intact(Path(ref), "--runs-dir", runs_dir)
        assert f"error: {run_dir / 'events.jsonl'}: missing, but the run wrote" in out
        assert "in  records" not in out  # the log it lacks is named
    verdict = verify_run(run_dir)
    assert not verdict.intact
    assert any(
        f"{run_dir / 'events.jsonl'}: missing, but the run wrote" in p for p in verdict.problems
    )


def test_a_directory_with_no_run_files_is_no_run_to_verify(tmp_path: Path) -> None:
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "run.log").write_text("not a run\n")
    done = verify(tmp_path / "notes")
    assert done.returncode == 2 and "cannot find run" in done.stderr and done.stdout == ""


def test_a_line_after_run_ended_is_reported(plain: Path, tmp_path: Path) -> None:
    run_dir = copy_run(plain, tmp_path)

    def appended(records: Records) -> Records:
        return [*records, {"kind": "round_started", "round": 99, "turns": [], "t": 0}]

    reseal(run_dir / "events.jsonl", appended)
    assert "and nothing is logged after that" in not_intact(run_dir, "--no-replay")


# -- genuine runs keep verifying ---------------------------------------------------------------


@pytest.mark.parametrize("resume_keyed", [True, False], ids=["resumed-keyed", "resumed-plain"])
def test_a_keyed_run_stopped_by_its_budget_and_resumed_verifies(
    resume_keyed: bool, key_file: Path, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    flags = ("--seal-key-file", key_file)
    done = sopbus("run", SCENARIO, "--runs-dir", runs, "--quiet", "--budget", "0.001", *flags)
    assert done.returncode == 3, done.stdout + done.stderr
    [run_dir] = list(runs.iterdir())
    assert verify(run_dir, "--key-file", key_file).returncode == 0
    again = sopbus(
        "resume", run_dir, "--budget", "2", "--quiet", *(flags if resume_keyed else ()), env=NO_KEY
    )
    assert again.returncode == 0, again.stdout + again.stderr
    assert (run_dir / "events.1.jsonl").is_file()
    done = verify(run_dir)
    assert done.returncode == 0 and done.stdout.strip().endswith("intact"), done.stdout
    if resume_keyed:
        done = verify(run_dir, "--key-file", key_file)
        assert done.returncode == 0 and done.stdout.strip().endswith("intact"), done.stdout


def test_a_keyed_run_whose_resume_was_killed_verifies_and_keeps_its_sealed_log(
    key_file: Path, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    flags = ("--seal-key-file", key_file)
    done = sopbus("run", SCENARIO, "--runs-dir", runs, "--quiet", "--budget", "0.001", *flags)
    assert done.returncode == 3, done.stdout + done.stderr
    [run_dir] = list(runs.iterdir())
    killed = sopbus(
        "resume", run_dir, "--budget", "2", "--quiet", *flags,
        env={**NO_KEY, "SOPBUS_KILL_AT": "llm:journaled"},
    )  # fmt: skip
    assert killed.returncode == -9, killed.stdout + killed.stderr
    assert not (run_dir / "summary.json").exists()
    done = verify(run_dir, "--key-file", key_file)
    assert done.returncode == 0, done.stdout
    assert "resumed after the keyed seal" in done.stdout
    # The log the seal covers, now under its rotated name, edited and sealed again:
    reseal(run_dir / "events.1.jsonl", forge_prd)
    out = not_intact(run_dir, "--key-file", key_file)
    assert f"{run_dir / 'events.1.jsonl'} (the sealed events.jsonl): changed since" in out
