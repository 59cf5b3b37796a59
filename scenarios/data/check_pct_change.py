"""Acceptance check for scenarios/code_and_run.toml (run by the Executor in the sandbox).

The task holds when pct_change.csv has, for every date after the first, the percentage
change of each price series from the day before (within 0.01 percentage points), and
pct_change.png is a PNG image of a plausible size. Prints each problem; exit 1 if any.
"""

import csv
import itertools
import struct
import sys
from pathlib import Path


def expected() -> dict[str, dict[str, float]]:
    with open("prices.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    series = [k for k in rows[0] if k != "date"]
    return {
        now["date"]: {s: (float(now[s]) / float(before[s]) - 1) * 100 for s in series}
        for before, now in itertools.pairwise(rows)
    }


def check_table(want: dict[str, dict[str, float]]) -> list[str]:
    path = Path("pct_change.csv")
    if not path.exists():
        return ["pct_change.csv was not written"]
    with path.open(newline="") as f:
        got = {row.get("date", ""): row for row in csv.DictReader(f)}
    problems = [f"pct_change.csv has no row for {d}" for d in want if d not in got]
    for date, values in want.items():
        for series, value in values.items():
            cell = got.get(date, {}).get(series)
            try:
                ok = cell is not None and abs(float(cell) - value) <= 0.01
            except ValueError:
                ok = False
            if date in got and not ok:
                problems.append(f"{date} {series}: expected {value:.4f}, got {cell!r}")
    return problems


def check_plot() -> list[str]:
    path = Path("pct_change.png")
    if not path.exists():
        return ["pct_change.png was not written"]
    data = path.read_bytes()
    if data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
        return ["pct_change.png is not a PNG file"]
    width, height = struct.unpack(">II", data[16:24])
    if not (200 <= width <= 4000 and 150 <= height <= 4000) or b"IDAT" not in data:
        return [f"pct_change.png is {width}x{height} or has no image data; expected a plot"]
    return []


def main() -> int:
    problems = check_plot() + check_table(
        expected()
    )  # the one plot problem first: the list is cut at 20
    for problem in problems[:20]:
        print(problem)
    print("acceptance: ok" if not problems else f"acceptance: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
