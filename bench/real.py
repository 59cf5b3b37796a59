"""Every shipped scenario against a real server with a real model: llama.cpp's ``llama-server``
serving SmolLM2-135M-Instruct (built by ``.ci/llama-server``), started as the tests start it
(tests/support/llama_server.py: one thread, 2 slots of 2048 tokens).

Each scenario runs from a copy with small ``max_tokens`` and few rounds (``--max-tokens``,
``--max-rounds``; a scenario with a role a person answers is left out), temperature 0 and a repeat penalty, priced ``--price 1,0`` so that a
call's reservation in USD is its prompt bound in tokens. Printed per scenario: the calls,
the answers cut at ``max_tokens``, the ledger's prompt and completion tokens against what
the server's ``/metrics`` counted meanwhile, the prompt tokens reserved against those
billed, the share of prompt tokens served from the server's cache (``cached_tokens``), the
wall time, the server's prompt and generation speeds (tokens/s, from its counters) and how
the run ended. ``--no-tokenize`` runs with ``[llm] tokenize = false``
(sopbus's own bound, for the comparison).

    python bench/real.py [--max-tokens 64] [--max-rounds 4] [--only NAME ...] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from decimal import Decimal
from pathlib import Path
from typing import Any

import tomli_w

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from support.llama_server import MODEL, LlamaServer, available, llama_home  # noqa: E402


def needs_a_person(path: Path) -> bool:
    """A scenario with a role answered by a person (``human = true``): not for a bench."""
    doc = tomllib.loads(path.read_text(encoding="utf-8"))
    return any(role.get("human") for role in doc.get("roles", []))


def small_copy(
    source: Path, into: Path, *, max_tokens: int, max_rounds: int, tokenize: bool
) -> Path:
    """``source`` rewritten for a small real run, beside copies of the files it names."""
    doc = tomllib.loads(source.read_text(encoding="utf-8"))
    llm = doc.setdefault("llm", {})
    llm |= {"max_tokens": max_tokens, "temperature": 0.0, "timeout_s": 300.0}
    llm["extra_body"] = {**llm.get("extra_body", {}), "repeat_penalty": 1.3}
    llm["tokenize"] = tokenize
    doc.setdefault("run", {})["max_rounds"] = max_rounds
    for table in (*doc.get("actions", {}).values(), *doc.get("roles", [])):
        if isinstance(table, dict) and "max_tokens" in table.get("llm", {}):
            table["llm"]["max_tokens"] = min(table["llm"]["max_tokens"], max_tokens)
    path = into / source.name
    path.write_text(tomli_w.dumps(doc), encoding="utf-8")
    return path


def read(path: Path) -> list[dict[str, Any]]:
    """The JSON lines of ``path``; none when the run never wrote it (it ended before a call)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def measure(server: LlamaServer, scenario: Path, runs: Path) -> dict[str, Any]:
    before, timed = server.billed(), server.metrics()
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "sopbus", "run", str(scenario), "--provider", "openai",
         "--base-url", server.base_url, "--model", MODEL, "--price", "1,0",
         "--runs-dir", str(runs), "--quiet", "--sandbox", "local"],
        cwd=scenario.parent, env={**os.environ, "OPENAI_API_KEY": "local"},
        capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    wall = time.monotonic() - started
    after, spent = server.billed(), server.metrics()
    found = [p for p in runs.iterdir() if p.is_dir()]
    if not found or not (found[0] / "summary.json").exists():  # refused (exit 2): say why
        return {"exit": done.returncode, "error": done.stderr.strip().splitlines()[-1:]}
    (run_dir,) = found
    lines = [x for x in read(run_dir / "costs.jsonl") if x["outcome"] != "refused"]
    events = read(run_dir / "events.jsonl")
    answers = [c for c in read(run_dir / "calls.jsonl") if "completion" in c]  # not tool lines
    billed = {c["call"]: c["completion"]["usage"] for c in answers}
    tools = [c for c in read(run_dir / "calls.jsonl") if c.get("kind") == "tool"]
    reserved = {
        e["data"]["call"]: Decimal(e["data"]["amount"]) * 1_000_000
        for e in events
        if e["kind"] == "llm_reserved"
    }
    answered = [c for c in reserved if c in billed]
    prompt = sum(x["prompt_tokens"] for x in lines)
    summary = json.loads((run_dir / "summary.json").read_text())
    return {
        "exit": done.returncode,
        "end": summary.get("end_reason"),
        "verdict": (summary.get("verdict") or {}).get("passed"),
        "tool_calls": len(tools),
        "tool_ms": sum(t.get("duration_ms") or 0 for t in tools),
        "calls": len(lines),
        "cut": sum(x.get("finish_reason") == "length" for x in lines),
        "errors": sum(x["outcome"] == "error" for x in lines),
        "ledger_prompt": prompt,
        "server_prompt": after[0] - before[0],
        "ledger_completion": sum(x["completion_tokens"] for x in lines),
        "server_completion": after[1] - before[1],
        "reserved_prompt": int(sum(reserved[c] for c in answered)),
        "billed_prompt": sum(billed[c]["prompt_tokens"] for c in answered),
        "under_reserved": sum(reserved[c] < billed[c]["prompt_tokens"] for c in answered),
        "cached_share": round(sum(x["cached_tokens"] for x in lines) / prompt, 3) if prompt else 0,
        "wall_s": round(wall, 1),
        **speeds(timed, spent),
    }


def speeds(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """The server's prompt and generation speeds meanwhile, in tokens/s, from its counters."""
    out = {}
    for key, tokens, seconds in (
        ("prompt_tps", "prompt_tokens_total", "prompt_seconds_total"),
        ("gen_tps", "tokens_predicted_total", "tokens_predicted_seconds_total"),
    ):
        took = after[f"llamacpp:{seconds}"] - before[f"llamacpp:{seconds}"]
        done = after[f"llamacpp:{tokens}"] - before[f"llamacpp:{tokens}"]
        out[key] = round(done / took, 1) if took > 0 else 0.0
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--max-rounds", type=int, default=4)
    parser.add_argument("--only", nargs="*", help="scenario file stems (default: all)")
    parser.add_argument("--no-tokenize", action="store_true", help="[llm] tokenize = false")
    parser.add_argument("--json", action="store_true", help="one JSON line keyed by scenario")
    args = parser.parse_args()
    if available() is None:
        raise SystemExit(f"no llama-server in {llama_home()}: run .ci/llama-server first")
    names = args.only or sorted(
        p.stem for p in (ROOT / "scenarios").glob("*.toml") if not needs_a_person(p)
    )
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "scenarios"
        shutil.copytree(ROOT / "scenarios", work)  # fixtures, data and modules they name
        server = LlamaServer(llama_home(), Path(tmp) / "llama-server.log")
        server.start()
        try:
            for name in names:
                copy = small_copy(
                    work / f"{name}.toml",
                    work,
                    max_tokens=args.max_tokens,
                    max_rounds=args.max_rounds,
                    tokenize=not args.no_tokenize,
                )
                runs = Path(tmp) / "runs" / name
                runs.mkdir(parents=True)
                results[name] = measure(server, copy, runs)
                if not args.json:
                    print(name, json.dumps(results[name]), flush=True)
        finally:
            server.stop()
    if args.json:
        print(json.dumps(results))
    else:
        ran = [r for r in results.values() if "calls" in r]
        total = {k: round(sum(r[k] for r in ran), 1) for k in ("calls", "cut", "wall_s")}
        held = sum(r["reserved_prompt"] for r in ran)
        billed = sum(r["billed_prompt"] for r in ran)
        print(f"total: {total}; prompt reserved/billed = {held}/{billed}"
              f" = {held / billed if billed else 0:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
