"""sopbus beyond one machine: the bus, the budget and sweeps on NATS JetStream (issue 18).

Nothing here is loaded unless a command is given ``--bus nats://...``; the in-process bus
stays the default. All NATS traffic goes through :mod:`sopbus.bus.nats._link`.
"""

from ._account import NatsAccount
from ._link import Link, NatsUnavailable, Received, open_link
from ._stream import Inbox, RunStream, StreamError, StreamLog

__all__ = [
    "Inbox",
    "Link",
    "NatsAccount",
    "NatsUnavailable",
    "Received",
    "RunStream",
    "StreamError",
    "StreamLog",
    "open_link",
]
