"""Hash-chained JSON lines: sealed batches, each carrying the hash of the batch before it.

A writer appends lines in *batches* (one ``os.write`` each: a ledger line, or the messages a
round published with the round's record). The last line of a batch is *sealed*: the
record's JSON object with the chain fields appended, always last::

    {"kind":"message_published",...}
    {"kind":"round_ended",...,"_prev":"<8 hex>","_c":"<4 hex per earlier line, 4 more>","_h":"<32 hex>"}

``_h`` is the first 128 bits of the SHA-256 of the previous batch's ``_h`` (:data:`GENESIS`
for the first batch) followed by the batch's bytes, from its first byte up to (not
including) ``","_h":"``. So ``_h`` seals every line of the batch and the batch's place in the
file: an edited line no longer matches the seal of its batch, and a dropped or moved batch
breaks the seal of the batch after it. ``_prev`` is the first 8 hex digits of the previous
``_h``: it tells a dropped or moved batch from an edited one. ``_c``, present when the batch
has more than one line, holds a check (16 bits of the Adler-32) of each earlier line of the
batch and then one of the sealed line itself up to ``_c``, so that verification names the
edited, dropped or moved *line*, not only its batch. One SHA-256 per batch instead of one
per line is what lets a run log hundreds of thousands of lines a second; the checks locate,
the SHA-256 seals (a check can be forged, the seal not without recomputing every later
one). An edit that a check misses (1 in 65,536) is still caught by the seal, and named at
the batch's last line.

Files written before batches existed carry a full 32-digit ``_prev`` on every line, and
``_h`` covers that line alone up to ``_prev``'s value; they are read and verified as they
are, and a writer continues them.

Checks work on bytes, with no JSON parsing, so verifying a log is as fast as reading it.

What the chain does not do: it has no key, so someone who rewrites a line *and* recomputes
every hash after it goes unnoticed by the chain alone; :mod:`sopbus.bus.store._verify`
cross-checks the files of a run against each other (the ledger against the events, the
artifacts against their recorded SHA-256) so that such a rewrite has to be done
consistently in several places. Dropping lines at the very end of a file is also invisible
to the chain; the run's last event (``run_ended``) and the cross-checks catch that for run
logs. Complete lines after the last seal are a batch whose writer was stopped mid-write:
they are reported, like a torn last line, as an interruption (``torn``), not as tampering,
and the next writer's seal covers them.

:mod:`._seal` writes and reads the format (what :class:`sopbus.bus._jsonl.JsonlWriter` and the
readers use); :mod:`._verify` finds the first break in a file (``sopbus verify``).
"""

from ._seal import (CHAIN_FIELDS, CHECK_HEX, CHECKS_FIELD, GENESIS, HASH_FIELD, HASH_HEX, HINT_HEX, PREV_FIELD, Seal,
                    batch_hash, check_values, checks, line_hash, open_tail, parse_seal, records_of, seal_batch,
                    split_line, unseal)
from ._verify import ChainBreak, ChainReport, Problem, verify_file

__all__ = ["CHAIN_FIELDS", "CHECKS_FIELD", "CHECK_HEX", "GENESIS", "HASH_FIELD", "HASH_HEX", "HINT_HEX", "PREV_FIELD",
           "ChainBreak", "ChainReport", "Problem", "Seal", "batch_hash", "check_values", "checks", "line_hash",
           "open_tail", "parse_seal", "records_of", "seal_batch", "split_line", "unseal", "verify_file"]
