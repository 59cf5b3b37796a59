"""Hash-chained JSON lines: the format, reading it back, and naming the first broken line."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sopbus.bus import JsonlWriter, LedgerLine, logical_view, read_jsonl
from sopbus.bus._chain import GENESIS, verify_file


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
    assert decoded[0]["_prev"] == GENESIS.decode()[:8]
    assert [d["_prev"] for d in decoded[1:]] == [d["_h"][:8] for d in decoded[:-1]]
    assert [list(d)[-2:] for d in decoded] == [["_prev", "_h"]] * 3
    # _h seals the line after the previous _h (in full, not only the 8 digits of _prev)
    prev = GENESIS
    for line in lines(path):
        cut = line.rindex(b'","_h":"')
        assert hashlib.sha256(prev + line[:cut]).hexdigest()[:32].encode() == line[cut + 8 : -2]
        prev = line[cut + 8 : -2]
    report = verify_file(path)
    assert report.intact and report.lines == 3 and report.head.decode() == decoded[-1]["_h"]


def test_reading_gives_the_records_as_written(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    records = [{"n": 1, "text": 'a\nb "q" _prev'}, {}, {"n": 3, "_h": "own field"}]
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
@given(
    st.lists(
        st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=20), max_size=4),
        min_size=1,
        max_size=8,
    ),
    st.data(),
)
def test_editing_any_byte_names_that_line(
    tmp_path_factory: pytest.TempPathFactory, records: list[dict[str, Any]], data: st.DataObject
) -> None:
    path = tmp_path_factory.mktemp("edit") / "x.jsonl"
    write(path, records)
    original = lines(path)
    index = data.draw(st.integers(0, len(original) - 1))
    line = bytearray(original[index])
    pos = data.draw(st.integers(0, len(line) - 1))
    line[pos] = data.draw(st.integers(32, 126).filter(lambda b: b != line[pos]))
    edited = [*original[:index], bytes(line), *original[index + 1 :]]
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

    line = LedgerLine(
        seq=1,
        round=1,
        role="r",
        action="a",
        provider="sim",
        model="m",
        prompt_tokens=1,
        completion_tokens=2,
        cached_tokens=0,
        cost_usd=Decimal("0.001"),
        total_usd=Decimal("0.001"),
        budget_usd=Decimal("1"),
        attempt=1,
        outcome="ok",
        latency_ms=1.0,
        t=2.0,
    )
    write(tmp_path / "costs.jsonl", [line])
    assert list(read_jsonl(tmp_path / "costs.jsonl", LedgerLine)) == [line]


# -- sealed batches ---------------------------------------------------------------------


def write_batches(path: Path, batches: list[list[Any]]) -> None:
    with JsonlWriter(path) as writer:
        for batch in batches:
            writer.write_all(batch)


def test_a_batch_is_sealed_once_on_its_last_line(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    write_batches(path, [[Rec(1), Rec(2), Rec(3)], [Rec(4)]])
    got = lines(path)
    assert [b'"_h":"' in line for line in got] == [False, False, True, True]
    assert list(msgspec.json.decode(got[2]))[-3:] == [
        "_prev",
        "_c",
        "_h",
    ]  # one check per earlier line
    assert verify_file(path).intact and [r.n for r in read_jsonl(path, Rec)] == [1, 2, 3, 4]


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(1, 5), min_size=1, max_size=5), st.data())
def test_editing_any_byte_of_a_batch_names_that_line(
    tmp_path_factory: pytest.TempPathFactory, sizes: list[int], data: st.DataObject
) -> None:
    path = tmp_path_factory.mktemp("batch") / "x.jsonl"
    n = iter(range(100))
    write_batches(path, [[{"n": next(n), "text": "abc"} for _ in range(size)] for size in sizes])
    original = lines(path)
    index = data.draw(st.integers(0, len(original) - 1))
    line = bytearray(original[index])
    pos = data.draw(st.integers(0, len(line) - 1))
    line[pos] = data.draw(st.integers(32, 126).filter(lambda b: b != line[pos]))
    path.write_bytes(b"\n".join([*original[:index], bytes(line), *original[index + 1 :]]) + b"\n")
    broken = verify_file(path).broken
    assert broken is not None and broken.line == index + 1, broken
    assert broken.problem in ("edited", "unchained")


def test_a_line_dropped_or_moved_inside_a_batch_is_named(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    write_batches(path, [[Rec(0)], [Rec(n) for n in range(1, 6)], [Rec(6)]])
    kept = lines(path)  # the batch of five is lines 2 to 6
    path.write_bytes(b"\n".join(kept[:2] + kept[3:]) + b"\n")
    broken = verify_file(path).broken
    assert broken is not None and (broken.line, broken.problem) == (3, "dropped")
    path.write_bytes(b"\n".join([kept[0], kept[1], kept[3], kept[2], *kept[4:]]) + b"\n")
    broken = verify_file(path).broken
    assert broken is not None and (broken.line, broken.problem) == (3, "reordered")


def test_a_dropped_seal_line_names_the_line_after_the_gap(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    write_batches(path, [[Rec(1), Rec(2)], [Rec(3), Rec(4)]])
    kept = lines(path)
    path.write_bytes(b"\n".join([kept[0], kept[2], kept[3]]) + b"\n")
    broken = verify_file(path).broken
    assert broken is not None and (broken.line, broken.problem) == (2, "dropped")


def test_a_batch_cut_short_is_torn_and_the_next_writer_seals_it(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    write_batches(path, [[Rec(1)], [Rec(2), Rec(3), Rec(4)]])
    whole = path.read_bytes()
    cut = whole.index(b'{"n":4')  # killed mid-write: lines 2 and 3 are complete, 4 is not
    path.write_bytes(whole[: cut + 5])
    report = verify_file(path)
    assert report.intact and report.torn is not None and report.torn.line == 2
    assert "2 complete line(s) without their seal" in report.torn.detail
    assert [r.n for r in read_jsonl(path, Rec)] == [1, 2, 3]
    write_batches(path, [[Rec(5)]])  # reopening cuts the torn line; the new seal covers 2 and 3
    report = verify_file(path)
    assert report.intact and report.torn is None and report.lines == 4
    assert [r.n for r in read_jsonl(path, Rec)] == [1, 2, 3, 5]


def test_a_file_written_line_by_line_before_batches_still_verifies(tmp_path: Path) -> None:
    path = tmp_path / "old.jsonl"
    prev, out = GENESIS, []
    for n in (1, 2):
        body = b'{"n":%d,"_prev":"' % n + prev
        digest = hashlib.sha256(body).hexdigest()[:32].encode()
        out.append(body + b'","_h":"' + digest + b'"}')
        prev = digest
    path.write_bytes(b"\n".join(out) + b"\n")
    assert verify_file(path).intact
    write_batches(path, [[Rec(3), Rec(4)]])  # a new writer continues the old chain
    assert verify_file(path).intact and [r.n for r in read_jsonl(path, Rec)] == [1, 2, 3, 4]
    edited = path.read_bytes().replace(b'"n":2', b'"n":7')
    path.write_bytes(edited)
    broken = verify_file(path).broken
    assert broken is not None and (broken.line, broken.problem) == (2, "edited")
