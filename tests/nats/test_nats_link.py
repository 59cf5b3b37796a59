"""The trio-facing NATS link (bus/nats/_link.py) against a real nats-server."""

from __future__ import annotations

import pytest
import trio

from sopbus.bus.nats import NatsUnavailable, open_link
from support.nats_server import NatsServer, free_port, require_server


async def test_publish_many_then_read_back_in_order(shared_nats_server):
    async with open_link(shared_nats_server.url) as link:
        await link.call(lambda nc, js: js.add_stream(name="LINK1", subjects=["link1.>"]))
        acks = await link.publish_many(
            [(f"link1.{i % 3}", str(i).encode(), {"Nats-Msg-Id": f"id{i}"}) for i in range(500)]
        )
        assert [a.seq for a in acks] == list(range(1, 501))
        again = await link.publish_many([("link1.0", b"dup", {"Nats-Msg-Id": "id0"})])
        assert again[0].duplicate  # the server dropped it by message id

        async def read(nc, js):
            sub = await js.pull_subscribe("link1.>", durable="reader", stream="LINK1")
            msgs = await sub.fetch(500, timeout=5)
            for m in msgs:
                await m.ack()
            return [m.data for m in msgs]

        assert await read_all(link, read) == [str(i).encode() for i in range(500)]


async def read_all(link, fn):
    return await link.call(fn)


async def test_subscribe_hands_messages_to_trio(shared_nats_server):
    async with open_link(shared_nats_server.url) as link:
        async with link.subscribe("ctl.>") as inbox:
            for i in range(1000):
                await link.publish(f"ctl.{i}", b"x" * (i % 7))
            got = []
            with trio.fail_after(10):
                async for msg in inbox:
                    got.append(msg.subject)
                    if len(got) == 1000:
                        break
        assert got == [f"ctl.{i}" for i in range(1000)]


async def test_request_without_responder_times_out(shared_nats_server):
    async with open_link(shared_nats_server.url) as link:
        with pytest.raises(TimeoutError, match=r"no answer on nobody.home"):
            await link.request("nobody.home", b"?", timeout=0.5)


async def test_cancelling_a_call_returns_at_once(shared_nats_server):
    async with open_link(shared_nats_server.url) as link:

        async def slow(nc, js):
            import asyncio

            await asyncio.sleep(30)

        with trio.move_on_after(0.2) as scope:
            await link.call(slow)
        assert scope.cancelled_caught
        assert await link.call(lambda nc, js: _true()) is True


async def _true():
    return True


async def test_no_server_is_a_clear_error():
    with pytest.raises(
        NatsUnavailable,
        match=r"cannot reach a NATS server at nats://127.0.0.1:\d+.*nats-server -js",
    ):
        async with open_link(f"nats://127.0.0.1:{free_port()}", connect_timeout=1):
            pass


async def test_a_bucket_opens_across_a_server_restart(nats_server):
    # A worker checks whether its run is over (a KV read) at any moment, a restart included:
    # the check must wait for the server, not end the worker's hosting of the run.
    async with open_link(nats_server.url) as link:
        await link.key_value("RESTART")
        nats_server.kill()
        async with trio.open_nursery() as nursery:
            opened: list[object] = []

            async def reopen() -> None:
                opened.append(await link.key_value("RESTART"))

            nursery.start_soon(reopen)
            await trio.sleep(6.0)  # longer than a request's timeout (5 s): the first try times out
            nats_server.start()
        assert opened and opened[0] is not None
        assert await link.get_key(opened[0], "nothing") is None  # and the handle works


# A user who may not create consumers on the sweeps' bucket: its keys cannot be listed
# (nats-py lists them through a consumer), while the bucket opens and its values read.
NO_LISTING = """
authorization { users = [ { user: w, password: w, permissions: { publish: {
    allow: [">"], deny: ["$JS.API.CONSUMER.CREATE.KV_SOPBUS_SWEEPS", "$JS.API.CONSUMER.CREATE.KV_SOPBUS_SWEEPS.>"]
} } } ] }
"""


async def test_sweeps_that_cannot_be_listed_are_an_error_not_none(tmp_path):
    # A worker cancels its runs of every sweep missing from the list, so a listing the
    # server does not answer must raise (the worker asks again later), never read as "no
    # sweep". The bucket is made by an unrestricted server first, then listed by a user who
    # may not.
    from sopbus.bus.nats._sweep import SweepNotice, notices, open_sweep

    notice = SweepNotice(
        sweep_id="20261201-000000-listing-0b0b",
        account_bucket="SOPBUS_SWEEP_LISTING",
        executor="processes",
        lease_s=5.0,
        fix="raise the budget",
    )
    free = NatsServer(require_server(), tmp_path / "nats")
    free.start()
    try:
        async with open_link(free.url) as link:
            await open_sweep(link, notice)
            assert await notices(link) == [notice]
    finally:
        free.stop()
    denied = NatsServer(require_server(), tmp_path / "nats", config=NO_LISTING)
    denied.start()
    try:
        async with open_link(f"nats://w:w@127.0.0.1:{denied.port}") as link:
            # whichever error the link says: the point is that it does not say "no sweep"
            with trio.fail_after(60), pytest.raises(Exception):  # noqa: B017
                await notices(link)
    finally:
        denied.stop()
