"""Routing against a ten-line reference function of the contract in docs/design/routing.md,
sender subscriptions (an action watched from named senders only) included."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sopbus.bus import Environment, Message
from support.fakes import Echo
from support.routing import reference

ACTIONS = [f"A{i}" for i in range(8)]


@st.composite
def teams(draw: st.DrawFn) -> list[Echo]:
    n = draw(st.integers(1, 50))
    names = [f"r{i}" for i in range(n)]
    team = []
    for i in range(n):
        watch = draw(st.sets(st.sampled_from(ACTIONS), max_size=4))
        aliases = [f"alias{i}"] if draw(st.booleans()) else []
        # Some actions from named senders only: roles of the team (itself too), "Boss",
        # and a name no message is sent from; some of them also in plain ``watch``.
        watch_from = draw(
            st.dictionaries(
                st.sampled_from(ACTIONS),
                st.sets(st.sampled_from([*names, "Boss", "Ghost"]), max_size=4),
                max_size=3,
            )
        )
        team.append(Echo(names[i], sorted(watch), aliases=aliases, watch_from=watch_from))
    return team


@st.composite
def streams(draw: st.DrawFn, team: list[Echo]) -> list[Message]:
    addresses = [r.name for r in team] + [a for r in team for a in r.aliases] + ["nobody"]
    senders = [r.name for r in team] + ["Boss"]
    msgs = []
    for _ in range(draw(st.integers(0, 60))):
        to = draw(
            st.one_of(st.just(()), st.lists(st.sampled_from(addresses), max_size=3).map(tuple))
        )
        msgs.append(
            Message(
                cause_by=draw(st.sampled_from([*ACTIONS, "Unwatched"])),
                sent_from=draw(st.sampled_from(senders)),
                send_to=to,
            )
        )
    return msgs


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_delivery_equals_the_reference(data: st.DataObject) -> None:
    team = data.draw(teams())
    stream = data.draw(streams(team))
    log: list[object] = []
    env = Environment("run", log=log.append)
    env.add_all(team)
    expected: dict[str, list[str]] = {r.name: [] for r in team}
    undelivered = set()
    for m in stream:
        stamped = env.publish(m)
        recipients = reference(team, stamped)
        for name in recipients:
            expected[name].append(stamped.id)
        if not recipients:
            undelivered.add(stamped.id)
    for r in team:
        got = [m.id for m in env.take(r.name)]
        assert got == expected[r.name]
        assert len(got) == len(set(got)), "a message was delivered twice"
    published = [e for e in log if type(e).__name__ == "MessagePublished"]
    dropped = [e for e in log if type(e).__name__ == "MessageUndelivered"]
    assert {e.message.id for e in dropped} == undelivered  # type: ignore[attr-defined]
    assert len(published) + len(dropped) == len(stream)
    assert (env.published, env.undelivered) == (len(stream), len(undelivered))
    for e in published:
        assert e.message.sent_from not in e.recipients  # type: ignore[attr-defined]
    assert env.pending() == 0


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_joins_and_leaves_take_effect_from_the_next_delivery(data: st.DataObject) -> None:
    team = data.draw(teams())
    stream = data.draw(streams(team))
    env = Environment("run")
    present: list[Echo] = []
    got: dict[str, list[str]] = {r.name: [] for r in team}
    want: dict[str, list[str]] = {r.name: [] for r in team}
    for i, m in enumerate(stream):
        r = team[i % len(team)]
        if r in present and data.draw(st.booleans()):
            got[r.name] += [x.id for x in env.take(r.name)]
            env.remove(r.name)
            present.remove(r)
        elif r not in present:
            env.add(r)
            present.append(r)
        stamped = env.publish(m)
        for name in reference(present, stamped):
            want[name].append(stamped.id)
    for r in present:
        got[r.name] += [x.id for x in env.take(r.name)]
    assert got == want


def test_ids_are_a_per_run_counter_and_rounds_are_stamped() -> None:
    env = Environment("r1")
    env.add(Echo("a", ["X"]))
    first = env.publish(Message(cause_by="X", sent_from="Boss"), round=0)
    second = env.publish(Message(cause_by="X", sent_from="Boss"), round=4)
    assert (first.id, first.round) == ("m1", 0)
    assert first.run_id == ""  # the run's id is the turn's and the log's, not on every message
    assert (second.id, second.round) == ("m2", 4)


def test_a_duplicate_name_or_alias_is_refused_with_the_owner_named() -> None:
    env = Environment()
    env.add(Echo("Alice", aliases=["pm"]))
    try:
        env.add(Echo("Bob", aliases=["pm"]))
    except Exception as exc:
        assert "'pm'" in str(exc) and "'Alice'" in str(exc)
    else:
        raise AssertionError("a duplicate alias was accepted")


def test_named_recipients_by_alias_get_one_copy() -> None:
    env = Environment()
    env.add(Echo("Eve", aliases=["engineer"]))
    env.publish(Message(cause_by="Bug", sent_from="QA", send_to=("Eve", "engineer")))
    assert [m.cause_by for m in env.take("Eve")] == ["Bug"]


def test_a_sender_subscription_takes_that_senders_messages_only() -> None:
    env = Environment()
    env.add(Echo("Bob", ["Kickoff"], watch_from={"Post": ["Alice"]}))
    env.add(Echo("Carol", ["Post"]))
    env.add(Echo("Dan", watch_from={"Post": ["Alice", "Carol"]}))
    posts = {
        sender: env.publish(Message(cause_by="Post", sent_from=sender)).id
        for sender in ("Alice", "Carol", "Eve")
    }
    env.publish(Message(cause_by="Kickoff", sent_from="Boss"))
    got = {
        name: [m.id for m in env.take(name) if m.cause_by == "Post"]
        for name in ("Bob", "Carol", "Dan")
    }
    assert got == {
        "Bob": [posts["Alice"]],
        "Carol": [posts["Alice"], posts["Eve"]],  # from anyone, but not its own
        "Dan": [posts["Alice"], posts["Carol"]],
    }
    assert env.watchers("Post") == ["Carol"]
    assert env.watchers("Post", "Alice") == ["Bob", "Carol", "Dan"]


def test_a_follower_who_leaves_is_no_longer_reached_and_the_merge_follows_joins() -> None:
    env = Environment()
    env.add(Echo("Bob", watch_from={"Post": ["Alice"]}))
    env.add(Echo("Carol", ["Post"]))
    assert env.recipients(Message(cause_by="Post", sent_from="Alice")) == ("Bob", "Carol")
    env.remove("Bob")
    assert env.recipients(Message(cause_by="Post", sent_from="Alice")) == ("Carol",)
    env.add(Echo("Bob", watch_from={"Post": ["Alice"]}))
    env.add(Echo("Zed", watch_from={"Post": ["Alice"]}))
    assert env.recipients(Message(cause_by="Post", sent_from="Alice")) == ("Carol", "Bob", "Zed")
    env.remove("Carol")
    assert env.recipients(Message(cause_by="Post", sent_from="Alice")) == ("Bob", "Zed")
    assert env.recipients(Message(cause_by="Post", sent_from="Eve")) == ()


def test_the_join_record_names_the_sender_subscriptions() -> None:
    log: list[object] = []
    env = Environment(log=log.append)
    env.add(Echo("Bob", ["Kickoff"], watch_from={"Post": ["Carol", "Alice"]}))
    env.add(Echo("Carol", ["Post"]))
    bob, carol = log
    assert (bob.watch, bob.watch_from) == (("Kickoff", "Post"), {"Post": ("Alice", "Carol")})  # type: ignore[attr-defined]
    assert (carol.watch, carol.watch_from) == (("Post",), {})  # type: ignore[attr-defined]
