"""A role added in Python (scenarios/my_reviewer.py) joins a shipped SOP, as the README shows."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from support.cli import ARGV
from support.paths import ROOT


@pytest.mark.slow
def test_the_python_reviewer_watches_the_engineers_code_and_reports_to_the_engineer(
    tmp_path: Path,
) -> None:
    done = subprocess.run(
        [
            *ARGV,
            "run",
            str(ROOT / "scenarios/software_company_python_reviewer.toml"),
            "--runs-dir",
            str(tmp_path),
            "--quiet",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    published = [e for e in events if e["kind"] == "message_published"]
    code = next(e for e in published if e["message"]["cause_by"] == "WriteCode")
    assert "Rita" in code["recipients"]  # watching is all it took
    review = next(e for e in published if e["message"]["cause_by"] == "ReviewCode")
    assert review["message"]["sent_from"] == "Rita" and review["recipients"] == ["Alex"]
    assert set(review["message"]["payload"]) == {"approved", "problems"}
