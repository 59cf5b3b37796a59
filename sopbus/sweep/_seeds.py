"""Whether a sweep's seeds made a difference. The simulator's answer is a function of the
seed and the request, but a fixture answer is the same for every seed: a sweep of a
fixture-driven scenario on the simulator repeats one run N times, and its pass rate and
spread say nothing about the seeds. The sweep says so rather than let a reader believe them.
"""

from __future__ import annotations

import hashlib
import shutil
import textwrap
from collections import defaultdict
from pathlib import Path

from sopbus.bus import message_sequence

from ._record import SweepRecord


def same_across_seeds(record: SweepRecord) -> list[str]:
    """The variants whose ended runs (two or more seeds) all have the same messages."""
    digests: dict[str, set[str]] = defaultdict(set)
    ended: dict[str, int] = defaultdict(int)
    for entry in record.runs:
        events = Path(record.runs_dir) / entry.run_id / "events.jsonl"
        if entry.state == "done" and events.is_file():
            digests[entry.variant].add(_digest(events))
            ended[entry.variant] += 1
    return [v for v, found in digests.items() if ended[v] > 1 and len(found) == 1]


def seeds_note(record: SweepRecord) -> str:
    """A line for the end of a sweep when seeds made no difference, else ``""``."""
    same = same_across_seeds(record)
    if not same:
        return ""
    which = "every variant" if len(same) == len(record.variants) else ", ".join(sorted(same))
    text = (
        f"note: every seed gave the same messages in {which}: the answers do not depend on "
        "the seed (the simulator's fixture answers are the same for every seed), so one seed "
        "says as much as all; compare seeds with a real model or without fixtures"
    )
    return textwrap.fill(text, width=max(40, min(100, shutil.get_terminal_size().columns)))


def _digest(events: Path) -> str:
    """The run's messages as ``sopbus diff`` compares them, in one hash."""
    h = hashlib.blake2b(digest_size=16)
    for event in message_sequence(events):
        h.update(repr(sorted(event.items())).encode())
    return h.hexdigest()
