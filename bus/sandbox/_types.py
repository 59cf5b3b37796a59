"""The values a sandboxed run takes and gives: limits, the result, the backend's name."""

from __future__ import annotations

from typing import Literal

import msgspec

BackendName = Literal["auto", "bwrap", "local"]
BACKENDS: tuple[BackendName, ...] = ("auto", "bwrap", "local")

# What the code sees as its working directory, home and temporary directory, whatever the
# scratch directory on the host is called. Output that reaches a prompt or a message shows
# these, so two runs (and a replay) read the same text.
SANDBOX_DIR = "/sandbox"
SANDBOX_HOME = "/home/sandbox"
SANDBOX_TMP = "/tmp"
# A run's files and its /tmp: enough for a test suite and its reports, small enough that a
# loop writing 60 MB files cannot fill the disk of the run directory or the memory a tmpfs
# /tmp takes.
DEFAULT_SCRATCH_MB = 256
DEFAULT_TMP_MB = 256


class SandboxLimits(msgspec.Struct, frozen=True):
    """What one sandboxed run may use. Every field must be > 0.

    ``timeout_s`` is wall-clock time for the whole run (everything the run started is killed
    when it passes); ``cpu_s`` is CPU time (the kernel sends SIGXCPU); ``memory_mb`` caps the
    address space of each process; ``max_output_bytes`` applies to stdout and stderr
    separately; ``file_size_mb`` caps each file written; ``processes`` is how many more
    processes the run may start (the kernel does not count them for a process running as
    root, so the ``local`` backend cannot enforce it when sopbus runs as root, and says so).
    """

    timeout_s: float = 60
    memory_mb: int = 1024
    cpu_s: int = 60
    max_output_bytes: int = 1_000_000
    file_size_mb: int = 64
    processes: int = 256

    def __post_init__(self) -> None:
        for name in self.__struct_fields__:
            value = getattr(self, name)
            if not value > 0:  # written this way round so NaN fails too
                raise ValueError(
                    f"SandboxLimits.{name} must be > 0, got {value!r}; pass a positive {name}"
                )


class SandboxResult(msgspec.Struct, frozen=True):
    """What a sandboxed run did.

    ``exit_code`` is the process's status (negative: killed by that signal, as in
    :mod:`subprocess`), or None when the timeout killed it (then ``timed_out`` is True).
    Under ``bwrap`` a status of 128 + N is read as signal N: bubblewrap's init reports a
    signal that way, so a program that exits with 129..192 itself shows as signalled.
    ``stdout`` and ``stderr`` show the scratch directory as ``/sandbox`` (its real path is
    random), so the same code gives the same text. ``workdir`` is that fixed path; the real
    directory is gone when the result is returned (copy what you need with ``keep=``).
    ``network_isolated`` says whether the run had no network; ``backend`` which backend ran
    it (``"bwrap"`` or ``"local"``). ``notes`` says what the sandbox did to the run beyond
    its own exit: stopped when its files passed ``scratch_mb``, files not copied out.
    """

    argv: tuple[str, ...]
    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool
    duration_s: float
    network_isolated: bool
    workdir: str = SANDBOX_DIR
    backend: str = "local"
    notes: tuple[str, ...] = ()
