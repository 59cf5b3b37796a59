"""Verdicts shared by SOPs: small judges a SOP hands its :class:`~sopbus.sops._team.Team`.

A judge looks at a finished run (:class:`sopbus.bus.RunRecord`) and says whether it did what the
SOP is for (see docs/sops.md, "Verdicts").
"""

from __future__ import annotations

from collections.abc import Callable

from sopbus.bus import RunRecord, Verdict


def said_token(
    token: str, *, in_action: str, counting: str, noun: str
) -> Callable[[RunRecord], Verdict]:
    """Passed when a message caused by ``in_action`` contains the done ``token`` (CAMEL's
    ``<CAMEL_TASK_DONE>``, a group chat's ``TERMINATE``). The reason names who said it and
    how many ``counting`` messages (called ``noun``) came before the run ended; a run that
    ended without the token failed, for the reason the run ended."""

    def judge(record: RunRecord) -> Verdict:
        said = [m for m in record.of(in_action) if token in m.content]
        count = len(record.of(counting))
        if said:
            return Verdict(
                passed=True, reason=f"{said[0].sent_from} said {token!r} after {count} {noun}"
            )
        why = record.detail or record.end_reason
        return Verdict(
            passed=False, reason=f"the run ended without {token!r} after {count} {noun}: {why}"
        )

    return judge
