"""A sweep's matrix from flags and the [sweep] table (sopbus/sweep/_plan.py)."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from sopbus.bus import ConfigError, load_scenario
from sopbus.sweep._plan import (
    seeds_from,
    split_values,
    sweep_budget,
    variant_scenario,
    variants_from,
)
from support.paths import ROOT


def test_values_are_split_at_commas_outside_brackets_and_quotes() -> None:
    assert split_values('a, "b,c" ,[1, 2],{ x = "y,z" }') == [
        "a",
        '"b,c"',
        "[1, 2]",
        '{ x = "y,z" }',
    ]


def test_the_variants_are_every_combination_in_order_and_a_flag_replaces_the_tables_key() -> None:
    table = {"llm": {"model": ["m1", "m2"]}, "sop.review": [True, False]}
    variants = variants_from(["sop.review=false", "run.max_rounds=3,5"], table)
    assert [v.settings for v in variants] == [
        (("llm.model", "m1"), ("sop.review", False), ("run.max_rounds", 3)),
        (("llm.model", "m1"), ("sop.review", False), ("run.max_rounds", 5)),
        (("llm.model", "m2"), ("sop.review", False), ("run.max_rounds", 3)),
        (("llm.model", "m2"), ("sop.review", False), ("run.max_rounds", 5)),
    ]
    assert [v.id for v in variants] == ["v1", "v2", "v3", "v4"]
    assert variants[0].label == 'llm.model="m1" sop.review=false run.max_rounds=3'
    assert variants_from([], {})[0].label == "(as the file says)"


@pytest.mark.parametrize(
    "count, span, spec, seeds",
    [
        (3, None, None, (0, 1, 2)),
        (None, "4..6", None, (4, 5, 6)),
        (None, "7", None, (7,)),
        (None, None, 2, (0, 1)),
        (None, None, "1..2", (1, 2)),
        (None, None, (9, 4, 9), (9, 4)),
        (None, None, None, (42,)),
        (2, None, "5..9", (0, 1)),
    ],
)
def test_seeds_come_from_the_flags_then_the_table_then_the_scenario(
    count: int | None,
    span: str | None,
    spec: int | str | tuple[int, ...] | None,
    seeds: tuple[int, ...],
) -> None:
    assert seeds_from(count, span, spec, 42) == seeds


def test_a_variant_is_the_scenario_with_its_settings_and_without_its_sweep_table(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.toml"
    path.write_text(
        (ROOT / "scenarios" / "software_company.toml")
        .read_text()
        .replace('"fixtures/', f'"{ROOT}/scenarios/fixtures/')
        .replace(  # files elsewhere, as it allows
            "[scenario]\n", "[scenario]\nallow_outside = true\n", 1
        )
        + '\n[sweep]\nseeds = 2\n[sweep.set]\n"sop.review" = [true, false]\n'
    )
    base = load_scenario(path)
    assert base.sweep is not None and base.sweep.seeds == 2
    (_v1, v2) = variants_from([], base.sweep.set)
    scenario = variant_scenario(base, v2)
    assert scenario.sweep is None and scenario.sop_options["review"] is False
    assert scenario.path == base.path


def test_a_bad_sweep_table_names_its_path(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text('[scenario]\nname = "x"\nsop = "software_company"\n[sweep]\nseeds = 1.5\n')
    with pytest.raises(ConfigError, match=r"\$\.sweep\.seeds"):
        load_scenario(path)


def test_the_sweeps_budget_defaults_to_the_runs_caps_added_up() -> None:
    caps = [Decimal("2"), Decimal("0.5")]
    assert sweep_budget(None, None, caps) == Decimal("2.5")
    assert sweep_budget(None, Decimal("1"), caps) == Decimal("1")
    assert sweep_budget(Decimal("0.3"), Decimal("1"), caps) == Decimal("0.3")
    with pytest.raises(ConfigError, match="greater than 0"):
        sweep_budget(None, Decimal("0"), caps)
