"""What ``sopbus verify`` sees beyond the chain (issue 28 items 7 and 8): the verdict is
sealed in the log, so an edited ``summary.json`` is reported and not believed; a message
edited or dropped and the log sealed again is found by replaying the recorded answers; a
file added to ``artifacts/`` or an artifact replaced by a link is reported; and a keyed
seal (HMAC) finds any rewrite at all, for whoever holds the key.

Runs are made with ``sopbus run`` on the embedded simulator; each test changes a copy."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from sopbus import RunOutcome
from support.cli import sopbus
from support.paths import ROOT
from support.tamper import copy_run, reseal

SCENARIOS = ROOT / "scenarios"
KEY = "k3y-for-the-tests-" + "9f" * 16
NO_KEY = {"SOPBUS_SEAL_KEY": None}


def made(where: Path, scenario: Path | str, env: dict[str, str | None] | None = None) -> Path:
    done = sopbus("run", scenario, "--runs-dir", where, "--quiet", env=env or NO_KEY)
    assert done.returncode in (0, 4), done.stdout + done.stderr
    [run_dir] = [p for p in where.iterdir() if p.is_dir()]
    return run_dir


@pytest.fixture(scope="module")
def failed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """camel_roleplay stopped by a turn limit of 1: completed, verdict failed."""
    where = tmp_path_factory.mktemp("failed")
    text = (SCENARIOS / "camel_roleplay.toml").read_text()
    assert "turn_limit = 30 " in text
    scenario = where / "camel.toml"
    text = text.replace('"fixtures/', f'"{SCENARIOS}/fixtures/').replace(
        "[scenario]\n", "[scenario]\nallow_outside = true  # the shipped fixtures\n", 1
    )
    scenario.write_text(text.replace("turn_limit = 30 ", "turn_limit = 1 "))
    return made(where / "runs", scenario)


@pytest.fixture(scope="module")
def company(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return made(tmp_path_factory.mktemp("company"), "scenarios/software_company.toml")


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return made(
        tmp_path_factory.mktemp("keyed"),
        "scenarios/software_company.toml",
        env={"SOPBUS_SEAL_KEY": KEY},
    )


def verify(run_dir: Path, *args: str | Path, env: dict[str, str | None] | None = None) -> Any:
    return sopbus("verify", run_dir, *args, env=env or NO_KEY)


def not_intact(run_dir: Path, *args: str | Path) -> str:
    done = verify(run_dir, *args)
    assert done.returncode == 1 and done.stdout.strip().endswith("NOT intact"), done.stdout
    return done.stdout


# -- item 7: the verdict ---------------------------------------------------------------------


def test_a_verdict_edited_to_passed_is_reported_and_not_believed(
    failed: Path, tmp_path: Path
) -> None:
    run_dir = copy_run(failed, tmp_path)
    path = run_dir / "summary.json"
    summary = json.loads(path.read_text())
    assert summary["verdict"]["passed"] is False
    summary["verdict"]["passed"] = True
    path.write_text(json.dumps(summary, indent=2))

    assert "summary.json: verdict is" in not_intact(run_dir)
    assert RunOutcome.open(run_dir).ok is False
    assert RunOutcome.open(run_dir).verdict.passed is False  # type: ignore[union-attr]
    (row,) = json.loads(sopbus("runs", "--json", "--runs-dir", run_dir.parent).stdout)
    assert row["verdict"]["passed"] is False


def test_the_failed_run_untouched_verifies_with_its_sealed_verdict(failed: Path) -> None:
    done = verify(failed)
    assert done.returncode == 0, done.stdout
    ended = [json.loads(line) for line in (failed / "events.jsonl").read_text().splitlines()][-1]
    assert ended["kind"] == "run_ended" and ended["verdict"]["passed"] is False


def test_a_run_from_before_the_sealed_verdict_says_it_is_not_checked(
    failed: Path, tmp_path: Path
) -> None:
    run_dir = copy_run(failed, tmp_path)

    def unsealed(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        records[-1].pop("verdict")
        return records

    reseal(run_dir / "events.jsonl", unsealed)
    done = verify(run_dir, "--no-replay")
    assert done.returncode == 0, done.stdout
    assert "before sopbus sealed its verdict" in done.stdout


# -- item 8: messages, artifacts -------------------------------------------------------------


def test_untouched_runs_verify_intact_with_their_messages_replayed(
    company: Path, tmp_path: Path
) -> None:
    done = verify(company)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "messages: 8, checked against a replay of the answers" in done.stdout
    book = made(tmp_path, "scenarios/book_writer.toml")
    done = verify(book)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "checked against a replay of the answers" in done.stdout


def edit_prd(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for record in records:
        message = record.get("message") or {}
        if message.get("cause_by") == "WritePRD":
            message["content"] = message["content"].replace("wordcount", "pwned", 1)
    return records


def drop_summary(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if (r.get("message") or {}).get("cause_by") != "SummarizeCode"]


def test_an_edited_message_sealed_again_is_named(company: Path, tmp_path: Path) -> None:
    run_dir = copy_run(company, tmp_path)
    reseal(run_dir / "events.jsonl", edit_prd)
    out = not_intact(run_dir)
    assert "message m2 (round 1, Alice WritePRD) is not what its recorded answers give" in out
    assert "pwned" in out


def test_a_dropped_message_sealed_again_is_found(company: Path, tmp_path: Path) -> None:
    run_dir = copy_run(company, tmp_path)
    reseal(run_dir / "events.jsonl", drop_summary)
    assert "is not what its recorded answers give" in not_intact(run_dir)


def test_an_edited_answer_sealed_again_is_found(company: Path, tmp_path: Path) -> None:
    run_dir = copy_run(company, tmp_path)

    def edit_answer(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        first = records[0]["completion"]
        first["text"] = first["text"].replace("wordcount", "pwned", 1)
        return records

    reseal(run_dir / "calls.jsonl", edit_answer)
    assert "message m2 (round 1, Alice WritePRD)" in not_intact(run_dir)


def test_a_file_added_to_the_artifacts_is_reported(company: Path, tmp_path: Path) -> None:
    run_dir = copy_run(company, tmp_path)
    (run_dir / "artifacts" / "docs" / "extra.md").write_text("not from the run\n")
    assert "artifacts/docs/extra.md: not written by the run" in not_intact(run_dir, "--no-replay")


def test_an_artifact_replaced_by_a_link_is_reported(company: Path, tmp_path: Path) -> None:
    run_dir = copy_run(company, tmp_path)
    prd = run_dir / "artifacts" / "docs" / "prd.md"
    outside = tmp_path / "prd.md"
    outside.write_bytes(prd.read_bytes())  # the same bytes: only the link gives it away
    prd.unlink()
    prd.symlink_to(outside)
    assert "artifacts/docs/prd.md: a symbolic link" in not_intact(run_dir, "--no-replay")


def test_artifacts_replaced_by_a_linked_folder_are_reported(company: Path, tmp_path: Path) -> None:
    run_dir = copy_run(company, tmp_path)
    artifacts = run_dir / "artifacts"
    artifacts.rename(tmp_path / "elsewhere")
    artifacts.symlink_to(tmp_path / "elsewhere")
    out = not_intact(run_dir, "--no-replay")
    assert f"{artifacts}: a symbolic link (to {tmp_path / 'elsewhere'})" in out


def test_a_passed_verdict_edited_to_failed_is_reported_too(company: Path, tmp_path: Path) -> None:
    run_dir = copy_run(company, tmp_path)
    path = run_dir / "summary.json"
    summary = json.loads(path.read_text())
    summary["verdict"] = None
    path.write_text(json.dumps(summary, indent=2))
    assert "summary.json: verdict is null but run_ended" in not_intact(run_dir, "--no-replay")
    assert RunOutcome.open(run_dir).verdict is not None


# -- item 8: the keyed seal -------------------------------------------------------------------


@pytest.fixture
def key_file(tmp_path: Path) -> Path:
    path = tmp_path / "seal.key"
    path.write_text(KEY + "\n")
    return path


def test_the_key_is_never_written_to_the_run(keyed: Path) -> None:
    assert (keyed / "keyed_seal.json").is_file()
    for path in keyed.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path


def test_a_keyed_run_verifies_with_its_key_and_says_what_it_cannot_check_without(
    keyed: Path, key_file: Path
) -> None:
    done = verify(keyed, "--key-file", key_file)
    assert done.returncode == 0, done.stdout
    done = verify(keyed, env={"SOPBUS_SEAL_KEY": KEY})
    assert done.returncode == 0, done.stdout
    done = verify(keyed)
    assert done.returncode == 0 and "the run is keyed (key id" in done.stdout
    assert "verify cannot rule out a rewrite" in done.stdout


def test_a_rewrite_the_replay_cannot_see_is_found_with_the_key(
    keyed: Path, key_file: Path, tmp_path: Path
) -> None:
    run_dir = copy_run(keyed, tmp_path)

    def retime(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        records[0]["t"] = records[0]["t"] - 86400  # a wall-clock field: no replay compares it
        return records

    reseal(run_dir / "events.jsonl", retime)
    assert verify(run_dir).returncode == 0  # without the key nothing shows
    out = not_intact(run_dir, "--key-file", key_file)
    assert f"{run_dir / 'events.jsonl'}: changed since the keyed seal" in out


def test_a_forged_or_foreign_or_removed_keyed_seal_is_reported(
    keyed: Path, key_file: Path, tmp_path: Path
) -> None:
    run_dir = copy_run(keyed, tmp_path)
    seal = run_dir / "keyed_seal.json"
    data = json.loads(seal.read_text())
    first = next(iter(data["files"]))
    data["files"][first] = "0" * 64
    seal.write_text(json.dumps(data))
    assert "its MAC does not match" in not_intact(run_dir, "--key-file", key_file)
    other = tmp_path / "other.key"
    other.write_text("another-key-of-enough-length\n")
    assert "sealed with another key" in not_intact(run_dir, "--key-file", other)
    seal.unlink()
    assert "keyed_seal.json: missing: no keyed seal" in not_intact(run_dir, "--key-file", key_file)


def test_a_key_file_that_cannot_be_used_is_a_usage_error(company: Path, tmp_path: Path) -> None:
    short = tmp_path / "short.key"
    short.write_text("abc\n")
    for path, said in ((tmp_path / "absent.key", "cannot read the key file"), (short, "3 bytes")):
        done = verify(company, "--key-file", path)
        assert done.returncode == 2 and said in done.stderr and str(path) in done.stderr
    assert not os.path.exists(company / "keyed_seal.json")
