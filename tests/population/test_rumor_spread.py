"""``rumor_spread``: a population on a follower graph, run as a user runs it.

A post reaches its author's followers and nobody else; each round's choices add up to the
agents that acted; the adoption curve only grows; the run verifies and replays at $0 to
the same curve; bad graph input is exit 2 naming the file, the place and the fix.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from sopbus.bus import ConfigError, load_scenario, read_jsonl
from sopbus.bus.graph import small_world
from sopbus.sops import build_team
from support.cli import sopbus
from support.paths import ROOT

SHIPPED = ROOT / "scenarios" / "rumor_spread.toml"


def rumour(tmp_path: Path, *, count: int = 300, rounds: int = 8, replace: str = "") -> Path:
    """The shipped scenario with ``count`` agents and ``max_rounds`` ``rounds``; ``replace``
    is a ``graph = ...`` line put in place of the shipped one."""
    text = SHIPPED.read_text(encoding="utf-8")
    text = re.sub(r"(?m)^count = \S+", f"count = {count}", text, count=1)
    text = re.sub(r"(?m)^max_rounds = \S+", f"max_rounds = {rounds}", text, count=1)
    if replace:
        text = re.sub(r"(?m)^graph = .*$", replace, text, count=1)
    path = tmp_path / "rumour.toml"
    path.write_text(text, encoding="utf-8")
    return path


def run(tmp_path: Path, path: Path, *args: str) -> tuple[Any, Path]:
    done = sopbus("run", path, "--runs-dir", tmp_path / "runs", "--quiet", *args, cwd=tmp_path)
    dirs = sorted((tmp_path / "runs").iterdir()) if (tmp_path / "runs").is_dir() else []
    return done, (dirs[-1] if dirs else tmp_path / "runs")


def summary(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "summary.json").read_text())


def posts_by_round(run_dir: Path) -> dict[int, set[int]]:
    """The agents that posted in each round (round 0: the seeded post)."""
    out: dict[int, set[int]] = defaultdict(set)
    for event in read_jsonl(run_dir / "events.jsonl"):
        message = event.get("message") if event.get("kind") == "message_published" else None
        if message and message["cause_by"] == "Post":
            out[message.get("round", 0)].add(int(message["sent_from"].rsplit("-", 1)[1]))
    return out


def acted_by_round(run_dir: Path) -> dict[int, list[int]]:
    """The agents whose call was answered in each round, from the ledger's batch lines."""
    out: dict[int, list[int]] = defaultdict(list)
    for line in read_jsonl(run_dir / "costs.jsonl"):
        if line["outcome"] == "ok":
            out[line["round"]].extend(line["batch"]["agents"])
    return out


@pytest.fixture(scope="module")
def spread_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path]:
    tmp = tmp_path_factory.mktemp("rumour")
    return run(tmp, rumour(tmp))


def test_the_rumour_spreads_and_its_curve_adds_up(spread_run: tuple[Any, Path]) -> None:
    done, run_dir = spread_run
    assert done.returncode == 0, done.stdout + done.stderr
    said = summary(run_dir)
    assert said["verdict"]["passed"], said["verdict"]
    rounds = said["populations"]["Person"]
    assert len(rounds) >= 3
    for r in rounds:
        assert r["ignored"] + r["liked"] + r["reposted"] == r["acted"]
        assert r["acted"] + r["failed"] <= r["woke"]
    reached = [r["reached"] for r in rounds]
    adopters = [r["adopters"] for r in rounds]
    assert reached == sorted(reached) and adopters == sorted(adopters)
    assert all(a <= b <= 300 for a, b in zip(adopters, reached))
    assert adopters[-1] > adopters[0] > 0
    # the first round is the seed's followers reading its post: exactly them
    followers = set(small_world(300, k=10, p=0.3, seed=7).followers_of(0))
    assert set(acted_by_round(run_dir)[1]) == followers
    assert rounds[0]["reached"] == len(followers)


def test_each_round_reads_only_the_followers_of_the_last_rounds_posters(
    spread_run: tuple[Any, Path],
) -> None:
    _, run_dir = spread_run
    graph = small_world(300, k=10, p=0.3, seed=7)
    posted, acted = posts_by_round(run_dir), acted_by_round(run_dir)
    assert posted[0] == {0}
    for round_, agents in acted.items():
        reach = {f for author in posted[round_ - 1] for f in graph.followers_of(author)}
        assert agents and set(agents) <= reach, round_
        assert len(agents) == len(set(agents))  # an agent reads its feed once a round


def test_a_reposter_reposts_the_post_it_read(spread_run: tuple[Any, Path]) -> None:
    _, run_dir = spread_run
    said = summary(run_dir)["populations"]["Person"]
    posted = posts_by_round(run_dir)
    # a round's reposts are the next round's posts, one a reposting agent
    for r in said:
        assert len(posted.get(r["round"], ())) == r["reposted"], r


def test_the_run_verifies_exports_and_replays_to_the_same_curve(
    spread_run: tuple[Any, Path], tmp_path: Path
) -> None:
    _, run_dir = spread_run
    checked = sopbus("verify", run_dir, cwd=tmp_path)
    assert checked.returncode == 0 and "intact" in checked.stdout, checked.stdout
    exported = sopbus("populations", run_dir, "--csv", cwd=tmp_path)
    rows = list(csv.DictReader(io.StringIO(exported.stdout)))
    rounds = summary(run_dir)["populations"]["Person"]
    assert [int(r["adopters"]) for r in rows] == [r["adopters"] for r in rounds]
    replayed = sopbus("replay", run_dir, "--into", tmp_path / "replays", "--quiet", cwd=tmp_path)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    (again,) = (tmp_path / "replays").iterdir()
    assert summary(again)["populations"] == summary(run_dir)["populations"]
    assert float(summary(again)["total_usd"]) == 0


def test_a_graph_file_is_whom_each_agent_follows(tmp_path: Path) -> None:
    # Person-0's post reaches Person-1 and Person-2 only; Person-5 follows nobody who posts
    # first, so it reads nothing in round 1.
    (tmp_path / "follows.csv").write_text(
        "follower,followee\nPerson-1,Person-0\nPerson-2,Person-0\nPerson-3,Person-1\n"
        "Person-4,Person-2\nPerson-5,Person-3\n",
        encoding="utf-8",
    )
    path = rumour(tmp_path, count=6, replace='graph = { file = "follows.csv" }')
    done, run_dir = run(tmp_path, path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(acted_by_round(run_dir)[1]) == [1, 2]
    assert summary(run_dir)["populations"]["Person"][0]["reached"] == 2


def test_a_graph_file_naming_an_unknown_agent_says_which(tmp_path: Path) -> None:
    (tmp_path / "follows.csv").write_text(
        "follower,followee\nPerson-1,Person-0\nPerson-2,Persn-0\n", encoding="utf-8"
    )
    path = rumour(tmp_path, count=6, replace='graph = { file = "follows.csv" }')
    done, _ = run(tmp_path, path)
    assert done.returncode == 2
    said = done.stderr + done.stdout
    assert "follows.csv:3" in said and "'Persn-0'" in said and "populations[0].graph" in said
    assert "did you mean `Person-0`" in said
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ("feed = 10\nshards = 2", "shards"),
        ("feed = 0", "feed"),
        ('graph = { generator = "small_world", k = 10, q = 1 }', "graph"),
        ("graph = { k = 10 }", "neither a generator nor a file"),
    ],
)
def test_bad_graph_settings_name_the_field(tmp_path: Path, line: str, field: str) -> None:
    text = rumour(tmp_path, count=50).read_text()
    if line.startswith("graph"):
        text = re.sub(r"(?m)^graph = .*$", line, text, count=1)
    else:
        text = re.sub(r"(?m)^feed = .*$", line, text, count=1)
    path = tmp_path / "bad.toml"
    path.write_text(text)
    done = sopbus("validate", path, cwd=tmp_path)
    assert done.returncode == 2, done.stdout
    assert field in done.stderr + done.stdout


def test_a_population_on_a_graph_needs_an_action_with_a_choice(tmp_path: Path) -> None:
    text = rumour(tmp_path, count=20).read_text()
    text = text.replace('actions = ["React"]', 'actions = ["Post"]')
    path = tmp_path / "nochoice.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        build_team(load_scenario(path))
    assert "actions[0]" in str(caught.value) and "ignore | like | repost" in str(caught.value)
