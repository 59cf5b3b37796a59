"""The live view of ``sopbus run`` on a real terminal (a pseudo-terminal, so rich draws its
bar): it names the roles at work, and its last frame shows the run's final round, never an
earlier one above the summary. Also the action ``artifact`` files a role keeps."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import struct
import subprocess
import termios
from pathlib import Path

import pytest

from sopbus.bus import Message, Turn
from sopbus.roles import Action, ActionContext, ActionResult, Registry, Role
from support.cli import ARGV
from support.paths import DATA

PAIR = DATA / "scenarios" / "review_pair.toml"
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def on_a_terminal(args: list[str], cwd: Path) -> tuple[int, str]:
    """Runs ``sopbus args`` with a pseudo-terminal (120 x 40) as its stdout and stderr;
    returns the exit code and everything it drew, escape codes removed."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    env = {**os.environ, "TERM": "xterm"}
    env.pop("COLUMNS", None)
    child = subprocess.Popen(
        [*ARGV, *args], cwd=cwd, env=env, stdin=slave, stdout=slave, stderr=slave, close_fds=True
    )
    os.close(slave)
    drawn = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        drawn += chunk
    os.close(master)
    return child.wait(timeout=120), _ANSI.sub("", drawn.decode("utf-8", errors="replace"))


@pytest.mark.slow
def test_the_live_view_names_who_is_at_work_and_ends_on_the_final_round(tmp_path: Path) -> None:
    # Each simulated call takes 0.4 s, so the display (polling every 0.1 s) sees every turn.
    scenario = tmp_path / "slow_pair.toml"
    scenario.write_text(
        PAIR.read_text().replace("max_tokens = 256", "max_tokens = 256\nlatency_ms = 400")
    )
    code, drawn = on_a_terminal(["run", str(scenario), "--runs-dir", "runs"], tmp_path)
    assert code == 0, drawn
    (run,) = (tmp_path / "runs").iterdir()
    summary = json.loads((run / "summary.json").read_text())
    frames = re.findall(r"round (\d+)/(\d+)", drawn)
    assert frames and frames[-1] == (str(summary["rounds"]), str(summary["max_rounds"]))
    assert "at work: Writer: Draft" in drawn and "at work: Rita: Review" in drawn
    assert drawn.rindex("finished") > drawn.rindex("at work:")  # the last frame, after the run
    assert "Total running cost" not in drawn  # the cost lines wait for -v


# -- an action's artifact ---------------------------------------------------------------------

REG = Registry()


class Ask(Action, registry=REG):
    """What the customer asks (only watched here)."""


class Quote(Action, registry=REG):
    instruction = "Quote a price."
    artifact = "quotes/{round}_{role}.json"

    async def run(self, ctx: ActionContext) -> ActionResult:
        return ActionResult(content="12 CNY", payload={"price": 12, "currency": "CNY"})


class Clerk(Role, registry=REG):
    watch = (Ask,)
    actions = (Quote,)


class _Kept:
    """The run store's side of a turn, in memory."""

    def __init__(self, root: Path) -> None:
        self.artifacts_dir = root
        self.written: dict[str, str | bytes] = {}

    def write_artifact(self, relpath: str, data: str | bytes, *, role: str, round: int) -> Path:
        self.written[relpath] = data
        return self.artifacts_dir / relpath

    def emit(self, kind: str, data: object, *, role: str, round: int) -> None:
        pass


async def test_an_action_keeps_its_result_in_its_artifact_file(tmp_path: Path) -> None:
    kept = _Kept(tmp_path)
    clerk = Clerk(registry=REG)
    turn = Turn(run_id="r", round=3, role=clerk.name, services=kept)
    (said,) = await clerk.step(
        [Message(cause_by="Ask", sent_from="Customer", content="how much?")], turn
    )
    assert said.content == "12 CNY"
    assert json.loads(kept.written["quotes/3_Clerk.json"]) == {"price": 12, "currency": "CNY"}
    text = Quote(artifact="notes/{action}.md")
    assert text.artifact == "notes/{action}.md"


@pytest.mark.parametrize(
    "template, problem",
    [
        ("../up.md", "leaves the run's artifacts/ directory"),
        ("/etc/x.md", "leaves the run's artifacts/ directory"),
        ("a/{who}.md", "unknown placeholder {who}"),
        ("a/{round.md", "bad artifact path"),
    ],
)
def test_a_bad_artifact_path_is_refused_when_the_action_is_made(
    template: str, problem: str
) -> None:
    from sopbus.bus import ConfigError

    with pytest.raises(ConfigError, match=re.escape(problem)):
        Quote(artifact=template)
