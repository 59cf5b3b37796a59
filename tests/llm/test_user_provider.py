"""A user's own provider: named by reference (``[llm].provider = "module:Class"``) or
registered under a name from a module of its own; priced, ledgered and capped like the
shipped ones; every mistake a ConfigError naming the file, ``$.llm.provider`` and the fix.
The example on docs/your-own-provider.md is run as the page shows it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from sopbus.bus import ConfigError, ProviderBase, load_scenario
from sopbus.bus.llm import provider_for, provider_names, register_provider
from sopbus.bus.scenario import listed_providers
from support.paths import ROOT

PAGE = ROOT / "docs" / "your-own-provider.md"

TEAM = """
[actions.Summarise]
instruction = "Summarise what you received in one line."
output = { summary = "str" }

[actions.Review]
instruction = "Say whether the summary is clear."
output = { summary = "str" }

[[roles]]
name = "Writer"
watch = ["UserRequirement"]
actions = ["Summarise"]

[[roles]]
name = "Reviewer"
watch = ["Summarise"]
actions = ["Review"]
"""

# Counts its calls in a file beside it (the subprocess's only way to tell the test), and
# reports the most usage an honest answer can have: every token of max_tokens.
GREEDY = """
import json
from pathlib import Path

from sopbus.bus import Completion, LLMRequest, ProviderBase, Usage

CALLS = Path(__file__).with_name("calls.txt")


class Greedy(ProviderBase):
    name = "greedy"

    async def complete(self, request: LLMRequest) -> Completion:
        with CALLS.open("a") as out:
            out.write(request.action + "\\n")
        return Completion(
            text=json.dumps({"summary": "all of it"}),
            usage=Usage(prompt_tokens=50, completion_tokens=request.max_tokens),
            model=request.model,
            provider=self.name,
        )
"""


def scenario(directory: Path, provider: str, *, budget: str = "0.05", name: str = "s.toml") -> Path:
    path = directory / name
    path.write_text(
        f'[scenario]\nname = "mine"\nidea = "Plan the spring market."\n'
        f"[run]\nmax_rounds = 3\nbudget_usd = {budget}\n"
        f'[llm]\nprovider = "{provider}"\nmodel = "mine-1"\nmax_tokens = 1000\n'
        f'[prices."mine-1"]\ninput = 1.0\noutput = 2.0\n' + TEAM,
        encoding="utf-8",
    )
    return path


def sopbus(
    *args: str | Path, cwd: Path, code: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``sopbus ARGS`` in ``cwd``; with ``code``, that Python runs first in the same process."""
    argv = [str(a) for a in args]
    command = (
        [
            sys.executable,
            "-c",
            f"{code}\nimport sys\nfrom sopbus.cli import main\nsys.exit(main({argv!r}))",
        ]
        if code
        else [sys.executable, "-m", "sopbus", *argv]
    )
    env = {**os.environ, "PYTHONPATH": str(cwd)}
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def ledger(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "costs.jsonl").read_text().splitlines()]


def the_run(directory: Path) -> Path:
    (run_dir,) = (directory / "runs").iterdir()
    return run_dir


def page_files(directory: Path) -> list[str]:
    """The page's files (```lang title="NAME"``` blocks), written into ``directory``."""
    blocks = re.findall(r'```\w+ title="([^"]+)"\n(.*?)```', PAGE.read_text(encoding="utf-8"), re.S)
    for title, body in blocks:
        (directory / title).write_text(body, encoding="utf-8")
    return [title for title, _ in blocks]


@pytest.mark.slow
def test_the_docs_example_runs_priced_and_capped(tmp_path: Path) -> None:
    assert page_files(tmp_path) == ["my_llm.py", "echo.toml"]
    done = sopbus("run", "echo.toml", "--quiet", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = ledger(the_run(tmp_path))
    assert [(ln["role"], ln["provider"], ln["model"], ln["outcome"]) for ln in lines] == [
        ("Writer", "echo", "echo-1", "ok"),
        ("Reviewer", "echo", "echo-1", "ok"),
    ]
    for ln in lines:  # priced at the scenario's prices: $1 in, $2 out per 1M tokens
        expected = (Decimal(ln["prompt_tokens"]) * 1 + Decimal(ln["completion_tokens"]) * 2) / 10**6
        assert Decimal(ln["cost_usd"]) == expected > 0
    assert Decimal(lines[-1]["total_usd"]) <= Decimal("0.05")
    summary = json.loads((the_run(tmp_path) / "summary.json").read_text())
    assert (summary["status"], summary["provider"], summary["llm_calls"]) == (
        "completed",
        "my_llm:EchoProvider",
        2,
    )

    # The page's lower cap: the first call's worst case does not fit, and it is not made.
    low = (tmp_path / "echo.toml").read_text().replace("budget_usd = 0.05", "budget_usd = 0.0003")
    (tmp_path / "low.toml").write_text(low)
    (tmp_path / "runs").rename(tmp_path / "first-runs")
    done = sopbus("run", "low.toml", "--quiet", cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    lines = ledger(the_run(tmp_path))
    assert [(ln["outcome"], ln["cost_usd"]) for ln in lines] == [("refused", "0")]


@pytest.mark.slow
def test_a_provider_registered_from_a_temporary_module_runs_through_the_cli(tmp_path: Path) -> None:
    (tmp_path / "tmp_llm.py").write_text(
        GREEDY
        + "\nfrom sopbus.bus.llm import register_provider\n"
        + 'register_provider("greedy", lambda scenario, environ: Greedy(), network=False)\n'
    )
    path = scenario(tmp_path, "greedy", budget="1")
    done = sopbus("run", path, "--quiet", cwd=tmp_path, code="import tmp_llm")
    assert done.returncode == 0, done.stderr
    lines = ledger(the_run(tmp_path))
    assert [(ln["provider"], ln["completion_tokens"]) for ln in lines] == [("greedy", 1000)] * 2
    assert Decimal(lines[0]["cost_usd"]) == Decimal(50 + 2 * 1000) / 10**6
    summary = json.loads((the_run(tmp_path) / "summary.json").read_text())
    assert (summary["status"], summary["provider"], summary["llm_calls"]) == (
        "completed",
        "greedy",
        2,
    )
    assert "greedy" in done.stdout  # the summary table names the provider
    # Without the module imported, the name is unknown, with the names it could be.
    done = sopbus("validate", path, cwd=tmp_path)
    assert done.returncode == 2
    assert 'invalid value "greedy" - at `$.llm.provider`' in done.stderr
    assert "`sim`, `openai`, `replay`" in done.stderr


@pytest.mark.slow
def test_the_cap_holds_against_a_provider_that_reports_the_most_it_can(tmp_path: Path) -> None:
    (tmp_path / "greedy_llm.py").write_text(GREEDY)
    # One call's worst case fits ($0.002 of completion plus the prompt bound), two do not.
    path = scenario(tmp_path, "greedy_llm:Greedy", budget="0.003")
    done = sopbus("run", path, "--quiet", cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    lines = ledger(the_run(tmp_path))
    assert [(ln["action"], ln["outcome"]) for ln in lines] == [
        ("Summarise", "ok"),
        ("Review", "refused"),
    ]
    # The refused call never reached the provider, and spending stayed under the cap.
    assert (tmp_path / "calls.txt").read_text().split() == ["Summarise"]
    assert Decimal(lines[-1]["total_usd"]) <= Decimal("0.003")
    summary = json.loads((the_run(tmp_path) / "summary.json").read_text())
    assert summary["end_reason"] == "budget_exhausted"


def test_the_registry_lists_and_finds_providers() -> None:
    assert {"openai", "replay", "sim"} <= set(provider_names())
    assert provider_names() == sorted(provider_names())
    assert provider_for("openai").network and provider_for("openai").base_url
    assert provider_for("openai").secret_env == ("OPENAI_API_KEY",)
    assert provider_for("sim").simulated and not provider_for("sim").network
    assert provider_for("replay").cassette
    with pytest.raises(ConfigError, match="did you mean `openai`"):
        provider_for("openia")


def test_register_provider_checks_its_name_and_capabilities() -> None:
    class Quiet(ProviderBase):
        name = "quiet"

    with pytest.raises(TypeError, match=r"unknown capabilities \['netwrok'\]"):
        register_provider("quiet-test", lambda s, e: Quiet(), netwrok=True)
    with pytest.raises(ValueError, match="a colon marks a user's 'module:Class'"):
        register_provider("my:quiet", lambda s, e: Quiet())
    assert "quiet-test" not in provider_names()


def test_an_unknown_provider_name_is_an_error_at_its_place(tmp_path: Path) -> None:
    path = scenario(tmp_path, "opnai")
    with pytest.raises(ConfigError) as caught:
        load_scenario(path)
    message = str(caught.value)
    assert message.startswith(f'{path}: invalid value "opnai" - at `$.llm.provider`')
    assert 'or "module:Class" for your own provider; did you mean `openai`?' in message
    with pytest.raises(ConfigError, match='invalid provider reference "my llm:X"'):
        load_scenario(scenario(tmp_path, "my llm:X"))


def test_the_command_line_checks_provider_against_the_registry(tmp_path: Path) -> None:
    done = sopbus("validate", scenario(tmp_path, "sim"), "--provider", "opnai", cwd=tmp_path)
    assert done.returncode == 2
    assert 'argument --provider: invalid value "opnai"' in done.stderr
    assert "did you mean `openai`?" in done.stderr
    done = sopbus("run", "--help", cwd=tmp_path)
    listed = ", ".join(listed_providers())  # the registry's list, whatever it holds
    assert listed.startswith("sim, openai, replay")
    assert f"{listed}, or module:Class for your own" in " ".join(done.stdout.split())


@pytest.mark.parametrize(
    ("module", "ref", "expected"),
    [
        (
            None,
            "no_such_llm:Echo",
            "cannot import the provider module 'no_such_llm' named at $.llm.provider",
        ),
        ("x = 1\n", "bad_llm:Echo", "module bad_llm ("),
        (
            "x = 1\n",
            "bad_llm:Echo",
            "has no attribute 'Echo'; define a class with name = '...' and async def complete",
        ),
        (
            "def Echo(): pass\n",
            "bad_llm:Echo",
            "'bad_llm:Echo' at $.llm.provider is not a provider: bad_llm.Echo in",
        ),
        (
            "class Echo:\n    def complete(self, r): pass\n",
            "bad_llm:Echo",
            "is a class without async def complete",
        ),
        (
            "raise RuntimeError('boom')\n",
            "bad_llm:Echo",
            "failed while it was imported: RuntimeError: boom (at",
        ),
        (
            GREEDY + "Greedy.capabilities = {'netwrok': True}\n",
            "bad_llm:Greedy",
            "Greedy.capabilities: unknown capabilities ['netwrok']",
        ),
        (
            GREEDY + "Greedy.name = ''\n",
            "bad_llm:Greedy",
            "Greedy has no name; give it a class attribute name",
        ),
    ],
)
def test_a_bad_reference_is_a_config_error_naming_file_field_and_fix(
    module: str | None, ref: str, expected: str, tmp_path: Path
) -> None:
    if module is not None:
        (tmp_path / "bad_llm.py").write_text(module)
    path = scenario(tmp_path, ref)
    done = sopbus("run", path, "--quiet", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert f"{path}: " in done.stderr
    assert expected in " ".join(done.stderr.split())
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
