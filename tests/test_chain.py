"""Hash-chained JSON lines: the format, reading it back, and naming the first broken line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bus import JsonlWriter, LedgerLine, logical_view, read_jsonl
from bus._chain import GENESIS, verify_file


class Rec(msgspec.Struct, forbid_unknown_fields=True):
    n: int
    text: str = ""


def write(path: Path, records: list[Any]) -> None:
    with JsonlWriter(path) as writer:
        for record in records:
            writer.write(record)


def lines(path: Path) -> list[bytes]:
    return path.read_bytes().split(b"\n")[:-1]


def test_each_line_carries_the_previous_lines_hash(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    write(path, [Rec(1), {"a": [1, 2]}, {}])
    decoded = [msgspec.json.decode(line) for line in lines(path)]
    assert decoded[0]["_prev"] == GENESIS.decode()
    assert [d["_prev"] for d in decoded[1:]] == [d["_h"] for d in decoded[:-1]]
    assert [list(d)[-2:] for d in decoded] == [["_prev", "_h"]] * 3
    report = verify_file(path)
    assert report.intact and report.lines == 3 and report.head.decode() == decoded[-1]["_h"]


def test_reading_gives_the_records_as_written(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    records = [{"n": 1, "text": "a\nb \"q\" _prev"}, {}, {"n": 3, "_h": "own field"}]
    write(path, records)
    assert list(read_jsonl(path)) == records
    # typed reads work with strict structs: the chain fields never reach the decoder
    write(tmp_path / "s.jsonl", [Rec(1, "x"), Rec(2)])
    assert list(read_jsonl(tmp_path / "s.jsonl", Rec)) == [Rec(1, "x"), Rec(2)]


def test_logical_view_drops_the_chain_fields_at_any_depth() -> None:
    record = {"kind": "x", "_prev": "0", "_h": "1", "call": {"cost": 1, "_h": "2"}}
    assert list(logical_view([record])) == [{"kind": "x", "call": {"cost": 1}}]


def test_a_non_object_record_is_refused(tmp_path: Path) -> None:
    with JsonlWriter(tmp_path / "x.jsonl") as writer, pytest.raises(TypeError, match="JSON object"):
        writer.write([1, 2])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=20), max_size=4),
                min_size=1, max_size=8),
       st.data())
def test_editing_any_byte_names_that_line(tmp_path_factory: pytest.TempPathFactory,
                                          records: list[dict[str, Any]], data: st.DataObject) -> None:
    path = tmp_path_factory.mktemp("edit") / "x.jsonl"
    write(path, records)
    original = lines(path)
    index = data.draw(st.integers(0, len(original) - 1))
    line = bytearray(original[index])
    pos = data.draw(st.integers(0, len(line) - 1))
    line[pos] = data.draw(st.integers(32, 126).filter(lambda b: b != line[pos]))
    edited = [*original[:index], bytes(line), *original[index + 1:]]
    path.write_bytes(b"\n".join(edited) + b"\n")
    broken = verify_file(path).broken
    assert broken is not None and broken.line == index + 1
    assert broken.problem in ("edited", "unchained")


def test_a_dropped_line_is_named(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    write(path, [Rec(n) for n in range(5)])
    kept = lines(path)
    path.write_bytes(b"\n".join(kept[:2] + kept[3:]) + b"\n")
    broken = verify_file(path).broken
    assert broken is not None and (broken.line, broken.problem) == (3, "dropped")
    path.write_bytes(b"\n".join(kept[1:]) + b"\n")  # the first line
    broken = verify_file(path).broken
    assert broken is not None and (broken.line, broken.problem) == (1, "dropped")


def test_reordered_lines_are_named(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    write(path, [Rec(n) for n in range(5)])
    a = lines(path)
    path.write_bytes(b"\n".join([a[0], a[2], a[1], a[3], a[4]]) + b"\n")
    broken = verify_file(path).broken
    assert broken is not None and (broken.line, broken.problem) == (2, "reordered")
    assert "written after line 3" in broken.detail


def test_a_torn_last_line_is_torn_not_tampering(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    write(path, [Rec(1), Rec(2)])
    with open(path, "ab") as f:
        f.write(b'{"n":3,"te')
    report = verify_file(path)
    assert report.intact and report.lines == 2
    assert report.torn is not None and report.torn.line == 3 and report.torn.problem == "torn"
    assert list(read_jsonl(path, Rec)) == [Rec(1), Rec(2)]


def test_reopening_continues_the_chain_and_cuts_a_torn_line(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    write(path, [Rec(1), Rec(2, "y" * 100_000)])  # longer than one backwards read
    with open(path, "ab") as f:
        f.write(b'{"n":3,"te')
    write(path, [Rec(4)])
    report = verify_file(path)
    assert report.intact and report.torn is None and report.lines == 3
    assert [r.n for r in read_jsonl(path, Rec)] == [1, 2, 4]


def test_a_file_of_only_a_torn_line_starts_again(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_bytes(b'{"n":1')
    write(path, [Rec(5)])
    assert verify_file(path).intact and list(read_jsonl(path, Rec)) == [Rec(5)]


def test_unchained_lines_are_reported(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_bytes(b'{"n":1}\n')
    broken = verify_file(path).broken
    assert broken is not None and (broken.line, broken.problem) == (1, "unchained")


def test_the_ledger_reads_back_through_its_struct(tmp_path: Path) -> None:
    from decimal import Decimal

    line = LedgerLine(seq=1, round=1, role="r", action="a", provider="sim", model="m",
                      prompt_tokens=1, completion_tokens=2, cached_tokens=0,
                      cost_usd=Decimal("0.001"), total_usd=Decimal("0.001"),
                      budget_usd=Decimal("1"), attempt=1, outcome="ok", latency_ms=1.0, t=2.0)
    write(tmp_path / "costs.jsonl", [line])
    assert list(read_jsonl(tmp_path / "costs.jsonl", LedgerLine)) == [line]
