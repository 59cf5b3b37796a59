"""Bad input to a population: exit 2 (ConfigError) naming the file, the place and the fix."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from sopbus.bus import ConfigError, load_scenario
from sopbus.bus.scenario import PopulationSpec
from sopbus.sops import build_team
from support.cli import sopbus
from support.populations import small_game


def _with_file(tmp_path: Path, name: str, text: str, count: int = 3) -> Path:
    (tmp_path / name).write_text(text, encoding="utf-8")
    path = small_game(tmp_path, count=count)
    body = path.read_text().replace(
        'attributes = { persona = ["a cautious saver", "a bold gambler", "a student of game '
        'theory", "a retired teacher"], age = "int 18..80" }',
        f'attributes_file = "{name}"',
    )
    path.write_text(body)
    return path


def test_a_csv_file_gives_one_row_an_agent(tmp_path: Path) -> None:
    path = _with_file(tmp_path, "people.csv", "persona,age\nsaver,30\ngambler,41\nstudent,19\n")
    table = build_team(load_scenario(path)).populations[0].table
    assert [table.attributes(i)["age"] for i in range(3)] == [30, 41, 19]
    assert table.attributes(1)["persona"] == "gambler"


def test_a_csv_row_with_a_missing_field_names_the_file_row_and_column(tmp_path: Path) -> None:
    path = _with_file(tmp_path, "people.csv", "persona,age\nsaver,30\ngambler\nstudent,19\n")
    with pytest.raises(ConfigError) as caught:
        build_team(load_scenario(path))
    text = str(caught.value)
    assert "people.csv" in text and "row 2" in text and "column 'age'" in text


def test_a_jsonl_row_that_is_not_json_names_the_row(tmp_path: Path) -> None:
    rows = '{"persona": "a", "age": 1}\n{"persona": "b", "age": }\n{"persona": "c", "age": 3}\n'
    path = _with_file(tmp_path, "people.jsonl", rows)
    with pytest.raises(ConfigError, match=r"people\.jsonl: row 2, column \d+: not JSON"):
        build_team(load_scenario(path))


def test_a_jsonl_row_with_other_columns_names_the_column(tmp_path: Path) -> None:
    rows = '{"persona": "a", "age": 1}\n{"persona": "b", "height": 2}\n{"persona": "c", "age": 3}\n'
    path = _with_file(tmp_path, "people.jsonl", rows)
    with pytest.raises(ConfigError, match=r"row 2, column '(age|height)'"):
        build_team(load_scenario(path))


def test_a_file_shorter_than_the_count_says_both(tmp_path: Path) -> None:
    path = _with_file(tmp_path, "people.csv", "persona,age\nsaver,30\n", count=3)
    with pytest.raises(ConfigError, match=r"has 1 rows, but count = 3; set count = 1"):
        build_team(load_scenario(path))


def test_a_parquet_file_gives_one_row_an_agent(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow", reason="needs pyarrow: pip install -e '.[parquet]'")
    import pyarrow.parquet as pq

    people = pa.table({"persona": ["saver", "gambler", "student"], "age": [30, 41, 19]})
    pq.write_table(people, tmp_path / "people.parquet")
    path = _with_file(tmp_path, "ignored.csv", "")
    path.write_text(path.read_text().replace('"ignored.csv"', '"people.parquet"'))
    table = build_team(load_scenario(path)).populations[0].table
    assert [table.attributes(i)["age"] for i in range(3)] == [30, 41, 19]
    assert table.attributes(2)["persona"] == "student"


@pytest.mark.skipif(importlib.util.find_spec("pyarrow") is not None, reason="pyarrow is installed")
def test_parquet_without_pyarrow_names_the_extra(tmp_path: Path) -> None:
    path = _with_file(tmp_path, "people.parquet", "not parquet")
    with pytest.raises(ConfigError, match=r"needs pyarrow.*sopbus\[parquet\]"):
        build_team(load_scenario(path))


def test_a_count_the_machine_cannot_hold_is_refused_with_the_estimate() -> None:
    from sopbus.sops import check_memory

    spec = PopulationSpec(
        name="P", count=50_000_000, actions=("Guess",), attributes={"a": "int 1..2"}
    )
    with pytest.raises(ConfigError) as caught:
        check_memory(spec, "f.toml: $.populations[0]", available=2**30)
    text = str(caught.value)
    assert "$.populations[0].count" in text and "MiB" in text and "lower count to at most" in text
    check_memory(spec, "f.toml: $.populations[0]", available=2**40)  # fits: no error


def test_a_count_past_the_limit_exits_2_before_any_run(tmp_path: Path) -> None:
    done = sopbus(
        "run", small_game(tmp_path), "--set", "populations.Player.count=1000000000", cwd=tmp_path
    )
    assert done.returncode == 2 and "count" in done.stderr and "100000000" in done.stderr
    assert not (tmp_path / "runs").exists()


def test_active_outside_the_range_exits_2_with_the_field(tmp_path: Path) -> None:
    done = sopbus("run", small_game(tmp_path), "--set", "populations.Player.active=2", cwd=tmp_path)
    assert done.returncode == 2 and "active" in done.stderr and "(0, 1]" in done.stderr


def test_an_attributes_file_outside_the_folder_names_the_populations_field(
    tmp_path: Path,
) -> None:
    # The file exists, one level up: the refusal is about where it is, and it names the
    # field that says it (the old message pointed at `$.sop`, which never named it).
    game = tmp_path / "game"
    game.mkdir()
    (tmp_path / "people.csv").write_text("persona,age\nsaver,30\ngambler,41\nstudent,19\n")
    path = _with_file(game, "unused.csv", "persona,age\n")
    path.write_text(path.read_text().replace('"unused.csv"', '"../people.csv"'))
    done = sopbus("run", path, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert str(path) in done.stderr
    assert "$.populations[0].attributes_file" in done.stderr and "$.sop" not in done.stderr
    assert "allow_outside" in done.stderr and "keep the file in that folder" in done.stderr
    assert not (game / "runs").exists()
