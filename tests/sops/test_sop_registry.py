"""One place per SOP (issue 36, item 4): a built-in SOP is one module of
``sopbus.sops.builtin``, and every list of SOPs reads the registry
(:func:`sopbus.sops.registered_sops`) or is checked against it here, so a new SOP that a
list forgets fails a test. An installed package adds a name through the entry-point group
``sopbus.sops``, and that name is then in every list as a built-in one is."""

from __future__ import annotations

import importlib
import json
import re
import sys
import tomllib
from pathlib import Path

import pytest

from sopbus.bus import ConfigError, load_scenario
from sopbus.sops import ENTRY_POINT_GROUP, build_team, builtin_sops, get_sop, registered_sops
from sopbus.sops import builtin as builtin_package
from support.cli import sopbus
from support.paths import ROOT, SCENARIOS

BUILTIN = builtin_sops()


def test_the_builtin_sops_are_the_modules_of_the_builtin_package() -> None:
    folder = Path(builtin_package.__file__).parent
    modules = sorted(p.stem for p in folder.glob("*.py") if not p.stem.startswith("_"))
    assert BUILTIN == modules and "repo_analyst" in BUILTIN and len(BUILTIN) >= 8
    assert [e.name for e in registered_sops().values()][: len(BUILTIN)] == BUILTIN


@pytest.mark.parametrize("name", BUILTIN)
def test_each_builtin_module_holds_the_sop_of_its_own_name(name: str) -> None:
    sop = get_sop(name)
    assert sop.name == name and sop.description
    assert sop is importlib.import_module(f"sopbus.sops.builtin.{name}").SOP
    assert registered_sops()[name].ref == f"sopbus.sops.builtin.{name}:SOP"


def test_the_old_import_path_is_the_same_module() -> None:
    """``sopbus.sops.<name>`` (the path before the move) imports the built-in module itself,
    not a second copy of its file, and keeps the module's own spec."""
    import sopbus.sops.builtin.group_chat as new
    import sopbus.sops.group_chat as old
    from sopbus.sops.camel_roleplay import SOP as CAMEL

    assert old is new and old.__spec__ is not None
    assert old.__spec__.name == "sopbus.sops.builtin.group_chat"
    assert CAMEL is get_sop("camel_roleplay")
    assert get_sop("sopbus.sops.software_company:SOP") is get_sop("software_company")
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("sopbus.sops.no_such_sop")


def test_an_unknown_name_lists_the_registry_and_suggests_the_closest() -> None:
    with pytest.raises(ConfigError) as caught:
        get_sop("grup_chat")
    text = str(caught.value)
    assert "did you mean 'group_chat'?" in text and "`sopbus sops` lists them" in text
    assert all(name in text for name in BUILTIN)


# -- the lists that cannot read the registry at run time, checked against it --------------


def _table_names(markdown: str, header: str) -> list[str]:
    """The first column's names of the Markdown table under the line ``header``."""
    lines = markdown.split(header, 1)[1].split("\n\n", 1)[0].splitlines()
    return [m[1] for line in lines[2:] if (m := re.match(r"\| `(\w+)` \|", line))]


def test_the_sops_page_has_every_sop_in_both_tables() -> None:
    page = (ROOT / "docs" / "sops.md").read_text(encoding="utf-8")
    assert sorted(_table_names(page, "| SOP | the team | `[sop]` keys |")) == BUILTIN
    assert sorted(_table_names(page, "| SOP | passes when |")) == BUILTIN


def test_the_api_reference_documents_every_builtin_module() -> None:
    page = (ROOT / "docs" / "reference" / "sops.md").read_text(encoding="utf-8")
    assert sorted(re.findall(r"^::: sopbus\.sops\.builtin\.(\w+)$", page, re.M)) == BUILTIN


@pytest.mark.parametrize("name", BUILTIN)
def test_each_builtin_sop_ships_a_scenario_of_its_name(name: str) -> None:
    """``sopbus run NAME`` runs every built-in SOP, and the scenarios page says what it shows."""
    scenario = tomllib.loads((SCENARIOS / f"{name}.toml").read_text(encoding="utf-8"))
    assert scenario["scenario"]["sop"] == name
    page = (ROOT / "docs" / "scenarios.md").read_text(encoding="utf-8")
    assert f"| `{name}` |" in page.split("## The shipped scenarios", 1)[1]


def test_the_contracts_name_the_builtin_package_not_each_sop() -> None:
    """The import-linter contracts hold for a new built-in SOP without a line of their own:
    the layers of ``sops`` are exhaustive (a module no layer names breaks them), and the
    independence of the built-in SOPs is over the package's modules."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    (layers,) = [c for c in contracts if c.get("containers") == ["sopbus.sops"]]
    assert layers["exhaustive"] is True and layers["layers"][0].split(" | ")[0] == "builtin"
    assert any(c.get("modules") == ["sopbus.sops.builtin.*"] for c in contracts)
    text = json.dumps(contracts)
    assert not [name for name in BUILTIN if name in text]


# -- an SOP registered by an installed package --------------------------------------------

SOP_MODULE = """\
import sopbus
from sopbus.sops.builtin.group_chat import SOP as CHAT

SOP = sopbus.SOP(name="tiny_chat", description="a group chat under a name of its own",
                 build=CHAT.build, verdict=CHAT.verdict)
"""


@pytest.fixture
def installed(tmp_path: Path) -> Path:
    """A folder holding what ``pip install`` of a package ``my-sops`` would put on the path:
    its module and its ``.dist-info`` with an entry point ``tiny_chat`` in ``sopbus.sops``."""
    site = tmp_path / "site"
    info = site / "my_sops-0.1.dist-info"
    info.mkdir(parents=True)
    (site / "my_sops.py").write_text(SOP_MODULE, encoding="utf-8")
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: my-sops\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\ntiny_chat = my_sops:SOP\n")
    return site


def _scenario(where: Path, sop: str) -> Path:
    """The shipped group chat with ``sop`` in place of ``group_chat``, its fixtures named by
    absolute path."""
    text = (SCENARIOS / "group_chat.toml").read_text(encoding="utf-8")
    text = text.replace('"fixtures/', f'"{SCENARIOS}/fixtures/')
    text = text.replace("[scenario]\n", "[scenario]\nallow_outside = true\n", 1)
    assert 'sop = "group_chat"' in text
    path = where / "team.toml"
    path.write_text(text.replace('sop = "group_chat"', f'sop = "{sop}"'), encoding="utf-8")
    return path


def test_an_installed_sop_is_in_the_registry_and_builds_a_team(
    installed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(installed))
    monkeypatch.delitem(sys.modules, "my_sops", raising=False)
    entry = registered_sops()["tiny_chat"]
    assert (entry.ref, entry.origin) == ("my_sops:SOP", "my-sops 0.1 (entry point)")
    assert get_sop("tiny_chat").description == "a group chat under a name of its own"
    team = build_team(load_scenario(_scenario(tmp_path, "tiny_chat")))
    assert [r.name for r in team.roles] == ["ChatManager", "Planner", "Writer", "Critic"]
    with pytest.raises(ConfigError, match="did you mean 'tiny_chat'"):
        get_sop("tiny_chta")


@pytest.mark.slow  # sopbus as a subprocess, as a user runs it
def test_an_installed_sop_is_in_every_list_of_the_cli(installed: Path, tmp_path: Path) -> None:
    env = {"PYTHONPATH": str(installed)}
    listed = sopbus("sops", "--json", cwd=tmp_path, env=env)
    assert listed.returncode == 0, listed.stderr
    rows = {row["name"]: row for row in json.loads(listed.stdout)}
    assert sorted(rows) == sorted([*BUILTIN, "tiny_chat"])
    assert rows["tiny_chat"]["origin"] == "my-sops 0.1 (entry point)"
    assert rows["tiny_chat"]["description"] == "a group chat under a name of its own"
    assert rows["group_chat"]["origin"] == "built-in" and rows["group_chat"]["error"] is None
    table = sopbus("sops", cwd=tmp_path, env=env).stdout
    assert "tiny_chat" in table and "a group chat under a name of its own" in table
    narrow = sopbus("sops", cwd=tmp_path, env=env, columns=80).stdout
    assert all(len(line) <= 80 for line in narrow.splitlines()), narrow
    assert all(re.search(rf"^{name}(\s|$)", narrow, re.M) for name in rows), narrow

    checked = sopbus("validate", _scenario(tmp_path, "tiny_chat"), cwd=tmp_path, env=env)
    assert checked.returncode == 0, checked.stderr
    assert re.search(r"sop\s+tiny_chat", checked.stdout)
    typo = sopbus("validate", _scenario(tmp_path, "tiny_chta"), cwd=tmp_path, env=env)
    assert typo.returncode == 2 and "did you mean 'tiny_chat'?" in typo.stderr
    assert "tiny_chat" not in sopbus("sops", cwd=tmp_path).stdout  # not installed: not listed

    ran = sopbus(
        "run", _scenario(tmp_path, "tiny_chat"), "--runs-dir", "runs", "--quiet",
        cwd=tmp_path, env=env,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["verdict"]["passed"] is True


@pytest.mark.slow
def test_an_sop_that_cannot_be_loaded_says_why_in_its_row(tmp_path: Path) -> None:
    site = tmp_path / "site"
    info = site / "broken_sops-2.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-sops\nVersion: 2.0\n")
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\ngone = not_there:SOP\n")
    done = sopbus("sops", "--json", cwd=tmp_path, env={"PYTHONPATH": str(site)})
    assert done.returncode == 2
    rows = {row["name"]: row for row in json.loads(done.stdout)}
    assert "cannot import" in rows["gone"]["error"] and "not_there" in rows["gone"]["error"]
    assert "broken-sops 2.0 (entry point)" in rows["gone"]["error"]
    assert all(rows[name]["error"] is None for name in BUILTIN)
