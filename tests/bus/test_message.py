import msgspec
import pytest

from sopbus.bus import Message


def test_message_is_frozen_and_round_trips_through_json() -> None:
    m = Message(
        cause_by="WritePRD",
        sent_from="Alice",
        send_to=("Bob",),
        content="hi",
        payload={"goals": ["a"]},
        parents=("m1",),
        id="m2",
        run_id="r",
        round=3,
    )
    with pytest.raises(AttributeError):
        m.content = "changed"  # type: ignore[misc]
    assert msgspec.json.decode(msgspec.json.encode(m), type=Message) == m
