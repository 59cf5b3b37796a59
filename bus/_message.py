"""The message: the one thing roles exchange.

A message says which action caused it (``cause_by``); the Environment routes it by that
name, or to the roles ``send_to`` names. Messages are frozen msgspec Structs, so they are
cheap to create, hash-free to route and encode straight into the run log.
"""

from __future__ import annotations

from typing import Any

import msgspec


# omit_defaults: an empty send_to, content, payload or parents (and the run id, which is
# empty while a run goes) is left out of the JSON (the decoder fills it in again), which keeps the run
# log short; readers of the raw JSON use bus.read_events or .get().
# gc=False: a message is a value (strings, tuples, JSON-able payload) that never refers back
# to anything holding it, so it cannot be part of a reference cycle; untracked, a run with
# hundreds of thousands of live messages does not pay for the cycle collector scanning them
# (it halved routing throughput in bench/route.py).
class Message(msgspec.Struct, frozen=True, kw_only=True, gc=False, omit_defaults=True):
    """One published message.

    ``id`` and ``round`` are stamped by :meth:`Environment.publish`; a role builds a message
    with only what it knows (``cause_by``, ``sent_from``, ``content``, ...) and the
    Environment fills in the rest. Ids come from a per-run counter, so two runs of the same
    scenario and seed give the same ids. ``run_id`` is empty while the run goes (every
    message of a run is the run's; a role has its run's id as :attr:`sopbus.bus.Turn.run_id`), so
    the run log does not repeat it on every line; :func:`sopbus.bus.read_events` gives each message
    it reads the id of the run whose log holds it.

    ``send_to`` empty means "whoever watches ``cause_by``"; otherwise exactly the roles it
    names (by name or alias). ``payload`` is the action's structured output (JSON-able).
    ``parents`` are the ids of the messages this one answers: the run's causal graph.
    ``cut`` is true when the answer it carries was cut at ``max_tokens`` (finish_reason
    ``length``): the text is not whole, so a verdict must not count it as done (omitted
    from the JSON when false, so older run logs read the same).
    """

    cause_by: str
    sent_from: str
    send_to: tuple[str, ...] = ()
    content: str = ""
    payload: Any = None
    parents: tuple[str, ...] = ()
    id: str = ""
    run_id: str = ""
    round: int = -1  # -1 until published: a stamped message always has its round in its JSON
    cut: bool = False
