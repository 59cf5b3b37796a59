"""Verdicts shared by SOPs: small judges a SOP hands its :class:`~sopbus.sops._team.Team`.

A judge looks at a finished run (:class:`sopbus.bus.RunRecord`) and says whether it did what the
SOP is for (see docs/sops.md, "Verdicts").
"""

from __future__ import annotations

from collections.abc import Callable

from sopbus.bus import Message, RunRecord, Verdict


def said_token(
    token: str,
    *,
    in_action: str,
    counting: str,
    noun: str,
    at_least: int = 0,
    says: Callable[[str], bool] | None = None,
) -> Callable[[RunRecord], Verdict]:
    """Passed when a message caused by ``in_action`` contains the done ``token`` (CAMEL's
    ``<CAMEL_TASK_DONE>``, a group chat's ``TERMINATE``; ``says`` decides instead when
    given) after at least ``at_least`` ``counting`` messages (called ``noun``). The reason
    names who said it and how many came before; a run that ended without the token, said
    it too early, or said it after a ``counting`` message cut at ``max_tokens`` (its work is
    not whole), failed, and says why."""
    said_it = says or (lambda text: token in text)

    def judge(record: RunRecord) -> Verdict:
        before = 0
        early = None
        latest = None  # the last counted message so far: the work the token says is done
        for message in record.messages:
            # The token's own message counts too where it is of the counted kind (a group
            # chat's speaker says TERMINATE in a turn of the chat).
            if message.cause_by == counting:
                before += 1
                latest = message
            if message.cause_by == in_action and said_it(message.content):
                if latest is not None and latest.cut:
                    return _cut_before(message, latest, token, counting)
                if before >= at_least:
                    return Verdict(
                        passed=True,
                        reason=f"{message.sent_from} said {token!r} after {before} {noun}",
                    )
                early = early or message
        return _not_said(record, early, token, counting, noun, at_least)

    return judge


def _cut_before(message: Message, latest: Message, token: str, counting: str) -> Verdict:
    """The token was said, but the work it says is done was cut at ``max_tokens``."""
    return Verdict(
        passed=False,
        reason=f"{message.sent_from} said {token!r}, but {latest.sent_from}'s "
        f"last {counting} was cut at max_tokens (finish_reason length): a cut "
        f"answer is not a finished task; raise max_tokens for "
        f"{latest.sent_from}'s {counting}",
    )


def _not_said(
    record: RunRecord, early: Message | None, token: str, counting: str, noun: str, at_least: int
) -> Verdict:
    """The run ended without the token, or with it said too early (``early``)."""
    count = len(record.of(counting))
    if early is not None:
        return Verdict(
            passed=False,
            reason=f"{early.sent_from} said {token!r} after {count} {noun}: the task is "
            f"done only after at least {at_least}",
        )
    why = record.detail or record.end_reason
    return Verdict(
        passed=False, reason=f"the run ended without {token!r} after {count} {noun}: {why}"
    )
