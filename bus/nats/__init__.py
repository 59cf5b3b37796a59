"""sopbus beyond one machine: the bus, the budget and sweeps on NATS JetStream (issue 18).

Nothing here is loaded unless a command is given ``--bus nats://...``; the in-process bus
stays the default. All NATS traffic goes through :mod:`sopbus.bus.nats._link`.
"""

from ._account import NatsAccount
from ._claims import ScenarioPlan as ScenarioPlan
from ._link import Link, NatsUnavailable, Received, open_link
from ._remote import Coordinator as Coordinator
from ._remote import coordinating as coordinating
from ._remote import plan_of as plan_of
from ._stream import Inbox, RunStream, StreamError, StreamLog
from ._sweep import MAX_DELIVER as MAX_DELIVER
from ._sweep import SWEEP as SWEEP
from ._sweep import WORKERS as WORKERS
from ._sweep import Puller as Puller
from ._sweep import SweepNotice as SweepNotice
from ._sweep import Taken as Taken
from ._sweep import delete_bucket as delete_bucket
from ._sweep import delete_queue as delete_queue
from ._sweep import exhausted_job as exhausted_job
from ._sweep import exhausted_subject as exhausted_subject
from ._sweep import notices as notices
from ._sweep import open_sweep as open_sweep
from ._sweep import report as report
from ._sweep import submit as submit
from ._sweep import withdraw_notice as withdraw_notice
from ._worker import WorkerOptions as WorkerOptions
from ._worker import WorkerTeam as WorkerTeam
from ._worker import serve as serve

__all__ = [
    "MAX_DELIVER",
    "SWEEP",
    "WORKERS",
    "Coordinator",
    "Inbox",
    "Link",
    "NatsAccount",
    "NatsUnavailable",
    "Puller",
    "Received",
    "RunStream",
    "ScenarioPlan",
    "StreamError",
    "StreamLog",
    "SweepNotice",
    "Taken",
    "WorkerOptions",
    "WorkerTeam",
    "coordinating",
    "delete_bucket",
    "delete_queue",
    "exhausted_job",
    "exhausted_subject",
    "notices",
    "open_link",
    "open_sweep",
    "plan_of",
    "report",
    "serve",
    "submit",
    "withdraw_notice",
]
