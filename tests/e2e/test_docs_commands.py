"""The docs pages' commands run, and print what the pages show.

Every ``console`` block of every page under docs/ is a checked session: its ``$ sopbus``
lines run in an empty folder per page, on the simulator, and their output is compared with
the page's, word by word, with placeholders for run ids, times and elided lines
(tests/support/doc_sessions.py has the convention). So a page cannot drift from the code:
a changed table, a new count or a renamed field fails here, naming the page and the line.
The pages run three at a time, each page's commands in order: about 30 s of CPU in all
(the longest page, runs.md, about 10 s), so under half a minute on 2 idle cores.
"""

from __future__ import annotations

import itertools
import re
import socket
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

import msgspec
import pytest

from support import doc_sessions
from support.anthropic_server import AnthropicServer
from support.doc_sessions import Command, File, Served, matches, normalized
from support.fitting_answers import anthropic_answer, openai_answer
from support.openai_server import OpenAIServer
from support.paths import ROOT

DOCS = ROOT / "docs"
README = ROOT / "README.md"
CHECKED = sorted(
    page
    for page in [*DOCS.rglob("*.md"), README]
    if any(isinstance(step, Command) for step in doc_sessions.steps(page))
)
# Pages that must keep checked commands: the ones a new user reads first, and those whose
# commands call a model server (the test's own servers stand in for it).
MUST_BE_CHECKED = (
    "getting-started", "runs", "money", "sweeps", "scenarios", "README",
    "anthropic", "local-models", "your-own-provider",
)  # fmt: skip
# The base URLs of docs/local-models.md's recipes, each served by the test's
# OpenAI-compatible server (support.fitting_answers), as llama.cpp, Ollama, vLLM or LM Studio.
LOCAL_SERVERS = (
    "http://127.0.0.1:8080/v1",
    "http://127.0.0.1:11434/v1",
    "http://127.0.0.1:8000/v1",
    "http://127.0.0.1:1234/v1",
)


def _served(stack: ExitStack) -> dict[str, Served]:
    """The stand-ins for the pages that call a model server, started for the module."""
    anthropic = stack.enter_context(AnthropicServer())
    anthropic.script(anthropic_answer)
    openai = stack.enter_context(OpenAIServer())
    openai.script(openai_answer)
    return {
        "anthropic": Served(env={"ANTHROPIC_BASE_URL": anthropic.base_url}),
        "local-models": Served(urls=dict.fromkeys(LOCAL_SERVERS, openai.base_url)),
    }


@pytest.fixture(scope="module")
def differences(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> dict[Path, list[str]]:
    """Every selected page run once, three at a time: what differed, by page."""
    selected: set[Path] = set()
    for item in request.session.items:
        callspec = getattr(item, "callspec", None)  # only parametrized items have one
        page = callspec.params.get("page") if callspec is not None else None
        if isinstance(page, Path):
            selected.add(page)
    pages = sorted(selected)

    with ExitStack() as stack:
        served = _served(stack)

        def check(page: Path) -> list[str]:
            folder = tmp_path_factory.mktemp(page.stem)
            return doc_sessions.check_page(page, folder, served.get(page.stem, Served()))

        # Threads are enough: each page waits on its subprocesses, one at a time.
        with ThreadPoolExecutor(max_workers=3) as pool:
            return dict(zip(pages, pool.map(check, pages), strict=True))


@pytest.mark.slow
@pytest.mark.parametrize("page", CHECKED, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_page_prints_what_it_shows(page: Path, differences: dict[Path, list[str]]) -> None:
    found = differences[page]
    assert not found, f"{page.relative_to(ROOT)}:\n" + "\n\n".join(found)


def test_the_pages_a_new_user_reads_first_are_checked() -> None:
    assert {p.stem for p in CHECKED} >= set(MUST_BE_CHECKED)


def test_a_page_that_drifted_is_found(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        '```toml title="t.toml"\n[scenario]\nname = "t"\n```\n\n'
        "```console\n$ sopbus validate t.toml\nt.toml: ok, but not what it prints\n```\n\n"
        "```console\n$ sopbus validate missing.toml   # exits 2\n...\n```\n",
        encoding="utf-8",
    )
    steps = doc_sessions.steps(page)
    assert [type(s) for s in steps] == [File, Command, Command]
    last = steps[2]
    assert isinstance(last, Command)
    assert last.exit_code == 2 and last.text == "sopbus validate missing.toml"
    found = doc_sessions.check_page(page, tmp_path)
    assert len(found) == 1 and "line 7: $ sopbus validate t.toml" in found[0]


def test_a_command_goes_on_after_a_backslash_and_a_served_url_stands_for_its_server(
    tmp_path: Path,
) -> None:
    page = tmp_path / "page.md"
    shown = "http://model.example:8080/v1"
    page.write_text(
        "```console\n$ OPENAI_API_KEY=x sopbus run flower_shop --provider openai \\\n"
        f"    --model m --price 0,0 --base-url {shown}   # exits 2\n"
        f"sopbus: error: ... nothing answers at the model server {shown} ...\n```\n",
        encoding="utf-8",
    )
    (command,) = doc_sessions.steps(page)
    assert isinstance(command, Command) and command.exit_code == 2
    assert command.text.endswith(f"--price 0,0 --base-url {shown}") and command.line == 2
    # A port that is bound and not listening refuses every connection: nothing answers.
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        live = f"http://127.0.0.1:{closed.getsockname()[1]}/v1"
        # The command ran against `live`, and its output names the page's URL instead.
        assert doc_sessions.check_page(page, tmp_path, Served(urls={shown: live})) == []


def test_placeholders_and_elisions_match_only_what_they_stand_for() -> None:
    shown = normalized("run <run id>\n...\nduration <time>\nspend $0.00431 of $2.00")
    printed = normalized(
        "run 20261203-133714-software-company-4e77\nround 1/20\nround 5/20\n"
        "duration 0.68 s\nspend $0.00431   of $2.00"
    )
    assert matches(shown, printed)
    assert not matches(shown, normalized("run x\nduration 0.68 s\nspend $0.00431 of $2.00"))
    assert not matches(shown, [*printed[:-1], "$3.00"])  # the money is compared
    assert not matches(normalized("a b"), normalized("a b c"))  # nothing left over


def _file_keys(info: object, path: str) -> Iterator[tuple[str, str]]:
    """Every key a scenario file may hold: (the table's path, the key)."""
    if isinstance(info, msgspec.inspect.StructType):
        for spec in info.fields:
            yield path, spec.encode_name
            yield from _file_keys(spec.type, f"{path}.{spec.encode_name}")
    elif isinstance(info, msgspec.inspect.DictType):
        yield from _file_keys(info.value_type, f"{path}.NAME")
    elif isinstance(info, (msgspec.inspect.ListType, msgspec.inspect.VarTupleType)):
        yield from _file_keys(info.item_type, f"{path}[]")
    elif isinstance(info, msgspec.inspect.UnionType):
        for member in info.types:
            yield from _file_keys(member, path)


def test_every_key_of_a_scenario_file_is_on_the_scenarios_page() -> None:
    from sopbus.bus import ScenarioDoc

    page = (DOCS / "scenarios.md").read_text(encoding="utf-8")
    missing = [
        f"{path}.{key}"
        for path, key in _file_keys(msgspec.inspect.type_info(ScenarioDoc), "$")
        if f"`{key}`" not in page and not (path == "$" and re.search(rf"`\[+{key}\b", page))
    ]
    assert not missing, f"docs/scenarios.md's 'Every key' lacks {', '.join(missing)}"


def test_the_ledger_fields_are_listed_in_the_order_the_ledger_writes_them() -> None:
    from sopbus.bus.money import LedgerLine

    page = (DOCS / "money.md").read_text(encoding="utf-8")
    section = page.split("## The ledger", 1)[1].splitlines()
    start = next(i for i, line in enumerate(section) if line.startswith("|"))
    rows = itertools.takewhile(lambda line: line.startswith("|"), section[start + 2 :])
    listed = [name for row in rows for name in re.findall(r"`(\w+)`", row.split("|")[1])]
    written = [name for name in LedgerLine.__struct_fields__ if not name.startswith("_")]
    assert listed == written


def test_the_python_api_page_names_every_override() -> None:
    import sopbus

    page = (DOCS / "python-api.md").read_text(encoding="utf-8")
    sentence = page.split("The overrides are `sopbus run`'s flags:", 1)[1].split(
        "(`sopbus.OVERRIDES`)"
    )[0]
    assert re.findall(r"`(\w+)`", sentence) == list(sopbus.OVERRIDES)


def test_a_page_cannot_run_other_commands_nor_write_outside_its_folder(tmp_path: Path) -> None:
    folder = tmp_path / "page"
    folder.mkdir()
    page = tmp_path / "page.md"
    page.write_text("```console\n$ rm -rf ~\n```\n", encoding="utf-8")
    assert doc_sessions.check_page(page, folder) == [
        "line 2: only `sopbus` commands are run: rm -rf ~"
    ]
    page.write_text('```toml title="../escaped.toml"\nx = 1\n```\n', encoding="utf-8")
    (found,) = doc_sessions.check_page(page, folder)
    assert "outside the page's folder" in found
    assert not (tmp_path / "escaped.toml").exists()
