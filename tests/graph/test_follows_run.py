"""Follows among a scenario's roles, end to end as a user runs them (``sopbus run`` on the
simulator): a post reaches exactly its author's followers, from a graph file, a generator,
a role's ``follows`` or a ``{ action, from }`` watch; a wrong name is exit 2 with its place."""

from __future__ import annotations

import json
from pathlib import Path

from sopbus.bus.graph import small_world
from support.cli import sopbus

NAMES = ["Alice", "Bob", "Carol", "Dan", "Erin", "Frank", "Gina", "Hal"]


def scenario(tmp_path: Path, graph: str, roles: list[str] | None = None) -> Path:
    """Every role posts once it hears the idea or a post it follows; nobody watches Post
    from anyone, so a post goes to followers only."""
    entries = roles or [
        f'[[roles]]\nname = "{n}"\nwatch = ["UserRequirement"]\nactions = ["Post"]\n' for n in NAMES
    ]
    path = tmp_path / "social.toml"
    path.write_text(
        '[scenario]\nname = "social"\nidea = "say hello"\n\n'
        "[run]\nmax_rounds = 3\nbudget_usd = 1\n\n"
        '[llm]\nprovider = "sim"\nmodel = "gpt-4o-mini"\n\n'
        '[actions.Post]\ninstruction = "Write a short post."\n\n'
        + graph
        + "\n"
        + "\n".join(entries)
    )
    return path


def posts(run_dir: Path) -> list[tuple[str, list[str]]]:
    """(author, recipients) of every Post, delivered or not, in log order."""
    out = []
    for line in (run_dir / "events.jsonl").read_text().splitlines():
        event = json.loads(line)
        message = event.get("message") or {}
        if message.get("cause_by") == "Post":
            out.append((message["sent_from"], event.get("recipients", [])))
    return out


def run(path: Path, tmp_path: Path) -> Path:
    done = sopbus("run", path, "--runs-dir", tmp_path / "runs", "--quiet")
    assert done.returncode == 0, done.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    return run_dir


def test_a_post_reaches_exactly_its_authors_followers_from_a_graph_file(tmp_path: Path) -> None:
    (tmp_path / "follows.csv").write_text(
        "follower,followee\nBob,Alice\nCarol,Alice\nDan,Bob\nAlice,Hal\n"
    )
    run_dir = run(scenario(tmp_path, '[graph]\nfile = "follows.csv"\n'), tmp_path)
    followers = {"Alice": ["Bob", "Carol"], "Bob": ["Dan"], "Hal": ["Alice"]}
    seen = posts(run_dir)
    assert len(seen) > len(NAMES)  # round 1's posts and the posts they caused
    for author, recipients in seen:
        assert recipients == followers.get(author, []), author


def test_a_generated_graph_routes_as_the_same_generator_says(tmp_path: Path) -> None:
    graph = '[graph]\ngenerator = "small_world"\nk = 2\np = 0.5\nseed = 3\n'
    run_dir = run(scenario(tmp_path, graph), tmp_path)
    g = small_world(len(NAMES), 2, 0.5, seed=3)
    for author, recipients in posts(run_dir):
        assert recipients == [NAMES[i] for i in g.followers_of(NAMES.index(author))]


def test_follows_and_a_watch_from_senders_are_the_same_subscription(tmp_path: Path) -> None:
    roles = [
        '[[roles]]\nname = "Alice"\nwatch = ["UserRequirement"]\nactions = ["Post"]\n',
        '[[roles]]\nname = "Carol"\nwatch = ["UserRequirement"]\nactions = ["Post"]\n',
        '[[roles]]\nname = "Bob"\nfollows = ["Alice"]\nactions = ["Reply"]\n',
        '[[roles]]\nname = "Dan"\nwatch = [{ action = "Post", from = ["Carol"] }]\n'
        'actions = ["Reply"]\n',
        '[actions.Reply]\ninstruction = "Answer the post."\n',
    ]
    run_dir = run(scenario(tmp_path, "", roles), tmp_path)
    assert sorted(posts(run_dir)) == [("Alice", ["Bob"]), ("Carol", ["Dan"])]


def test_a_sender_that_is_no_role_is_exit_2_with_the_place_and_close_names(
    tmp_path: Path,
) -> None:
    roles = [
        '[[roles]]\nname = "Alice"\nwatch = ["UserRequirement"]\nactions = ["Post"]\n',
        '[[roles]]\nname = "Bob"\nwatch = ["UserRequirement", { action = "Post", from = '
        '["Alcie"] }]\nactions = ["Post"]\n',
    ]
    path = scenario(tmp_path, "", roles)
    done = sopbus("run", path, "--runs-dir", tmp_path / "runs", "--quiet")
    assert done.returncode == 2
    for part in (str(path), "role 'Bob'", "$.roles[1].watch[1].from[0]", "'Alcie'", "`Alice`"):
        assert part in done.stderr, part
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
    follows = scenario(tmp_path, "", [roles[0], '[[roles]]\nname = "Bob"\nfollows = ["Al"]\n'])
    done = sopbus("validate", follows)
    assert done.returncode == 2 and "$.roles[1].follows[0]" in done.stderr


def test_a_graph_file_naming_an_unknown_agent_says_the_line(tmp_path: Path) -> None:
    (tmp_path / "follows.csv").write_text("follower,followee\nBob,Alice\nBob,Zed\n")
    path = scenario(tmp_path, '[graph]\nfile = "follows.csv"\n')
    done = sopbus("validate", path)
    assert done.returncode == 2
    assert "follows.csv:3" in done.stderr and "'Zed'" in done.stderr and "$.graph" in done.stderr
