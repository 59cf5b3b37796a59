"""Graph files (CSV, JSON lines) and their mistakes; the bounded feed against a brute force."""

from __future__ import annotations

import heapq
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sopbus.bus import ConfigError
from sopbus.bus.graph import Feed, FollowGraph, random_graph, read_graph

NAMES = ["Alice", "Bob", "Carol", "Dan"]


def test_csv_and_jsonl_give_the_same_graph(tmp_path: Path) -> None:
    csv = tmp_path / "g.csv"
    csv.write_text("followee,follower\nAlice,Bob\nAlice,Carol\n\nBob,Carol\nAlice,Bob\nDan,Dan\n")
    jsonl = tmp_path / "g.jsonl"
    jsonl.write_text(
        '{"follower": "Bob", "followee": "Alice"}\n\n'
        '{"follower": "Carol", "followee": "Alice"}\n'
        '{"follower": "Carol", "followee": "Bob", "weight": 2}\n'
    )
    for path in (csv, jsonl):
        g = read_graph(path, NAMES)
        assert g.edge_list() == [(1, 0), (2, 0), (2, 1)]  # repeats and self-follows dropped
        assert list(g.followers_of(0)) == [1, 2] and list(g.followees_of(2)) == [0, 1]


@pytest.mark.parametrize(
    ("name", "text", "said"),
    [
        ("g.csv", "follower,followee\nBob,Alice\nBob,Alcie\n", ["g.csv:3", "'Alcie'", "`Alice`"]),
        ("g.csv", "from,to\nBob,Alice\n", ["g.csv:1", "follower,followee"]),
        ("g.csv", "follower,followee\nBob\n", ["g.csv:2", "expected 2 columns"]),
        ("g.jsonl", '{"follower": "Bob", "followee": "Alice"}\n{"follower": "Eve"', ["g.jsonl:2"]),
        ("g.jsonl", '{"follower": "Bob", "followee": "Zed"}\n', ["g.jsonl:1", "'Zed'"]),
        ("g.jsonl", '{"follower": "Bob"}\n', ["g.jsonl:1", '"followee"']),
    ],
)
def test_a_bad_line_is_named_with_the_file_and_the_line(
    tmp_path: Path, name: str, text: str, said: list[str]
) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        read_graph(path, NAMES)
    for part in said:
        assert part in str(err.value)


def test_a_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read the graph file"):
        read_graph(tmp_path / "nope.csv", NAMES)


def brute_feed(graph: FollowGraph, posts: list[tuple[int, int]], agent: int, k: int) -> list[str]:
    """Every post ever, filtered by whom ``agent`` follows, newest k (round, then order)."""
    follows = set(graph.followees_of(agent))
    mine = [(rnd, seq, f"p{seq}") for seq, (a, rnd) in enumerate(posts, 1) if a in follows]
    return [p for _, _, p in heapq.nlargest(k, mine)]


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 1000),
    k=st.integers(1, 6),
    steps=st.lists(st.tuples(st.integers(0, 11), st.integers(0, 3)), max_size=80),
)
def test_the_feed_is_the_newest_k_posts_of_whom_one_follows(
    seed: int, k: int, steps: list[tuple[int, int]]
) -> None:
    graph = random_graph(12, 3, seed=seed)
    feed = Feed(graph, k)
    posts: list[tuple[int, int]] = []
    rnd = 0
    for author, advance in steps:
        rnd += advance
        posts.append((author, rnd))
        feed.post(author, f"p{len(posts)}", rnd)
    for agent in range(graph.n):
        assert [p.message_id for p in feed.read(agent)] == brute_feed(graph, posts, agent, k)


def test_a_feed_keeps_k_posts_per_author_only() -> None:
    feed = Feed(random_graph(3, 2, seed=0), k=2)
    for i in range(100):
        feed.post(0, f"p{i}", i)
    assert [p.message_id for p in feed.read(1)] == ["p99", "p98"]
    assert sum(len(q) for q in feed._by_author.values()) == 2
