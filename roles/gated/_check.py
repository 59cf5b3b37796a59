"""The gated writer's detector: deterministic checks of a draft, as a program.

Run as ``python _check.py input.json``: reads the draft, the outline, the facts and the
prose evidence, prints one JSON report on stdout and exits 0. It blocks only on what a
program can verify, each error with a stable id:

- ``CONTRACT-LENGTH``, ``CONTRACT-FORBID-<n>``: length bounds, forbidden patterns (the
  output contract);
- ``OUTLINE-<event>``: a hard event whose words are missing; ``TIMELINE-<event>``: a hard
  event told before the one the outline puts ahead of it;
- ``FORESHADOW-<id>``, ``NEWFACT-<id>``: a foreshadowing or declared new fact left out;
  ``HOOK-<id>``: a hook missing from the last paragraph;
- ``FACT-<item>``: the draft matches a pattern that contradicts a canon card or the state
  ledger;
- ``COPY-<item>``: twelve or more words in a row copied from prose evidence (written alike,
  not copied).

Adjustable beats that are missing are warnings (``BEAT-<id>``), never errors.

Standard library only, so the gate can run it in the sandbox with nothing installed.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from typing import Any

SCHEMA = "gate-report/1"
COPY_WORDS = 12


def check(data: dict[str, Any]) -> dict[str, Any]:
    """The report for one input document (see the module docstring)."""
    draft: str = data["draft"]
    outline: dict[str, Any] = data["outline"]
    errors: list[dict[str, str]] = []
    warnings: list[dict[str, str]] = []
    errors += _contract(draft, outline.get("contract", {}))
    errors += _hard_events(draft, outline.get("hard_events", []))
    for key, prefix in (("foreshadowing", "FORESHADOW"), ("new_facts", "NEWFACT")):
        errors += [
            _error(f"{prefix}-{p['id']}", key, f"missing: {p['text']}", ", ".join(missing))
            for p in outline.get(key, [])
            if (missing := _missing(draft, p))
        ]
    last = [p for p in draft.split("\n\n") if p.strip()][-1:] or [""]
    errors += [
        _error(
            f"HOOK-{p['id']}",
            "hooks",
            f"not in the last paragraph: {p['text']}",
            ", ".join(missing),
        )
        for p in outline.get("hooks", [])
        if (missing := _missing(last[0], p))
    ]
    errors += _facts(draft, data.get("facts", []))
    errors += _copies(draft, data.get("prose", []))
    warnings += [
        _error(f"BEAT-{p['id']}", "beats", f"adjusted or left out: {p['text']}", ", ".join(missing))
        for p in outline.get("beats", [])
        if (missing := _missing(draft, p))
    ]
    return {
        "schema": SCHEMA,
        "sample": data["sample"],
        "draft_sha256": hashlib.sha256(draft.encode()).hexdigest(),
        "passed": not errors,
        "errors": errors,
        "warnings": warnings,
    }


def _error(id: str, rule: str, message: str, evidence: str = "") -> dict[str, str]:
    return {"id": id, "rule": rule, "message": message, "evidence": evidence}


def _missing(text: str, point: dict[str, Any]) -> list[str]:
    low = text.lower()
    return [w for w in point.get("must", []) if w.lower() not in low]


def _contract(draft: str, contract: dict[str, Any]) -> list[dict[str, str]]:
    out = []
    low, high = contract.get("min_chars", 0), contract.get("max_chars", 10**9)
    if not low <= len(draft) <= high:
        out.append(
            _error(
                "CONTRACT-LENGTH",
                "contract",
                f"the chapter has {len(draft)} characters; the contract asks {low} to {high}",
            )
        )
    for n, pattern in enumerate(contract.get("forbid", []), 1):
        found = re.search(pattern, draft)
        if found:
            out.append(
                _error(
                    f"CONTRACT-FORBID-{n}",
                    "contract",
                    f"forbidden by the contract: /{pattern}/",
                    found.group(0),
                )
            )
    return out


def _hard_events(draft: str, events: list[dict[str, Any]]) -> list[dict[str, str]]:
    out = []
    low = draft.lower()
    previous: tuple[str, int] | None = None
    for event in events:
        missing = _missing(draft, event)
        if missing:
            out.append(
                _error(
                    f"OUTLINE-{event['id']}",
                    "outline",
                    f"hard event missing: {event['text']}",
                    ", ".join(missing),
                )
            )
            continue
        anchor = low.find(event["must"][0].lower()) if event.get("must") else -1
        if previous is not None and anchor < previous[1]:
            out.append(
                _error(
                    f"TIMELINE-{event['id']}",
                    "timeline",
                    f"told before {previous[0]}, which the outline puts first",
                    event["must"][0],
                )
            )
        if anchor >= 0:
            previous = (event["id"], anchor)
    return out


def _facts(draft: str, facts: list[dict[str, Any]]) -> list[dict[str, str]]:
    out = []
    for fact in facts:
        for pattern in fact.get("forbid", []):
            found = re.search(pattern, draft, flags=re.IGNORECASE)
            if found:
                out.append(
                    _error(
                        f"FACT-{fact['id']}",
                        "facts",
                        f"contradicts {fact['id']}: {fact['text']}",
                        found.group(0),
                    )
                )
                break
    return out


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", text.lower())


def _copies(draft: str, prose: list[dict[str, Any]]) -> list[dict[str, str]]:
    words = _words(draft)
    grams = {" ".join(words[i : i + COPY_WORDS]) for i in range(len(words) - COPY_WORDS + 1)}
    out = []
    for item in prose:
        src = _words(item["text"])
        for i in range(len(src) - COPY_WORDS + 1):
            gram = " ".join(src[i : i + COPY_WORDS])
            if gram in grams:
                out.append(
                    _error(
                        f"COPY-{item['id']}",
                        "evidence",
                        f"copies {COPY_WORDS}+ words of prose evidence {item['id']}",
                        gram,
                    )
                )
                break
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: _check.py INPUT.json", file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as f:
        data = json.load(f)
    json.dump(check(data), sys.stdout, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
