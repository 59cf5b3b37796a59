"""Attacks by model-written code, each stopped by the bwrap backend, asserted on the outcome
(the secret is not in any output or run file, the marker file was not written, the process
is gone, sopbus is alive). The local backend is run against the attacks it claims to stop.
Without bubblewrap the bwrap tests skip, saying how to install it."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from sopbus.bus import SandboxLimits, SandboxSettings, run_sandboxed
from support.cli import sopbus
from support.paths import ROOT
from support.sandbox import (
    code_run_scenario,
    files_containing,
    live_processes_with,
    needs_bwrap,
    run_dirs,
    sopbus_started,
    wait_for,
)

BWRAP = SandboxSettings(backend="bwrap")
LOCAL = SandboxSettings(backend="local")
BACKENDS = [pytest.param("bwrap", marks=needs_bwrap), "local"]
SECRET = f"sk-proj-FAKE{uuid.uuid4().hex}"

ENV_THIEF = textwrap.dedent("""\
    import os
    seen = [repr(dict(os.environ))]
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                seen.append(pid + " " + open(f"/proc/{pid}/environ", "rb").read().decode("latin-1"))
            except OSError as exc:
                seen.append(f"{pid} {type(exc).__name__}")
    print(f"read {len(seen) - 1} processes")
    print("\\n".join(seen))
    """)


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_the_parents_environment_does_not_leak_through_proc(tmp_path: Path, backend: str) -> None:
    scenario = code_run_scenario(tmp_path, [ENV_THIEF], backend=backend)
    done = sopbus("run", scenario, "--quiet", env={"OPENAI_API_KEY": SECRET})
    assert done.returncode == 0, done.stderr
    (run_dir,) = run_dirs(tmp_path)
    ran = (run_dir / "events.jsonl").read_text()
    assert "read " in ran and " processes" in ran  # the thief ran and reported
    assert SECRET not in done.stdout + done.stderr
    assert files_containing(run_dir, SECRET) == []


@needs_bwrap
async def test_shadow_and_a_planted_ssh_key_are_unreadable(tmp_path: Path) -> None:
    key_text = f"-----BEGIN OPENSSH PRIVATE KEY----- {uuid.uuid4()}"
    key = tmp_path / "home" / ".ssh" / "id_ed25519"
    key.parent.mkdir(parents=True)
    key.write_text(key_text)
    script = textwrap.dedent(f"""\
        import glob
        for path in ["/etc/shadow", {str(key)!r}, *glob.glob("/root/.ssh/*"),
                     *glob.glob("/home/*/.ssh/*")]:
            try:
                print(path, open(path).read())
            except OSError as exc:
                print(path, type(exc).__name__)
        """)
    files = {"steal.py": script}
    local = await run_sandboxed(["python", "steal.py"], files=files, sandbox=LOCAL)
    assert key_text in local.stdout  # the attack works where nothing isolates it
    result = await run_sandboxed(["python", "steal.py"], files=files, sandbox=BWRAP)
    assert result.exit_code == 0, result.stderr
    assert key_text not in result.stdout + result.stderr
    assert "/etc/shadow FileNotFoundError" in result.stdout
    try:
        shadow = Path("/etc/shadow").read_text().splitlines()[0]
    except (OSError, IndexError):
        return
    assert shadow not in result.stdout


@needs_bwrap
async def test_writes_outside_the_scratch_directory_do_not_land(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("original")
    targets = [
        tmp_path / f"escaped-{uuid.uuid4()}",
        Path(sys.prefix) / f"escaped-{uuid.uuid4()}",
        victim,
    ]
    script = textwrap.dedent(f"""\
        for path in {[str(t) for t in targets]!r}:
            try:
                open(path, "w").write("pwned")
                print("wrote", path)
            except OSError as exc:
                print(path, type(exc).__name__)
        open("inside.txt", "w").write("fine")
        """)
    kept = tmp_path / "kept"
    result = await run_sandboxed(
        ["python", "write.py"], files={"write.py": script}, sandbox=BWRAP, keep=kept
    )
    assert result.exit_code == 0, result.stderr
    assert not targets[0].exists() and not targets[1].exists()
    assert victim.read_text() == "original"
    assert (kept / "inside.txt").read_text() == "fine"  # the one writable place works


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_listener_on_loopback_sees_no_connection(backend: str) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        port = listener.getsockname()[1]
        script = textwrap.dedent(f"""\
            import socket
            try:
                socket.create_connection(("127.0.0.1", {port}), timeout=5).close()
                print("connected")
            except OSError as exc:
                print("blocked", type(exc).__name__)
            """)
        result = await run_sandboxed(
            ["python", "net.py"],
            files={"net.py": script},
            sandbox=SandboxSettings(backend=backend),  # type: ignore[arg-type]
        )
        if not result.network_isolated:
            pytest.skip("`unshare --net` does not work here, so local keeps the network")
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):
            listener.accept()  # nobody connected
    assert result.stdout.startswith("blocked "), result.stdout + result.stderr


@needs_bwrap
async def test_a_fork_bomb_is_bounded_and_leaves_nothing() -> None:
    marker = f"bomb-{uuid.uuid4()}"
    script = textwrap.dedent("""\
        import os, time
        n = 0
        while n < 100000:
            try:
                pid = os.fork()
            except OSError:
                break
            if pid == 0:
                try:
                    os.fork()  # every child forks again: a bomb
                except OSError:
                    pass
                time.sleep(120)
                os._exit(0)
            n += 1
        print("forked", n, flush=True)
        """)
    limits = SandboxLimits(processes=20, timeout_s=60)
    result = await run_sandboxed(
        ["python", "bomb.py", marker], files={"bomb.py": script}, limits=limits, sandbox=BWRAP
    )
    assert result.exit_code == 0, result.stderr
    forked = int(result.stdout.split()[1])
    assert 0 < forked <= limits.processes
    assert live_processes_with(marker) == []


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_memory_hog_fails_under_its_limit(backend: str) -> None:
    script = "b = bytearray(4 << 30)\nprint('allocated')\n"
    result = await run_sandboxed(
        ["python", "hog.py"],
        files={"hog.py": script},
        limits=SandboxLimits(memory_mb=256),
        sandbox=SandboxSettings(backend=backend),  # type: ignore[arg-type]
    )
    assert result.exit_code == 1
    assert "MemoryError" in result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize("backend", BACKENDS)
async def test_an_output_flood_is_capped(backend: str) -> None:
    flood = "import sys\nfor _ in range(1000):\n    sys.stdout.write('x' * 65536)\n"
    result = await run_sandboxed(
        ["python", "flood.py"],
        files={"flood.py": flood},
        limits=SandboxLimits(max_output_bytes=10_000),
        sandbox=SandboxSettings(backend=backend),  # type: ignore[arg-type]
    )
    assert result.exit_code == 0
    assert len(result.stdout) < 10_200
    assert f"kept the first 10000 of {1000 * 65536} bytes" in result.stdout


@needs_bwrap
async def test_setsid_does_not_outlive_the_timeout() -> None:
    marker = f"setsid-{uuid.uuid4()}"
    script = textwrap.dedent(f"""\
        import os, sys, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:  # a daemon: its parent exits, it is orphaned
                os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(300)",
                                          {marker!r}])
            os._exit(0)
        time.sleep(0.5)
        print("escaped", flush=True)
        time.sleep(300)
        """)
    result = await run_sandboxed(
        ["python", "daemon.py"],
        files={"daemon.py": script},
        limits=SandboxLimits(timeout_s=3),
        sandbox=BWRAP,
    )
    assert result.timed_out is True
    assert result.stdout == "escaped\n"
    assert live_processes_with(marker) == []


SLEEPER = textwrap.dedent("""\
    import os, sys
    # exec, not a child: the sleeping process is the one sopbus started
    os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(300)", "{marker}"])
    """)
SPAWNER = textwrap.dedent("""\
    import subprocess, sys, time
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", "{marker}"])
    time.sleep(300)
    """)


@pytest.mark.slow
@pytest.mark.parametrize(
    "backend,script", [pytest.param("bwrap", SPAWNER, marks=needs_bwrap), ("local", SLEEPER)]
)
def test_kill_9_of_sopbus_kills_the_sandbox_and_the_next_start_cleans_up(
    tmp_path: Path, backend: str, script: str
) -> None:
    marker = f"orphan-{uuid.uuid4()}"
    scenario = code_run_scenario(
        tmp_path, [script.replace("{marker}", marker)], backend=backend, timeout_s=600
    )
    proc = sopbus_started("run", scenario, "--quiet")
    try:
        assert wait_for(lambda: bool(live_processes_with(marker)), 120), proc.stderr
    finally:
        proc.kill()  # SIGKILL: no cleanup code of sopbus runs
        proc.communicate()
    assert wait_for(lambda: not live_processes_with(marker))
    (killed,) = run_dirs(tmp_path)
    assert list((killed / ".sandbox").iterdir())  # the killed run left its scratch directory
    done = sopbus(
        "run",
        code_run_scenario(tmp_path / "next", ["print('hi')"], backend=backend),
        "--quiet",
        "--runs-dir",
        tmp_path / "runs",
    )
    assert done.returncode == 0, done.stderr
    assert not (killed / ".sandbox").exists()


@pytest.mark.slow
@needs_bwrap
def test_signalling_the_parent_does_not_reach_sopbus(tmp_path: Path) -> None:
    script = tmp_path / "attack.py"
    script.write_text(
        textwrap.dedent("""\
        import os, signal
        for pid in ({SOPBUS_PID}, os.getppid(), 1):
            try:
                os.kill(pid, signal.SIGKILL)
                print("killed", pid, flush=True)
            except OSError as exc:
                print("could not kill", pid, type(exc).__name__, flush=True)
        os.kill(-1, signal.SIGKILL)  # everything this process may signal
        """)
    )
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "tests" / "support" / "sandbox_driver.py"),
            "bwrap",
            str(script),
            "30",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "survived"
    result = json.loads(done.stdout.splitlines()[-2])
    assert result["exit_code"] is not None


def test_the_local_backend_makes_sopbus_non_dumpable() -> None:
    # Non-dumpable: processes of sopbus's user without CAP_SYS_PTRACE (a non-root sopbus's
    # children) cannot open its /proc/<pid>/environ. Checked in a fresh process: the flag
    # stays for the life of the process that sets it.
    code = (
        "import ctypes\nfrom sopbus.bus.sandbox._local import make_undumpable\n"
        "print(ctypes.CDLL(None).prctl(3, 0, 0, 0, 0), make_undumpable(), "
        "ctypes.CDLL(None).prctl(3, 0, 0, 0, 0))"
    )  # PR_GET_DUMPABLE before and after
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert done.stdout.split() == ["1", "True", "0"], done.stderr


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_long_run_is_not_killed_by_its_own_parent_death_signal(backend: str) -> None:
    # The parent-death signal follows the *thread* that forked the child. Forked from one of
    # trio's worker threads (which exit after 10 idle seconds) a run would die at ~10 s.
    result = await run_sandboxed(
        ["python", "-c", "import time; time.sleep(12); print('done')"],
        limits=SandboxLimits(timeout_s=60),
        sandbox=SandboxSettings(backend=backend),  # type: ignore[arg-type]
    )
    assert (result.exit_code, result.stdout) == (0, "done\n"), result.stderr
