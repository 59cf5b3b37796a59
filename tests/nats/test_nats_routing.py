"""Routing over JetStream (bus/nats/_stream.py, _inbox.py, _subjects.py) on a real nats-server.

The conformance property publishes random messages to random teams through a real
Environment whose log is a StreamLog, and checks that every role's durable consumer yields
exactly what the in-process reference function of the routing contract (the very one
tests/bus/test_routing.py checks the Environment against) says the role receives.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from sopbus.bus import Environment, Message
from sopbus.bus.nats import open_link
from sopbus.bus.nats._link import Link
from sopbus.bus.nats._stream import RunStream, StreamError, StreamLog
from sopbus.bus.nats._subjects import consumer_name, token, untoken
from support.fakes import Echo
from support.routing import reference

_runs = itertools.count()

# Names a scenario may give (the subject layer must escape all but the first few).
NAMES = [
    "Alice",
    "bob_2",
    "qa-lead",
    "qa.lead",
    "Product Manager",
    "a>b",
    "x*y",
    "Zoë",
    "~7E",
    "tab\there",
    "a/b\\c",
    "role-x",
]
ACTIONS = ["A0", "A1", "Write.PRD", "Review Code", "*", ">", "A~2E"]


def run_id() -> str:
    return f"20260101-000000-route-{next(_runs):04d}"


async def new_run(link: Link) -> tuple[RunStream, Environment]:
    """A fresh run's stream, created, and an Environment that puts its messages on it."""
    stream = RunStream(link, run_id())
    await stream.create()
    return stream, Environment(stream.run_id, log=StreamLog(None, stream))


async def drop(link: Link, stream: RunStream) -> None:
    await link.call(lambda nc, js: js.delete_stream(stream.name))


class Records:
    """An inner event log that keeps what it is given (in place of the run store)."""

    def __init__(self) -> None:
        self.records: list[Any] = []

    def log(self, event: Any) -> None:
        self.records.append(event)

    def log_all(self, events: list[Any]) -> None:
        self.records += events


# -- the subject tokens ----------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(name=st.text(max_size=20))
def test_token_is_one_subject_token_and_reverses(name: str) -> None:
    tok = token(name)
    assert tok and re.fullmatch(r"[A-Za-z0-9_~-]+", tok), tok
    assert untoken(tok) == name


@settings(max_examples=100, deadline=None)
@given(name=st.from_regex(r"[A-Za-z0-9_-]+", fullmatch=True))
def test_plain_names_stay_as_they_are(name: str) -> None:
    assert token(name) == name


def test_escaped_names_read_well_and_bad_tokens_are_refused() -> None:
    assert token("qa.lead") == "qa~2Elead"
    assert token("Product Manager") == "Product~20Manager"
    assert consumer_name("a>b") == "role-a~3Eb"
    for bad in ["", "a.b", "~4", "~41", "~zz", "a b"]:
        with pytest.raises(ValueError):
            untoken(bad)


# -- the conformance property -----------------------------------------------------------------


@st.composite
def teams(draw: st.DrawFn) -> list[Echo]:
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=6, unique=True))
    team = []
    for i, name in enumerate(names):
        watch = draw(st.sets(st.sampled_from(ACTIONS), max_size=3))
        aliases = [f"alias.{i}"] if draw(st.booleans()) else []
        team.append(Echo(name, sorted(watch), aliases=aliases))
    return team


@st.composite
def publishes(draw: st.DrawFn, team: list[Echo]) -> list[list[Message]]:
    """Messages in publish_all batches; a batch's messages may share 2+ parents (so the log
    records carry parents_as)."""
    addresses = [r.name for r in team] + [a for r in team for a in r.aliases] + ["nobody"]
    senders = [r.name for r in team] + ["Boss"]
    batches = []
    for b in range(draw(st.integers(0, 8))):
        parents = tuple(f"m{i}" for i in range(1, draw(st.integers(0, 3)) + 1))
        batch = []
        for _ in range(draw(st.integers(1, 5))):
            to = draw(
                st.one_of(st.just(()), st.lists(st.sampled_from(addresses), max_size=3).map(tuple))
            )
            batch.append(
                Message(
                    cause_by=draw(st.sampled_from([*ACTIONS, "Unwatched"])),
                    sent_from=draw(st.sampled_from(senders)),
                    send_to=to,
                    content=f"batch {b}",
                    parents=parents,
                )
            )
        batches.append(batch)
    return batches


@settings(max_examples=30, deadline=None)
@given(data=st.data())
async def test_each_consumer_yields_what_the_reference_routes(
    shared_nats_server, data: st.DataObject
) -> None:
    team = data.draw(teams())
    batches = data.draw(publishes(team))
    async with open_link(shared_nats_server.url) as link:
        stream, env = await new_run(link)
        env.add_all(team)
        expected: dict[str, list[Message]] = {r.name: [] for r in team}
        for batch in batches:
            for stamped in env.publish_all(batch):
                for name in reference(team, stamped):
                    expected[name].append(stamped)
        with trio.fail_after(10):
            await stream.settle()
            for r in team:
                inbox = await stream.open_inbox(r.name, r.watch)
                got = await inbox.read_available(timeout=0)
                assert [m.id for m in got] == [m.id for m in expected[r.name]], r.name
                assert got == expected[r.name]  # whole messages: parents written out
        await drop(link, stream)


# -- the parts, one by one --------------------------------------------------------------------


async def test_parents_named_by_parents_as_reach_the_stream_whole(shared_nats_server) -> None:
    async with open_link(shared_nats_server.url) as link:
        stream = RunStream(link, run_id())
        await stream.create()
        inner = Records()
        env = Environment(stream.run_id, log=StreamLog(inner, stream))
        env.add(Echo("Reader", ["Draft"]))
        first = env.publish_all([Message(cause_by="Start", sent_from="Boss") for _ in range(2)])
        answers = env.publish_all(
            [
                Message(
                    cause_by="Draft",
                    sent_from="Writer",
                    parents=(first[0].id, first[1].id),
                    content=str(i),
                )
                for i in range(3)
            ]
        )
        assert [r.parents_as for r in inner.records[-3:]] == [
            "",
            "m3",
            "m3",
        ]  # shortened in the log
        assert len(inner.records) == 1 + 2 + 3  # role_joined, then every message record
        await stream.settle()
        got = await (await stream.open_inbox("Reader", ["Draft"])).read_available(timeout=0)
        assert [m.parents for m in got] == [("m1", "m2")] * 3
        assert got == answers
        await drop(link, stream)


async def test_names_that_need_escaping_route_like_any(shared_nats_server) -> None:
    async with open_link(shared_nats_server.url) as link:
        stream, env = await new_run(link)
        env.add(Echo("qa.lead x>y", ["Write PRD.v2*"], aliases=["lead.alias"]))
        env.add(Echo("qa", ["Write PRD"]))
        sent = env.publish_all(
            [
                Message(cause_by="Write PRD.v2*", sent_from="Boss"),
                Message(cause_by="Write PRD", sent_from="Boss"),  # not "Write PRD.v2*"'s watchers
                Message(cause_by="Note", sent_from="qa", send_to=("lead.alias",)),
                Message(cause_by="Write PRD.v2*", sent_from="qa.lead x>y"),  # its own: excluded
            ]
        )
        await stream.settle()
        lead = await stream.open_inbox("qa.lead x>y", ["Write PRD.v2*"])
        qa = await stream.open_inbox("qa", ["Write PRD"])
        assert [m.id for m in await lead.read_available(timeout=0)] == [sent[0].id, sent[2].id]
        assert [m.id for m in await qa.read_available(timeout=0)] == [sent[1].id]
        assert stream.seq(sent[2].id, "qa.lead x>y") == 3
        await drop(link, stream)


async def read_setup(link: Link) -> tuple[RunStream, list[Message]]:
    stream, env = await new_run(link)
    env.add(Echo("Dev", ["Spec"]))
    env.add(Echo("QA", ["Spec"]))
    sent = env.publish_all(
        [
            Message(cause_by="Spec", sent_from="Boss", content="1"),
            Message(cause_by="Bug", sent_from="QA", send_to=("Dev",)),
            Message(cause_by="Spec", sent_from="Dev"),  # Dev's own
            Message(cause_by="Spec", sent_from="Boss", content="4"),
        ]
    )
    await stream.settle()
    return stream, sent


async def test_read_takes_wanted_ids_even_those_an_earlier_host_acked(shared_nats_server) -> None:
    async with open_link(shared_nats_server.url) as link:
        stream, sent = await read_setup(link)
        want = [(m.id, stream.seq(m.id, "Dev")) for m in sent]
        first = await stream.open_inbox("Dev", ["Spec"])
        assert await first.read(want[:2], timeout=5) == sent[:2]
        await first.ack()
        assert await first.read(want[3:], timeout=5) == sent[3:]  # and dies before its ack
        # a new host of Dev (a worker that took the role over): the consumer no longer gives
        # m1 (acked) nor m4 (waiting for the dead host's ack): both come by their sequence
        second = await stream.open_inbox("Dev", ["Spec"])
        assert await second.read([want[3], want[0]], timeout=5) == [sent[3], sent[0]]
        await second.ack()
        assert await second.read_available(timeout=0) == []  # m3 (Dev's own) passed over
        await drop(link, stream)


async def test_a_missing_id_times_out_by_name(shared_nats_server) -> None:
    async with open_link(shared_nats_server.url) as link:
        stream, sent = await read_setup(link)
        inbox = await stream.open_inbox("Dev", ["Spec"])
        with trio.fail_after(10):
            with pytest.raises(TimeoutError, match=r"message\(s\) m99 not found .* within 0.3 s"):
                await inbox.read([(sent[0].id, stream.seq(sent[0].id)), ("m99", 99)], timeout=0.3)
        await drop(link, stream)


async def test_held_messages_wait_for_their_turn_and_older_ones_are_passed_over(
    shared_nats_server,
) -> None:
    async with open_link(shared_nats_server.url) as link:
        stream, env = await new_run(link)
        early = env.publish(Message(cause_by="Spec", sent_from="Boss"))  # before Dev joined
        env.add(Echo("Dev", ["Spec"]))
        later = env.publish_all([Message(cause_by="Spec", sent_from="Boss") for _ in range(3)])
        await stream.settle()
        inbox = await stream.open_inbox("Dev", ["Spec"])
        seqs = {m.id: stream.seq(m.id, "Dev") for m in later}
        assert await inbox.read([(later[1].id, seqs[later[1].id])], timeout=5) == [later[1]]
        assert await inbox.read([(later[2].id, seqs[later[2].id])], timeout=5) == [later[2]]
        assert early.id == "m1" and await inbox.read_available(timeout=0) == []
        await drop(link, stream)


async def test_a_resumed_coordinator_publishes_nothing_twice(shared_nats_server) -> None:
    async with open_link(shared_nats_server.url) as link:
        rid = run_id()
        seqs = []
        for _ in range(2):  # the same run published twice, by two coordinators
            stream = RunStream(link, rid)
            await stream.create()
            env = Environment(rid, log=StreamLog(None, stream))
            env.add(Echo("Dev", ["Spec"]))
            sent = env.publish_all(
                [
                    Message(cause_by="Spec", sent_from="Boss"),
                    Message(cause_by="Bug", sent_from="QA", send_to=("Dev",)),
                ]
            )
            await stream.settle()
            seqs.append([stream.seq(m.id, "Dev") for m in sent])
        info = await link.call(lambda nc, js: js.stream_info(stream.name))
        assert seqs == [[1, 2], [1, 2]] and info.state.messages == 2
        await drop(link, stream)


async def test_settle_without_a_stream_says_what_is_missing(shared_nats_server) -> None:
    async with open_link(shared_nats_server.url) as link:
        stream = RunStream(link, run_id())  # never created
        env = Environment(stream.run_id, log=StreamLog(None, stream))
        env.add(Echo("Dev", ["Spec"]))
        env.publish(Message(cause_by="Spec", sent_from="Boss"))
        with trio.fail_after(10):
            for _ in range(2):  # and it stays failed
                with pytest.raises(
                    StreamError,
                    match=r"cannot put message m1 on sopbus\.\S+\.act\.Spec: "
                    r"no stream .*SOPBUS_\S+ is missing: create it",
                ):
                    await stream.settle()
        with pytest.raises(KeyError, match="m1 is not on stream"):
            stream.seq("m1")


async def test_batches_put_while_others_await_their_acks_keep_publish_order(
    shared_nats_server,
) -> None:
    async with open_link(shared_nats_server.url) as link:
        stream, env = await new_run(link)
        env.add(Echo("Dev", ["Spec"]))
        sent: list[Message] = []
        for b in range(40):  # each publish_all is one put; the sender does not wait for acks
            sent += env.publish_all(
                [Message(cause_by="Spec", sent_from="Boss", content=f"{b}.{i}") for i in range(25)]
            )
            await trio.sleep(0)
        with trio.fail_after(20):
            await stream.settle()
            assert [stream.seq(m.id) for m in sent] == list(range(1, 1001))
            inbox = await stream.open_inbox("Dev", ["Spec"])
            got: list[Message] = []
            while len(got) < len(sent):
                got += await inbox.read_available(max=300, timeout=5)
        assert got == sent
        await drop(link, stream)


async def test_a_read_cut_short_loses_nothing_and_the_link_still_closes_at_once(
    shared_nats_server,
) -> None:
    with trio.fail_after(10):  # and closing the link does not wait out a drain timeout (30 s)
        async with open_link(shared_nats_server.url) as link:
            stream, env = await new_run(link)
            env.add(Echo("Dev", ["Spec"]))
            inbox = await stream.open_inbox("Dev", ["Spec"])
            assert await inbox.read_available(timeout=0.2) == []  # a pull that ran out
            with trio.move_on_after(0.3) as scope:
                await inbox.read_available(timeout=5)  # cancelled while its pull waits
            assert scope.cancelled_caught
            sent = env.publish_all(
                [Message(cause_by="Spec", sent_from="Boss", content=str(i)) for i in range(3)]
            )
            await stream.settle()
            got: list[Message] = []
            while len(got) < 3:  # the pull left open on the server takes them: held for this read
                got += await inbox.read_available(timeout=2)
            assert got == sent
            await drop(link, stream)


async def test_a_closed_inbox_leaves_its_unacked_messages_to_the_next_host(
    shared_nats_server,
) -> None:
    async with open_link(shared_nats_server.url) as link:
        stream, sent = await read_setup(link)
        want = [(m.id, stream.seq(m.id, "Dev")) for m in sent if m.sent_from != "Dev"]
        first = await stream.open_inbox("Dev", ["Spec"])
        assert await first.read(want, timeout=5) == [m for m in sent if m.sent_from != "Dev"]
        await first.close()
        await first.close()  # twice is harmless
        with pytest.raises(RuntimeError, match="inbox of role Dev is closed"):
            await first.read_available(timeout=0)
        second = await stream.open_inbox("Dev", ["Spec"])  # read, never acked: still there
        assert await second.read(want, timeout=5) == [m for m in sent if m.sent_from != "Dev"]
        await second.ack()
        await second.close()
        await drop(link, stream)


async def test_after_a_failed_put_nothing_more_is_sent(shared_nats_server) -> None:
    async with open_link(shared_nats_server.url) as link:
        stream, env = await new_run(link)
        env.add(Echo("Dev", ["Spec"]))
        first = env.publish(Message(cause_by="Spec", sent_from="Boss"))
        await stream.settle()
        assert stream.seq(first.id) == 1
        await drop(link, stream)  # the stream is lost under the run
        env.publish(Message(cause_by="Spec", sent_from="Boss"))
        with (
            trio.fail_after(10),
            pytest.raises(StreamError, match=r"cannot put message m2 .* is missing"),
        ):
            await stream.settle()
        await stream.create()  # back, but the run's stream has a hole now: it stays failed
        env.publish(Message(cause_by="Spec", sent_from="Boss"))
        with trio.fail_after(10), pytest.raises(StreamError, match="cannot put message m2"):
            await stream.settle()
        info = await link.call(lambda nc, js: js.stream_info(stream.name))
        assert info.state.messages == 0  # m3 was never sent
        await drop(link, stream)
