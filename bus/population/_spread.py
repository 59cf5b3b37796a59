"""A population on a follower graph: posts go into feeds, and what a post spreads to.

An agent's post (a message of a watched action that the agent sent) is filed once in the
population's :class:`~sopbus.bus.graph.Feed` and gives its author's followers, and only
them, mail: new posts in their feeds. An agent that acts reads its feed (the ``k`` newest
posts of whom it follows) and chooses one of :data:`CHOICES`: ``like`` and ``repost``
adopt the post (an adopter has made up its mind and gets no more mail), ``repost`` posts
it again to its own followers, ``ignore`` leaves the agent open to the next post that
reaches it. The sums of a round: the choices, and the agents reached and adopting so far.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .._message import Message
from ..graph import Feed, FollowGraph

CHOICES = ("ignore", "like", "repost")
"""What an agent does with its feed: the values of its action's ``choice`` field."""
ADOPTING = frozenset({"like", "repost"})


class Spread:
    """The feeds of ``graph``'s agents (``k`` posts each) and what the posts reached.

    ``agent_of`` maps a sender's name to its agent (``Person-17``: 17; ``None``: not an
    agent of this population)."""

    def __init__(self, graph: FollowGraph, k: int, agent_of: Callable[[str], int | None]):
        self.graph, self.feed, self._agent_of = graph, Feed(graph, k), agent_of
        self.seen, self.adopted = bytearray(graph.n), bytearray(graph.n)
        self.reached = self.adopters = 0
        self._pending: dict[int, None] = {}  # agents with unread posts, an ordered set
        self._posts: dict[str, Message] = {}  # every post filed, by message id
        self._read: dict[int, Message] = {}  # agent -> the newest post it read this round
        self._counts = dict.fromkeys(CHOICES, 0)
        self._reposts: list[tuple[int, Message]] = []

    def file(self, news: Sequence[Message], round: int) -> list[Message]:
        """Files the posts of ``news`` the agents sent; returns the rest (mail from outside
        the population, which is every agent's)."""
        rest = []
        for message in news:
            author = self._agent_of(message.sent_from)
            if author is None:
                rest.append(message)
                continue
            self.feed.post(author, message.id, round)
            self._posts[message.id] = message
            self._reach(self.graph.followers_of(author))
        return rest

    def _reach(self, followers: memoryview) -> None:
        seen, adopted, pending = self.seen, self.adopted, self._pending
        for f in followers:
            if not seen[f]:
                seen[f] = 1
                self.reached += 1
            if not adopted[f]:
                pending[f] = None

    def first_reach(self, news: Sequence[Message]) -> int:
        """How many agents ``news`` (a run's seed) gives mail, without filing it: every
        agent for a message from outside the population, else the authors' followers."""
        if any(self._agent_of(m.sent_from) is None for m in news):
            return self.graph.n
        reached: set[int] = set()
        for message in news:
            author = self._agent_of(message.sent_from)
            assert author is not None
            reached.update(f for f in self.graph.followers_of(author) if not self.adopted[f])
        return len(reached)

    def mailed(self) -> list[int]:
        """The agents with posts they have not read, ascending."""
        return sorted(self._pending)

    def read(self, agent: int) -> list[Message]:
        """``agent``'s feed, newest first; its posts are read from now on."""
        self._pending.pop(agent, None)
        posts = [self._posts[p.message_id] for p in self.feed.read(agent)]
        if posts:
            self._read[agent] = posts[0]
        return posts

    def answered(self, agent: int, choice: str) -> None:
        """``agent`` chose ``choice`` (one of :data:`CHOICES`) after reading its feed."""
        self._counts[choice] += 1
        if choice in ADOPTING and not self.adopted[agent]:
            self.adopted[agent] = 1
            self.adopters += 1
        read = self._read.get(agent)
        if choice == "repost" and read is not None:
            self._reposts.append((agent, read))

    def close_round(self) -> tuple[dict[str, Any], list[tuple[int, Message]], tuple[str, ...]]:
        """The round's sums, its reposts (agent, the post it reposted) by agent, and the
        first posts of what was read (the rumours this round was about)."""
        n = self.graph.n
        sums: dict[str, Any] = {
            "ignored": self._counts["ignore"],
            "liked": self._counts["like"],
            "reposted": self._counts["repost"],
            "reached": self.reached,
            "adopters": self.adopters,
            "adoption": round(self.adopters / n, 4) if n else 0.0,
        }
        reposts = sorted(self._reposts, key=lambda pair: pair[0])
        roots = tuple(sorted({root_of(m) for m in self._read.values()}, key=_id_order))
        self._counts = dict.fromkeys(CHOICES, 0)
        self._reposts, self._read = [], {}
        return sums, reposts, roots


def _id_order(message_id: str) -> tuple[int, str]:
    # Ids are m1, m2, ...: by their number, so m10 comes after m9.
    digits = message_id[1:]
    return (int(digits), "") if digits.isdigit() else (0, message_id)


def root_of(post: Message) -> str:
    """The id of the post ``post`` passes on: its payload's ``post``, else its own id."""
    payload = post.payload
    if isinstance(payload, dict) and isinstance(payload.get("post"), str):
        return str(payload["post"])
    return post.id


def repost(agent_name: str, read: Message) -> Message:
    """``agent_name``'s repost of the post it read: the same action and text, its parent
    the post read, its payload naming the first post (the rumour it passes on)."""
    return Message(
        cause_by=read.cause_by,
        sent_from=agent_name,
        content=read.content,
        payload={"post": root_of(read)},
        parents=(read.id,),
    )
