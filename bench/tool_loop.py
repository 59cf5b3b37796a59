"""What the tool loop adds per tool call: a ``py`` tool loop on the simulator against the
same number of plain model calls.

Both sides run in one process on a real :class:`sopbus.bus.Gateway` and a real run store in
a temporary directory (ledger, events, ``calls.jsonl`` written and flushed). The loop side
asks an action whose fixture answers ``steps`` times with one call of ``py.echo`` and then
answers; the plain side makes ``steps + 1`` model calls of the same requests without tools.
The difference per tool call is the loop's overhead: running the tool in a worker thread,
the tool record and ``tool_called`` event, and the longer prompt the simulator counts.

    python bench/tool_loop.py [--steps N] [--repeat R] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path

import trio
from loguru import logger

from sopbus.bus import Budget, ChatMessage, Gateway, LLMRequest, PriceBook, Turn
from sopbus.bus._protocol import ToolCall
from sopbus.bus.llm import SimProvider
from sopbus.bus.llm._fixtures import Fixture
from sopbus.bus.llm._toolbox import ToolBox
from sopbus.bus.store._store import RunStore
from sopbus.roles import LLMSettings, PythonTools, Tool, ask_model


def echo(text: str) -> str:
    """Gives ``text`` back."""
    return text


def fixture(steps: int) -> Fixture:
    call = (ToolCall(id="", name="py.echo", arguments='{"text": "hello"}'),)
    return Fixture(
        action="Bench", responses=("",) * steps + ("done",), calls=(call,) * steps + ((),)
    )


async def loop_once(root: Path, steps: int) -> float:
    store = RunStore.create(root, "loop")
    sim = SimProvider(fixtures=[fixture(steps)])
    gateway = Gateway(sim, PriceBook.load(), Budget(Decimal(10)), sink=store.record_call)
    box = ToolBox([PythonTools([Tool(echo)])], gateway=gateway, store=store)
    turn = Turn(run_id="b", round=1, role="R", gateway=gateway, services=store, tools=box)
    start = time.perf_counter()
    await ask_model(
        turn,
        (ChatMessage("user", "go"),),
        output=None,
        llm=LLMSettings(model="gpt-4o-mini"),
        action="Bench",
        role="R",
        max_repairs=0,
        tools=("py.echo",),
        max_tool_steps=steps,
    )
    took = time.perf_counter() - start
    store.close()
    return took


async def plain_once(root: Path, steps: int) -> float:
    store = RunStore.create(root, "plain")
    gateway = Gateway(SimProvider(), PriceBook.load(), Budget(Decimal(10)), sink=store.record_call)
    request = LLMRequest(messages=(ChatMessage("user", "go"),), model="gpt-4o-mini", role="R")
    start = time.perf_counter()
    for _ in range(steps + 1):
        await gateway.complete(request, round=1)
    took = time.perf_counter() - start
    store.close()
    return took


async def main(steps: int, repeat: int) -> dict[str, float]:
    logger.remove()
    loops, plains = [], []
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        for _ in range(repeat):
            loops.append(await loop_once(root, steps))
            plains.append(await plain_once(root, steps))
    loop, plain = statistics.median(loops), statistics.median(plains)
    return {
        "steps": steps,
        "loop_ms": loop * 1000,
        "plain_ms": plain * 1000,
        "overhead_per_tool_call_ms": (loop - plain) / steps * 1000,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    figures = trio.run(main, args.steps, args.repeat)
    if args.json:
        json.dump(figures, sys.stdout)
        print()
    else:
        print(
            f"{args.steps} tool steps: loop {figures['loop_ms']:.2f} ms, "
            f"{args.steps + 1} plain calls {figures['plain_ms']:.2f} ms; "
            f"overhead {figures['overhead_per_tool_call_ms']:.3f} ms per tool call (median of "
            f"{args.repeat})"
        )
