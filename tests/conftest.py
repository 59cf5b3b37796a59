"""What every test may ask for: the repository's root, the CLI runner, a small team's scenario
file, and the servers the tests start on 127.0.0.1 (NATS, an OpenAI-compatible one, llama.cpp's
with a real model, an OTLP collector). The modules behind them are in ``support/``; this
file's folder is on the path, so tests import them as ``support.<module>``.

The folders below mirror the packages: ``bus/`` (messages, routing, the run loop and its
log), ``llm/``, ``money/``, ``store/``, ``scenario/``, ``sandbox/``, ``nats/``, ``report/``,
``otel/``, ``roles/``, ``sops/`` (each shipped procedure end to end), ``sweep/``, ``cli/``,
``api/`` (the Python API and the assembly) and ``e2e/`` (the product as a user gets it: the
README's commands, the wheel, the layout, the type checker).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from support.cli import sopbus
from support.llama_server import LlamaServer, running_llama
from support.nats_server import NatsServer, running_server
from support.openai_server import OpenAIServer
from support.otlp_server import Collected, otlp_collector
from support.paths import ROOT
from support.teams import Step, pipeline

# pytest-xdist's workers set COLUMNS=80 in their environment; a test's commands would then
# print as on an 80-column terminal in the workers and as piped output in one process. The
# suite's commands run as they do for a user without a terminal unless a test says a width
# (support.cli's ``columns``).
os.environ.pop("COLUMNS", None)


@pytest.fixture(autouse=True)
def _registry_as_it_was() -> Iterator[None]:
    """Each test leaves the global registry of actions and roles as it found it: a scenario
    run in-process imports its SOP module (scenarios/my_reviewer.py registers ReviewCode),
    and a later test declaring an action of that name would otherwise meet it, depending on
    the order the tests ran in."""
    import sopbus.roles.builtin  # noqa: F401  (the built-in roles register once, on import)
    from sopbus.roles import registry

    actions, roles = dict(registry._actions), dict(registry._roles)
    yield
    registry._actions.clear()
    registry._actions.update(actions)
    registry._roles.clear()
    registry._roles.update(roles)


@pytest.fixture(scope="session")
def root() -> Path:
    """The repository's root."""
    return ROOT


@pytest.fixture
def cli() -> Callable[..., Any]:
    """``cli("run", path, cwd=tmp_path)``: ``sopbus`` as a user runs it (``support.cli.sopbus``)."""
    return sopbus


@pytest.fixture
def team_file(tmp_path: Path) -> Callable[..., Path]:
    """``team_file(("Dora", "Draft"), ("Pete", "Polish"), llm={...})``: a pipeline team's
    scenario file in the test's folder (see ``support.teams.pipeline``)."""

    def write(*steps: Step, file: str = "team.toml", **tables: Any) -> Path:
        path = tmp_path / file
        path.write_text(pipeline(*steps, **tables), encoding="utf-8")
        return path

    return write


@pytest.fixture
def nats_server(tmp_path: Path) -> Iterator[NatsServer]:
    """A fresh nats-server (JetStream) on a free port of 127.0.0.1, for one test."""
    yield from running_server(tmp_path)


@pytest.fixture(scope="module")
def shared_nats_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    """One nats-server for a test module (each test uses its own run ids or buckets)."""
    yield from running_server(tmp_path_factory.mktemp("nats"))


@pytest.fixture
def openai_server() -> Iterator[OpenAIServer]:
    """A real OpenAI-compatible HTTP server on 127.0.0.1 that answers as scripted."""
    with OpenAIServer() as server:
        yield server


@pytest.fixture(scope="session")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """llama.cpp's llama-server with SmolLM2-135M on 127.0.0.1, one for the whole session
    (skips without the build of .ci/llama-server; fails without it in CI)."""
    yield from running_llama(tmp_path_factory.mktemp("llama"))


@pytest.fixture
def otlp() -> Iterator[tuple[str, Collected]]:
    """An OTLP/HTTP collector on 127.0.0.1: ``(endpoint, collected spans)``."""
    with otlp_collector() as collector:
        yield collector
