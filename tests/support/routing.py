"""Routing's contract as a tiny reference function: the tests check the Environment (and the NATS bus) against it."""

from __future__ import annotations

from sopbus.bus import Message
from support.fakes import Echo


def reference(team: list[Echo], m: Message) -> list[str]:
    """The contract, literally: not the sender, and named in send_to or watching cause_by
    from any sender or from sent_from (a sender subscription, ``watch_from``)."""
    out = []
    for r in team:
        if r.name == m.sent_from:
            continue
        if m.send_to:
            if r.name in m.send_to or any(a in m.send_to for a in r.aliases):
                out.append(r.name)
        elif m.cause_by in r.watch_from:
            if m.sent_from in r.watch_from[m.cause_by]:
                out.append(r.name)
        elif m.cause_by in r.watch:
            out.append(r.name)
    return out
