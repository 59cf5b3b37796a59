"""The report's header and tables: the run's figures, each also in a ``data-figure``
attribute with its exact value (the summary's or the ledger's decimal string), so a
reader, a test or a script can take them from the page without parsing prose.

Figures come from ``summary.json`` when the run wrote one; a run that was killed or is
still going has none, and its figures are counted from the event log and the ledger.
"""

from __future__ import annotations

from decimal import Decimal
from html import escape
from typing import Any
from urllib.parse import quote

from .._summary import RunSummary
from ..money import money
from ..money import share as percent
from ._data import RunData


def figures(data: RunData, report: dict[str, Any]) -> RunSummary:
    """The header's values: the run's summary, or for a run without one (killed, still
    going) a summary counted from its log and ledger, with the status ``unfinished``."""
    if data.summary is not None:
        return data.summary
    started, ended = data.started, data.ended
    settings = started.settings if started else {}
    return RunSummary(
        run_id=data.run_dir.name,
        scenario=started.scenario if started else "",
        status="unfinished",
        end_reason=ended.reason if ended else "none yet",
        rounds=ended.round if ended else max((p.message.round for p in data.posted), default=0),
        max_rounds=started.max_rounds if started else 0,
        messages=len(data.posted),
        undelivered=sum(p.reason is not None for p in data.posted),
        llm_calls=report["calls"],
        prompt_tokens=sum(c.line.prompt_tokens for c in data.calls),
        completion_tokens=sum(c.line.completion_tokens for c in data.calls),
        total_usd=Decimal(str(report["total_usd"])),
        budget_usd=Decimal(str(settings.get("budget_usd", report["budget_usd"]))),
        provider=str(settings.get("provider", "")),
        model=str(settings.get("model", "")),
        mode=data.mode,
        detail=ended.detail if ended else "",
    )


def header_html(fig: RunSummary, data: RunData) -> str:
    """The header: title, the simulated mark, the verdict and the figures table."""
    spent, cap = fig.total_usd, fig.budget_usd
    share = f"{percent(spent, cap)} of the cap" if cap else "no cap"
    models = sorted({c.line.model for c in data.calls} | ({fig.model} if fig.model else set()))
    providers = sorted(
        {c.line.provider for c in data.calls} | ({fig.provider} if fig.provider else set())
    )
    table = "".join(
        f'<tr><th>{escape(k)}</th><td data-figure="{name}" data-value="{escape(str(v))}">'
        f"{escape(text)}</td></tr>"
        for k, name, v, text in _rows(fig, data, share, providers, models)
    )
    bar = f'<div class=meter title="{escape(share)}"><span style="width:{min(100.0, float(spent / cap * 100) if cap else 0):.2f}%"></span></div>'
    return (
        f"<header><h1>{escape(fig.scenario)} <small>{escape(fig.run_id)}</small></h1>"
        f"{_simulated(providers)}{_verdict(fig, data)}<table class=figures>{table}</table>{bar}</header>"
    )


def _rows(
    fig: RunSummary, data: RunData, share: str, providers: list[str], models: list[str]
) -> list[tuple[str, str, object, str]]:
    """The figures table: label, ``data-figure`` name, exact value, text."""
    cap = money(fig.budget_usd)
    # A counted run without its run_started says nothing of its limit.
    of = fig.max_rounds if fig.max_rounds or data.summary is not None else ""
    rows: list[tuple[str, str, object, str]] = [
        ("status", "status", fig.status, f"{fig.status} ({fig.end_reason})"),
        ("rounds", "rounds", fig.rounds, f"{fig.rounds} of {of}"),
        ("messages", "messages", fig.messages, f"{fig.messages} ({fig.undelivered} undelivered)"),
        ("LLM calls", "llm_calls", fig.llm_calls, str(fig.llm_calls)),
        (
            "tokens",
            "tokens",
            fig.prompt_tokens + fig.completion_tokens,
            f"{fig.prompt_tokens:,} prompt + {fig.completion_tokens:,} completion",
        ),
        ("spend", "total_usd", fig.total_usd, f"{money(fig.total_usd)} of {cap} ({share})"),
        ("budget", "budget_usd", fig.budget_usd, cap),
        # The value is the run's setting; the text adds whatever else answered (a person,
        # a role's own model), as the ledger saw it.
        ("provider", "provider", fig.provider, ", ".join(providers)),
        ("model", "model", fig.model, ", ".join(models)),
        ("mode", "mode", fig.mode, fig.mode),
    ]
    if fig.detail or fig.error:
        rows.insert(1, ("detail", "detail", "", str(fig.error or fig.detail)))
    if data.summary is not None:  # only a finished run knows how long it took
        rows.append(("duration", "duration_s", fig.duration_s, f"{fig.duration_s:.2f} s"))
    return rows


def _simulated(providers: list[str]) -> str:
    person = (
        (
            '<p class="mark none" data-figure="human" data-value="true">a person answered '
            "some calls (provider human)</p>"
        )
        if "human" in providers
        else ""
    )
    return machine_mark(providers) + person


def machine_mark(providers: list[str]) -> str:
    """The SIMULATED (or REPLAYED) mark when any of ``providers`` gave no model's answers."""
    if "sim" in providers:
        return (
            '<p class="mark sim" data-figure="simulated" data-value="true">SIMULATED: the '
            "answers came from sopbus's simulator (fixtures and generated text), not from a "
            "model</p>"
        )
    if "replay" in providers:
        return (
            '<p class="mark sim" data-figure="simulated" data-value="replayed">REPLAYED: the '
            "answers came from a recording, not from a model now</p>"
        )
    return ""


def evidence(fig: RunSummary, data: RunData) -> str:
    """The artifact the verdict rests on, when the run wrote it ("" otherwise)."""
    path = fig.verdict.evidence if fig.verdict is not None else ""
    return path if path in data.artifacts else ""


def artifact_id(path: str) -> str:
    """The element id of an artifact's entry on the page (a link target: ``#artifact-...``)."""
    return f"artifact-{path}"


def _verdict(fig: RunSummary, data: RunData) -> str:
    if data.summary is None:  # an unfinished run has no verdict yet
        return ""
    verdict = fig.verdict
    if verdict is None:
        return '<p class="mark none" data-figure="verdict" data-value="none">verdict: none (the SOP states none)</p>'
    word, cls = ("PASSED", "pass") if verdict.passed else ("FAILED", "fail")
    path = evidence(fig, data)
    link = (
        f' <a class=evidence href="#{escape(quote(artifact_id(path)))}">read {escape(path)}</a>'
        if path
        else ""
    )
    return (
        f'<p class="mark {cls}" data-figure="verdict" data-value="{str(verdict.passed).lower()}">verdict: '
        f"{word}: {escape(verdict.reason)}{link}</p>"
    )


_GROUPS = (("by_role", "role"), ("by_action", "action"), ("by_model", "model"))


def cost_tables(report: dict[str, Any]) -> str:
    """Cost and tokens by role, action and model, as tables with exact values."""
    out = []
    for key, field in _GROUPS:
        body = "".join(
            f'<tr data-{field}="{escape(name)}"><td>{escape(name or "-")}</td><td>{e["calls"]}</td>'
            f"<td>{e['prompt_tokens']:,}</td><td>{e['completion_tokens']:,}</td>"
            f'<td data-value="{e["cost_usd"]}">{money(e["cost_usd"])}</td></tr>'
            for name, e in sorted(report[key].items(), key=lambda item: -item[1]["cost_usd"])
        )
        out.append(
            f'<table class="costs" data-group="{field}"><caption>by {field}</caption><tr><th>{field}</th>'
            f"<th>calls</th><th>prompt</th><th>completion</th><th>cost</th></tr>{body}</table>"
        )
    outcomes = ", ".join(f"{n} {k}" for k, n in sorted(report["outcomes"].items()))
    return f"<div class=tables>{''.join(out)}</div><p class=note>ledger lines: {escape(outcomes or 'none')}</p>"
