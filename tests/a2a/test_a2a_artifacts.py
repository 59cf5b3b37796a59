"""What leaves the server as a task's artifacts: the run's files, never what a link in
``artifacts/`` points at."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any


class _Updater:
    """Keeps what the executor would send (the SDK's TaskUpdater.add_artifact's arguments)."""

    def __init__(self) -> None:
        self.sent: dict[str, Any] = {}

    async def add_artifact(self, parts: list[Any], *, name: str, last_chunk: bool) -> None:
        self.sent[name] = parts[0].text


def test_a_link_in_the_artifacts_is_not_followed(tmp_path: Path) -> None:
    from sopbus.cli._a2a_server import RunExecutor

    secret = tmp_path / "secret.txt"
    secret.write_text("the neighbour's key")
    artifacts = tmp_path / "run" / "artifacts"
    (artifacts / "docs").mkdir(parents=True)
    (artifacts / "docs" / "prd.md").write_text("# PRD")
    (artifacts / "leak.md").symlink_to(secret)
    (artifacts / "linked").symlink_to(tmp_path, target_is_directory=True)

    class Run:
        run_dir = tmp_path / "run"

    updater = _Updater()
    skipped = asyncio.run(RunExecutor._artifacts(None, Run, updater))  # type: ignore[arg-type]
    assert updater.sent == {"docs/prd.md": "# PRD"}
    assert skipped == []
    assert all("neighbour" not in text for text in updater.sent.values())
