"""Hash-chained JSON lines: sealed batches, each carrying the hash of the batch before it.

The last line of each batch (one ``os.write``) ends with ``_prev``, ``_c`` and ``_h``: the
SHA-256 seal over the previous seal and the batch's bytes, and per-line checks that let
verification name the edited, dropped or moved line. The format, what it catches and what
it does not are described in docs/design/store.md ("The hash chain").

:mod:`._seal` writes and reads the format (what :class:`sopbus.bus._util._jsonl.JsonlWriter` and the
readers use); :mod:`._verify` finds the first break in a file (``sopbus verify``).
"""

from ._seal import (
    CHAIN_FIELDS,
    CHECK_HEX,
    CHECKS_FIELD,
    GENESIS,
    HASH_FIELD,
    HASH_HEX,
    HINT_HEX,
    PREV_FIELD,
    Seal,
    batch_hash,
    check_values,
    checks,
    line_hash,
    open_tail,
    parse_seal,
    records_of,
    seal_batch,
    split_line,
    unseal,
)
from ._verify import ChainBreak, ChainReport, Problem, verify_file

__all__ = [
    "CHAIN_FIELDS",
    "CHECKS_FIELD",
    "CHECK_HEX",
    "GENESIS",
    "HASH_FIELD",
    "HASH_HEX",
    "HINT_HEX",
    "PREV_FIELD",
    "ChainBreak",
    "ChainReport",
    "Problem",
    "Seal",
    "batch_hash",
    "check_values",
    "checks",
    "line_hash",
    "open_tail",
    "parse_seal",
    "records_of",
    "seal_batch",
    "split_line",
    "unseal",
    "verify_file",
]
