"""The documentation site builds, strict and offline, and says what the code says.

``mkdocs build --strict`` fails on a broken link, a missing anchor, a page left out of the
navigation, a cross-reference to an API object that no longer exists, or a ``:::`` block
whose object is gone; the build runs with an audit hook that fails it at the first attempt
to open a network connection. On the built site: the command-line reference lists every
command and option of the parser, the API pages document the public surface, and no
Sphinx role is left unrendered. The README's links into the site point at pages that exist.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from support.paths import ROOT


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # its parent package is missing
        return False


needs_mkdocs = pytest.mark.skipif(
    not all(
        map(_installed, ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python"))
    ),
    reason="the documentation tools are not installed: pip install -e '.[docs]'",
)

# Runs `mkdocs` with every socket connection and name lookup refused: the build must not
# need the network (no social cards, no downloaded assets, no remote inventories).
_OFFLINE_MKDOCS = """
import sys

def refuse_network(event, args):
    if event in ("socket.connect", "socket.getaddrinfo", "socket.gethostbyname", "urllib.Request"):
        raise RuntimeError(f"the docs build reached for the network: {event} {args!r}")

sys.addaudithook(refuse_network)
from mkdocs.__main__ import cli
cli()
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built once for this module's tests."""
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            _OFFLINE_MKDOCS,
            "build",
            "--strict",
            "--config-file",
            str(ROOT / "mkdocs.yml"),
            "--site-dir",
            str(out),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout}{done.stderr}"
    assert "reached for the network" not in done.stderr, done.stderr
    return out


def _text(page: Path) -> str:
    return page.read_text(encoding="utf-8")


@needs_mkdocs
def test_the_site_builds_strict_and_offline_with_every_page(site: Path) -> None:
    pages = sorted(
        p.relative_to(ROOT / "docs").with_suffix("") for p in (ROOT / "docs").rglob("*.md")
    )
    for page in pages:
        built = site / (page.parent if page.name == "index" else page) / "index.html"
        assert built.is_file(), f"docs/{page}.md was not built"
    home = _text(site / "index.html")
    assert "fonts.googleapis.com" not in home and "fonts.gstatic.com" not in home  # reads offline


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("sopbus's parser has no subcommands")


@needs_mkdocs
def test_the_cli_reference_has_every_command_and_option_of_the_parser(site: Path) -> None:
    from sopbus.cli._app import build_parser

    page = _text(site / "cli" / "index.html")
    commands = _subcommands(build_parser())
    assert len(commands) >= 20
    for name, sub in commands.items():
        assert f'id="{name}"' in page, f"no section for `sopbus {name}`"
        section = page.split(f'id="{name}"', 1)[1]
        following = [n for n in commands if n != name and f'id="{n}"' in section]
        if following:  # only this command's part of the page
            section = section[: min(section.index(f'id="{n}"') for n in following)]
        for action in sub._actions:
            for option in action.option_strings:
                if option not in ("-h", "--help"):
                    assert option in section, f"`sopbus {name} {option}` is not on the page"


@needs_mkdocs
def test_the_api_pages_document_the_public_surface_and_extension_points(site: Path) -> None:
    import sopbus

    reference = site / "reference"
    public = (
        _text(reference / "sopbus" / "index.html")
        + _text(reference / "roles" / "index.html")
        + _text(reference / "sops" / "index.html")
    )
    for name in sopbus.__all__:
        assert re.search(rf'id="sopbus\.(roles\.|sops\.)?{name}"', public), (
            f"sopbus.{name} is not documented"
        )
    providers = _text(reference / "providers" / "index.html")
    for name in ("Provider", "LLMRequest", "Completion"):
        assert f'id="sopbus.bus.{name}"' in providers


@needs_mkdocs
def test_no_sphinx_role_is_left_unrendered(site: Path) -> None:
    role = re.compile(r":(class|func|meth|mod|attr|data|exc):`")
    for page in (site / "reference").rglob("*.html"):
        found = role.search(_text(page))
        assert found is None, (
            f"{page.relative_to(site)}: {_text(page)[found.start() : found.end() + 60]}"
        )


def test_the_readme_links_into_pages_that_exist() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\((docs/[^)#\s]+)", readme)
    assert links, "the README links into the docs"
    for link in links:
        assert (ROOT / link).exists(), f"README.md links to {link}, which is missing"
