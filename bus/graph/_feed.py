"""A bounded feed: the newest posts of the authors an agent follows.

Each author keeps only its ``k`` newest posts (older ones can never be among an agent's
``k`` newest), so a read looks at ``k`` posts per followee at most: O(followees), whatever
the number of posts so far, and the memory is ``k`` posts per author who posted.
"""

from __future__ import annotations

import heapq
from collections import deque
from typing import NamedTuple

from ._csr import FollowGraph


class Post(NamedTuple):
    """One post: its author (a node), the message id, the round, and ``seq``, its place
    in the order of posting (it orders the posts of one round)."""

    author: int
    message_id: str
    round: int
    seq: int


class Feed:
    """The newest ``k`` posts of whom each agent follows in ``graph``, newest first."""

    def __init__(self, graph: FollowGraph, k: int = 10):
        if k < 1:
            raise ValueError(f"a feed holds at least one post, got k={k}")
        self.graph, self.k = graph, k
        self._by_author: dict[int, deque[Post]] = {}
        self._seq = 0

    def post(self, author: int, message_id: str, round: int) -> Post:
        """Records a post of ``author`` (posts come in the order they were published)."""
        self._seq += 1
        post = Post(author, message_id, round, self._seq)
        kept = self._by_author.get(author)
        if kept is None:
            kept = self._by_author[author] = deque(maxlen=self.k)
        kept.append(post)
        return post

    def read(self, agent: int) -> list[Post]:
        """The newest ``k`` posts of the authors ``agent`` follows, newest first."""
        by_author = self._by_author
        kept = [by_author[a] for a in self.graph.followees_of(agent) if a in by_author]
        return heapq.nlargest(self.k, (p for posts in kept for p in posts), key=_newness)


def _newness(post: Post) -> tuple[int, int]:
    return post.round, post.seq
