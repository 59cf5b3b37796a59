"""The scenarios that ship with sopbus, found by name, and starting teams written from them.

``sopbus run software_company`` and ``run_scenario("software_company")`` run the shipped
``software_company.toml`` when no such file is in the working directory (a path always
wins). :func:`write_team` is ``sopbus new``: a commented scenario, a Python role module and
simulator fixtures that run as they are, or a copy of a shipped scenario with every file it
names.
"""

from __future__ import annotations

import os
import re
import shutil
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from .bus import ConfigError, did_you_mean

SUFFIX = ".toml"
TEMPLATE = "_templates/team"  # the starting team of `sopbus new`, beside this module
# The variables sopbus reads, written beside every new team as a starting `.env`. Kept
# without its dot in the package: package data globs skip dotfiles.
ENV_TEMPLATE = "_templates/env.example"
ENV_EXAMPLE = ".env.example"


@dataclass(frozen=True)
class Example:
    """A shipped scenario: its name (``sopbus run NAME``), its file and its description."""

    name: str
    path: Path
    description: str
    needs: str = ""  # what to install beyond sopbus to run it (its tool servers' extra)


def shipped_dir() -> Path:
    """The folder of the shipped scenarios (the package ``sopbus.scenarios``)."""
    return Path(str(resources.files("sopbus.scenarios")))


def examples() -> list[Example]:
    """Every shipped scenario, by name."""
    found = []
    for path in sorted(shipped_dir().glob(f"*{SUFFIX}")):
        try:
            doc = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError):
            doc = {}
        info = doc.get("scenario", {})
        found.append(Example(path.stem, path, str(info.get("description", "")), _needs(doc)))
    return found


def _needs(doc: dict[str, Any]) -> str:
    """``pip install 'sopbus[EXTRA]'`` for a scenario whose tool servers (``[mcp.NAME]``
    commands) an extra of sopbus installs, read from the installed distribution's metadata
    so it names the extra that holds them; ``sopbus[mcp]`` and the command otherwise."""
    commands = [
        str(server.get("command", ""))
        for server in (doc.get("mcp") or {}).values()
        if isinstance(server, dict)
    ]
    if not commands:
        return ""
    extras = _extras()
    needed = []
    for command in commands:
        extra = next((e for e, names in extras.items() if command in names), None)
        needed.append(f"sopbus[{extra}]" if extra else f"sopbus[mcp] and {command}")
    return "pip install " + " ".join(f"'{n}'" for n in dict.fromkeys(needed))


def _extras() -> dict[str, set[str]]:
    """Each extra of the installed sopbus (but ``test``) and the distributions it names."""
    import re
    from importlib.metadata import PackageNotFoundError, requires

    try:
        lines = requires("sopbus") or []
    except PackageNotFoundError:  # a checkout run without an install
        return {}
    extras: dict[str, set[str]] = {}
    for line in lines:
        found = re.match(r"\s*([\w.-]+).*;\s*extra\s*==\s*\"([\w-]+)\"", line)
        if found and found[2] != "test":
            extras.setdefault(found[2], set()).add(found[1])
    return extras


def scenario_path(ref: str | os.PathLike[str]) -> Path:
    """The scenario file ``ref`` names: a path when one is there (``flower_shop`` also finds
    ``./flower_shop.toml``: a file in the working directory wins), else the shipped scenario
    of that name (``software_company`` or ``software_company.toml``). A name that is neither
    is a :class:`~sopbus.bus.ConfigError` with the close names."""
    path = Path(ref)
    if path.exists() or not is_name(str(ref)):
        return path
    here = Path(f"{path.name.removesuffix(SUFFIX)}{SUFFIX}")
    return here if here.is_file() else shipped_scenario(str(ref))


def shipped_scenario(ref: str) -> Path:
    """The shipped scenario ``ref`` names (``flower_shop`` or ``flower_shop.toml``), or a
    :class:`~sopbus.bus.ConfigError` with the close names."""
    name = Path(ref).name.removesuffix(SUFFIX)
    shipped = shipped_dir() / f"{name}{SUFFIX}"
    if shipped.is_file():
        return shipped
    names = [e.name for e in examples()]
    hint = did_you_mean(name, names) or f"; the shipped ones are {', '.join(names)}"
    raise ConfigError(
        f"{ref}: no such scenario file here, and no shipped scenario of that "
        f"name{hint} (`sopbus examples` lists them)"
    )


def is_name(ref: str) -> bool:
    """Whether ``ref`` can name a shipped scenario: no folder in it."""
    return "/" not in ref and os.sep not in ref and bool(ref.removesuffix(SUFFIX))


def module_name(directory: Path) -> str:
    """The Python module name of a new team in ``directory``: the folder's name as an
    identifier, with ``_team`` after it, so that it cannot be ``bus``, ``roles``, ``sops``
    or any other module a user or sopbus already imports by a plain word."""
    stem = re.sub(r"\W+", "_", directory.resolve().name).strip("_").lower() or "my"
    if stem[0].isdigit():
        stem = f"t{stem}"
    return f"{stem}_team"


def write_team(directory: Path, source: str | None = None) -> list[Path]:
    """Writes a starting team into ``directory`` (made if missing, must hold none of the
    files): the template, or a copy of the shipped scenario ``source`` with the files it
    names. Returns the files written, the scenario first."""
    plan = _from_template(directory) if source is None else _from_example(directory, source)
    plan[directory / ENV_EXAMPLE] = Path(str(resources.files("sopbus"))) / ENV_TEMPLATE
    clashes = [str(dest) for dest in plan if dest.exists()]
    if clashes:
        raise ConfigError(
            f"{directory}: would overwrite {', '.join(clashes)}; choose an empty "
            f"or new folder (sopbus new never replaces a file)"
        )
    for dest, content in plan.items():
        dest.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, Path):
            shutil.copyfile(content, dest)
        else:
            dest.write_text(content, encoding="utf-8")
    return list(plan)


def _from_template(directory: Path) -> dict[Path, str | Path]:
    module = module_name(directory)
    root = Path(str(resources.files("sopbus"))) / TEMPLATE
    fill = {"{module}": module, "{name}": module.removesuffix("_team").replace("_", "-")}
    plan: dict[Path, str | Path] = {}
    for source, target in (
        ("scenario.toml", "scenario.toml"),
        ("team.py.txt", f"{module}.py"),
        ("fixtures.toml", "fixtures.toml"),
    ):
        text = (root / source).read_text(encoding="utf-8")
        for key, value in fill.items():
            text = text.replace(key, value)
        plan[directory / target] = text
    return plan


def _from_example(directory: Path, name: str) -> dict[Path, str | Path]:
    # Only a shipped one: a file of that name in the working directory is not a --from.
    scenario = shipped_scenario(name) if is_name(name) else Path(name)
    if scenario.parent != shipped_dir():
        raise ConfigError(
            f"--from {name}: not a shipped scenario; the shipped ones are "
            f"{', '.join(e.name for e in examples())}"
        )
    base = scenario.parent.resolve()
    plan: dict[Path, str | Path] = {directory / scenario.name: scenario}
    doc = tomllib.loads(scenario.read_text(encoding="utf-8"))
    for named in sorted(_named_files(doc, base)):
        for file in sorted(named.rglob("*")) if named.is_dir() else [named]:
            if file.is_file() and "__pycache__" not in file.parts:
                plan[directory / file.relative_to(base)] = file
    return plan


def _named_files(doc: Any, base: Path) -> set[Path]:
    """The files and folders beside the scenario that its values name: fixtures, data, a
    SOP module (``sop = "module:SOP"``)."""
    found: set[Path] = set()
    if isinstance(doc, dict):
        for key, value in doc.items():
            if key == "sop" and isinstance(value, str) and ":" in value:
                module = base / f"{value.partition(':')[0]}.py"
                if module.is_file():
                    found.add(module)
            found |= _named_files(value, base)
    elif isinstance(doc, list):
        for item in doc:
            found |= _named_files(item, base)
    elif isinstance(doc, str) and doc and "\n" not in doc and len(doc) < 200:
        candidate = (base / doc).resolve()
        if (
            candidate.exists()
            and candidate.is_relative_to(base.resolve())
            and candidate != base.resolve()
        ):
            found.add(candidate)
    return found
