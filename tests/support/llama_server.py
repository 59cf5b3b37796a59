"""llama.cpp's own ``llama-server`` with a small real model (SmolLM2-135M-Instruct), on a free
port of 127.0.0.1, for the tests and benchmarks that run scenarios against a real server.

``.ci/llama-server`` builds the server and unpacks the model once per machine into
``$SOPBUS_LLAMA_HOME``, else ``${XDG_CACHE_HOME:-~/.cache}/sopbus/llama``; :func:`llama_home`
finds it by the same rule. Without it a test skips and says how to build it; in CI
(``CI=true``) a missing server is a failure, so the real-server tests cannot vanish there.

Settings for a shared 2-core machine: one thread (with 2 threads, generation fell from about
70 to 5 tokens/s whenever another process took a core: llama.cpp's threads wait for each
other), 2 slots of 2048 tokens each (``--ctx-size`` 4096 is shared by the slots), the
Prometheus counters on (``/metrics``), the chat template through jinja. The HTTP threads
stay at the server's default (the slots plus 2): with only as many as slots, a count asked
while both slots answer waits for one of them.

The chat template is ``smollm2_tools.jinja`` beside this module: SmolLM2's own ChatML
template renders no tools, and this llama.cpp drops the ``tools`` of a request for a template
without them; ours renders what the model's renders when a request has no tools, and the
tools and their calls (``<tool_call>`` JSON) when it has, so the server parses tool calls
and constrains ``tool_choice = "required"`` by a grammar.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path

BUILD = "run .ci/llama-server to build it (about 15 minutes, once per machine)"
MODEL = "smollm2"  # the name the server answers to (--alias)
SLOTS = 2
CTX_SIZE = 4096  # shared by the slots: SLOT_CTX tokens each
SLOT_CTX = CTX_SIZE // SLOTS
TEMPLATE = Path(__file__).with_name("smollm2_tools.jinja")
READY_S = 120.0  # loading a 98 MB model takes a few seconds; a busy machine, more


def llama_home(environ: Mapping[str, str] = os.environ) -> Path:
    """Where ``.ci/llama-server`` puts the build (see the module docstring)."""
    if environ.get("SOPBUS_LLAMA_HOME"):
        return Path(environ["SOPBUS_LLAMA_HOME"])
    cache = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "sopbus" / "llama"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class LlamaServer:
    """One ``llama-server`` process; ``base_url`` ends in ``/v1``, ``root`` does not.
    ``slots`` requests at once (``-np``), each with ``SLOT_CTX`` tokens of context."""

    def __init__(self, home: Path, log: Path, *, slots: int = SLOTS):
        self.binary = home / "bin" / "llama-server"
        self.model_file = home / "models" / "smollm2-135m.gguf"
        self.log = log
        self.slots = slots
        self.port = _free_port()
        self.root = f"http://127.0.0.1:{self.port}"
        self.base_url = f"{self.root}/v1"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        args = [
            str(self.binary), "-m", str(self.model_file), "--alias", MODEL,
            "--host", "127.0.0.1", "--port", str(self.port),
            "--threads", "1", "-np", str(self.slots),
            "--ctx-size", str(SLOT_CTX * self.slots), "--jinja", "--chat-template-file", str(TEMPLATE),
            "--metrics", "--no-webui",
        ]  # fmt: skip
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
        self._wait_healthy()

    def _wait_healthy(self) -> None:
        """Until ``/health`` says ok (it answers 503 while the model loads); the process
        dying or the deadline passing fails with the server's log."""
        assert self.proc is not None
        deadline = time.monotonic() + READY_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama-server exited {self.proc.returncode}:\n{self._tail()}")
            try:
                with urllib.request.urlopen(self.root + "/health", timeout=5) as reply:
                    if reply.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"llama-server not healthy after {READY_S} s:\n{self._tail()}")

    def _tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-30:])

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def metrics(self) -> dict[str, float]:
        """The server's counters (``llamacpp:prompt_tokens_total``, ...) by name."""
        with urllib.request.urlopen(self.root + "/metrics", timeout=10) as reply:
            text = reply.read().decode()
        found = re.findall(r"^(llamacpp:\w+) ([-+0-9.e]+)$", text, flags=re.M)
        return {name: float(value) for name, value in found}

    def billed(self) -> tuple[int, int, int]:
        """Prompt tokens (cached included), completion tokens and cached prompt tokens the
        server has processed since it started, from :meth:`metrics`."""
        m = self.metrics()
        cached = int(m["llamacpp:prompt_tokens_cached_total"])
        prompt = int(m["llamacpp:prompt_tokens_total"]) + cached
        return prompt, int(m["llamacpp:tokens_predicted_total"]), cached


def available(environ: Mapping[str, str] = os.environ) -> Path | None:
    """The build's home when the server and the model are there, else ``None``."""
    home = llama_home(environ)
    ready = (home / "bin" / "llama-server").is_file() and (
        home / "models" / "smollm2-135m.gguf"
    ).is_file()
    return home if ready else None


@contextlib.contextmanager
def bench_endpoint(
    base_url: str | None, model: str, log: Path, *, slots: int = SLOTS
) -> Iterator[tuple[str, str]]:
    """A benchmark's base URL and model name: the caller's endpoint (``base_url``), or a
    llama-server started here with ``slots`` slots for as long as the block runs; exits
    naming the fix without a build."""
    if base_url:
        yield base_url, model
        return
    home = available()
    if home is None:
        sys.exit(f"no llama-server in {llama_home()}: run .ci/llama-server, or pass --base-url")
    server = LlamaServer(home, log, slots=slots)
    server.start()
    try:
        yield server.base_url, MODEL
    finally:
        server.stop()


def running_llama(log_dir: Path, environ: Mapping[str, str] = os.environ) -> Iterator[LlamaServer]:
    """A started server for as long as the generator runs (a fixture's body); skips without
    a build, fails without one in CI. (The rest of this module is pytest-free, for
    bench/real.py.)"""
    import pytest

    home = available(environ)
    if home is None:
        where = llama_home(environ)
        if environ.get("CI", "").lower() == "true":
            pytest.fail(f"no llama-server in {where} in CI: .ci/run builds it first ({BUILD})")
        pytest.skip(f"no llama-server in {where}: {BUILD}")
    server = LlamaServer(home, log_dir / "llama-server.log")
    server.start()
    try:
        yield server
    finally:
        server.stop()
