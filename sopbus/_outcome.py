"""What a finished run hands back to Python: :class:`RunOutcome`.

Everything comes from the run directory (``summary.json``, ``events.jsonl``,
``costs.jsonl``, ``artifacts/``), so :meth:`RunOutcome.open` reads an older run the same
way as :func:`sopbus.run_scenario` returns a new one.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import msgspec

from sopbus.bus import (
    ConfigError,
    LedgerLine,
    Message,
    RunSummary,
    Verdict,
    decode_summary,
    sealed_summary,
)

_SUMMARY, _EVENTS, _COSTS, _ARTIFACTS = "summary.json", "events.jsonl", "costs.jsonl", "artifacts"


@dataclass(frozen=True)
class RunOutcome:
    """A finished run, as ``summary.json`` and its directory tell it.

    ``summary`` is the whole ``summary.json`` (:class:`~sopbus.RunSummary`, the one record
    of how a run ended); the figures a caller reads first are properties over it.
    ``status`` is ``completed``, ``failed``, ``budget_exhausted`` or ``cancelled`` (the
    ``sopbus run`` exit codes 0, 1, 3 and 130); ``end_reason`` says which ending:
    ``idle``, ``max_rounds``, ``stop_condition``, ``budget_exhausted``, ``error`` or
    ``cancelled``. ``verdict`` is the SOP's verdict, ``None`` when it states none.
    ``total_usd`` is what the run spent against ``budget_usd`` (exact ``Decimal``), with
    ``llm_calls``, ``prompt_tokens`` and ``completion_tokens``. Messages, artifacts and the
    cost ledger are read on demand.
    """

    run_dir: Path
    summary: RunSummary

    @classmethod
    def open(cls, run_dir: str | Path) -> RunOutcome:
        """The outcome of the finished run in ``run_dir``; a :class:`~sopbus.ConfigError`
        when it has no ``summary.json`` (killed, or still running: ``sopbus resume`` it) or
        the file is damaged."""
        run_dir = Path(run_dir).resolve()
        try:
            summary = decode_summary((run_dir / _SUMMARY).read_bytes())
        except FileNotFoundError:
            raise ConfigError(
                f"{run_dir} has no {_SUMMARY}: the run was killed or is still "
                f"running (`sopbus resume {run_dir}` finishes it)"
            ) from None
        except msgspec.DecodeError as error:
            raise ConfigError(
                f"{run_dir / _SUMMARY}: not a run summary ({error}); "
                f"`sopbus verify {run_dir}` checks the run"
            ) from None
        # The log's verdict, not an edited one.
        return cls(run_dir=run_dir, summary=sealed_summary(summary, run_dir))

    @property
    def run_id(self) -> str:
        return self.summary.run_id

    @property
    def status(self) -> str:
        return self.summary.status

    @property
    def end_reason(self) -> str:
        return self.summary.end_reason

    @property
    def verdict(self) -> Verdict | None:
        return self.summary.verdict

    @property
    def total_usd(self) -> Decimal:
        return self.summary.total_usd

    @property
    def budget_usd(self) -> Decimal:
        return self.summary.budget_usd

    @property
    def llm_calls(self) -> int:
        return self.summary.llm_calls

    @property
    def prompt_tokens(self) -> int:
        return self.summary.prompt_tokens

    @property
    def completion_tokens(self) -> int:
        return self.summary.completion_tokens

    @property
    def rounds(self) -> int:
        return self.summary.rounds

    @property
    def ok(self) -> bool:
        """The run completed and its verdict (if the SOP states one) passed."""
        return self.status == "completed" and self.summary.passed is not False

    @property
    def artifacts_dir(self) -> Path:
        """The directory of the files the actions wrote."""
        return self.run_dir / _ARTIFACTS

    def artifacts(self) -> dict[str, Path]:
        """The files the actions wrote, by their path relative to :attr:`artifacts_dir`
        (``"docs/prd.md"``), sorted."""
        root = self.artifacts_dir
        if not root.is_dir():
            return {}
        return {p.relative_to(root).as_posix(): p for p in sorted(root.rglob("*")) if p.is_file()}

    def read_artifact(self, name: str) -> str:
        """The text of the artifact ``name`` (a key of :meth:`artifacts`); a ``KeyError``
        naming the artifacts there are when it is not one of them."""
        found = self.artifacts()
        if name not in found:
            raise KeyError(
                f"run {self.run_id} has no artifact {name!r}; it has: {', '.join(found) or 'none'}"
            )
        return found[name].read_text(encoding="utf-8")

    def messages(self) -> list[Message]:
        """Every message the run published, in order (undelivered ones too)."""
        from sopbus.bus import MESSAGE_KINDS, read_events

        return [
            msgspec.convert(event["message"], Message)
            for event in read_events(self.run_dir / _EVENTS)
            if event.get("kind") in MESSAGE_KINDS
        ]

    def ledger(self) -> list[LedgerLine]:
        """The cost ledger: one line per LLM call attempt (see ``costs.jsonl``)."""
        from sopbus.bus import load_ledger

        return load_ledger(self.run_dir)
