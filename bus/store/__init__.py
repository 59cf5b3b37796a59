"""The run store: one directory per run (events, ledger, calls, artifacts, summary),
written as it happens, and what reads it back: verify, resume, replay and fork.
"""

from ._executions import InFlight as InFlight
from ._fork import completed_rounds as completed_rounds
from ._fork import plan_fork as plan_fork
from ._fork import plan_replay as plan_replay
from ._fork import with_settings as with_settings
from ._keyed import SEAL_KEY_ENV as SEAL_KEY_ENV
from ._keyed import check_keyed_seal as check_keyed_seal
from ._keyed import read_key_file as read_key_file
from ._keyed import seal_key as seal_key
from ._keyed import write_keyed_seal as write_keyed_seal
from ._resume import Continuation as Continuation
from ._resume import Unplugged as Unplugged
from ._resume import finished as finished
from ._resume import in_flight as in_flight
from ._resume import ledger_of as ledger_of
from ._resume import plan_resume as plan_resume
from ._resume import scenario_of as scenario_of
from ._store import RunStore as RunStore
from ._store import drop_torn_tail as drop_torn_tail
from ._store import is_locked as is_locked
from ._store import new_run_id as new_run_id
from ._store import safe_relpath as safe_relpath
from ._verify import RECEIPT_EVENT as RECEIPT_EVENT
from ._verify import Receipt as Receipt
from ._verify import ReceiptError as ReceiptError
from ._verify import RunVerdict as RunVerdict
from ._verify import Subject as Subject
from ._verify import issue_receipt as issue_receipt
from ._verify import require_receipt as require_receipt
from ._verify import sha256_file as sha256_file
from ._verify import verify_run as verify_run

__all__ = [
    "RECEIPT_EVENT",
    "SEAL_KEY_ENV",
    "Continuation",
    "InFlight",
    "Receipt",
    "ReceiptError",
    "RunStore",
    "RunVerdict",
    "Subject",
    "Unplugged",
    "check_keyed_seal",
    "completed_rounds",
    "drop_torn_tail",
    "finished",
    "in_flight",
    "is_locked",
    "issue_receipt",
    "ledger_of",
    "new_run_id",
    "plan_fork",
    "plan_replay",
    "plan_resume",
    "read_key_file",
    "require_receipt",
    "safe_relpath",
    "scenario_of",
    "seal_key",
    "sha256_file",
    "verify_run",
    "with_settings",
    "write_keyed_seal",
]
