"""How much of each shipped scenario's prompts a prefix cache can serve.

Runs every ``scenarios/*.toml`` (or those named with ``--only``) in a temporary runs
directory and watches each request the run sends to its provider. For each request it takes
the longest common token prefix with any earlier request of the same run, counted with the
project's tokenizer (``sopbus.bus.llm._prefix``), and reports the sum of those prefixes over
the sum of the requests' tokens: the most any prefix cache can serve.

"Earlier request" means an earlier request of the run by **any** role (``any``, the figure
``--json`` prints): a server's cache is shared by every caller. ``role`` counts a prefix only
when the earlier request is by the same role (what a cache per caller, or a server slot kept
per role, could serve). The schema is not counted (servers send it as a grammar or tool).
A person's answers (``human = true`` roles, answered from a file of approvals here) are not
requests to a model and are not counted.

With ``--base-url URL --model NAME`` the same scenarios run against that OpenAI-compatible
server (``OPENAI_API_KEY`` defaults to ``local``; priced $0) and the table adds ``served``:
the share of prompt tokens the server itself reported as cached (``cached_tokens`` of the
run's ledger, ``costs.jsonl``), next to the most it could have served.

    python bench/prefix.py [--json] [--only NAME ...] [--base-url URL --model NAME]

``--json`` prints one line: ``{"software_company": 0.71, ...}`` (``any``, by file stem).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout, uninstalled

from sopbus._assemble import _execute, execute, quiet_for_the_api, run_environ  # noqa: E402
from sopbus.bus import LLMRequest  # noqa: E402
from sopbus.bus.llm._prefix import PrefixTally  # noqa: E402
from sopbus.bus.scenario import load_scenario  # noqa: E402
from sopbus.bus.scenario._load import scenario_with_overrides  # noqa: E402

APPROVAL = '{"approved": true, "note": "ok"}\n'


@dataclass
class Figures:
    """One scenario's run: its calls, the shares, the server's cached share (or None)."""

    status: str
    calls: int
    any_share: float
    role_share: float
    served: float | None
    run_dir: Path


@contextlib.contextmanager
def watching(sent: list[LLMRequest]) -> Iterator[None]:
    """Every request the runs started inside send to their provider, appended to ``sent``."""
    make = _execute.make_provider

    def watched(scenario: Any, environ: Any) -> Any:
        provider = make(scenario, environ)
        complete = provider.complete

        async def noted(request: LLMRequest) -> Any:
            sent.append(request)
            return await complete(request)

        provider.complete = noted
        return provider

    _execute.make_provider = watched  # type: ignore[assignment]
    try:
        yield
    finally:
        _execute.make_provider = make  # type: ignore[assignment]


def shares(requests: list[LLMRequest]) -> tuple[float, float]:
    """The ``any`` and the ``role`` share of ``requests`` (see the module docstring)."""
    by_role: dict[str, PrefixTally] = {}
    for request in requests:
        by_role.setdefault(request.role, PrefixTally()).add(request)
    total = sum(t.total for t in by_role.values())
    role = sum(t.shared for t in by_role.values()) / total if total else 0.0
    return PrefixTally(requests).share, role


def served_share(run_dir: Path) -> float:
    """The server's cached tokens over the prompt tokens, from the run's ledger."""
    prompt = cached = 0
    for line in (run_dir / "costs.jsonl").read_text(encoding="utf-8").splitlines():
        entry = json.loads(line)
        prompt += int(entry.get("prompt_tokens") or 0)
        cached += int(entry.get("cached_tokens") or 0)
    return cached / prompt if prompt else 0.0


def measure(path: Path, runs_dir: Path, server: tuple[str, str] | None = None) -> Figures:
    """Runs the scenario at ``path`` under ``runs_dir`` and measures its prompts."""
    overrides: dict[str, Any] = {"runs_dir": runs_dir}
    environ = dict(run_environ())
    if server is not None:
        overrides.update(provider="openai", base_url=server[0], model=server[1], price=(0, 0))
        environ.setdefault("OPENAI_API_KEY", "local")
    scenario = scenario_with_overrides(load_scenario(path), **overrides)
    answers = runs_dir / f"{path.stem}.answers.jsonl"
    answers.write_text(APPROVAL * 100, encoding="utf-8")
    sent: list[LLMRequest] = []
    with watching(sent):
        done = trio.run(lambda: execute(scenario, environ=environ, human_input=answers))
    any_share, role_share = shares(sent)
    served = served_share(done.run_dir) if server is not None else None
    return Figures(done.summary.status, len(sent), any_share, role_share, served, done.run_dir)


def scenario_paths(only: list[str]) -> list[Path]:
    paths = sorted((ROOT / "scenarios").glob("*.toml"))
    if not only:
        return paths
    unknown = sorted(set(only) - {p.stem for p in paths})
    if unknown:
        sys.exit(f"--only: no shipped scenario {', '.join(unknown)} in {ROOT / 'scenarios'}")
    return [p for p in paths if p.stem in only]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="one JSON line: stem -> any share")
    parser.add_argument("--only", action="append", default=[], metavar="NAME")
    parser.add_argument("--base-url", help="an OpenAI-compatible server (…/v1)")
    parser.add_argument("--model", help="the server's model (with --base-url)")
    args = parser.parse_args()
    if (args.base_url is None) != (args.model is None):
        parser.error("--base-url and --model go together")
    server = (args.base_url, args.model) if args.base_url else None
    quiet_for_the_api()
    results: dict[str, Figures] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for path in scenario_paths(args.only):
            results[path.stem] = measure(path, Path(tmp), server)
    if args.json:
        print(json.dumps({stem: round(f.any_share, 3) for stem, f in results.items()}))
        return
    head = f"{'scenario':34} {'status':10} {'calls':>5} {'any':>6} {'role':>6}"
    print(head + (f" {'served':>7}" if server else ""))
    for stem, f in results.items():
        line = f"{stem:34} {f.status:10} {f.calls:5d} {f.any_share:6.3f} {f.role_share:6.3f}"
        print(line + (f" {f.served:7.3f}" if f.served is not None else ""))


if __name__ == "__main__":
    main()
