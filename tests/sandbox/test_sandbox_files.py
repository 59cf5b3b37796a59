"""Files into and out of the sandbox never follow links; scratch directories are locked while
in use and swept when their owner is gone; the backend choice is checked like any setting."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from sopbus.bus import SandboxSettings, run_sandboxed
from sopbus.bus.sandbox import sweep_stale, using
from sopbus.bus.sandbox._scratch import LOCK, Scratch
from support.cli import sopbus
from support.sandbox import code_run_scenario, needs_bwrap


@pytest.fixture(params=[pytest.param("bwrap", marks=needs_bwrap), "local"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with using(SandboxSettings(backend=request.param, scratch_root=tmp_path / "scratch")):
        yield request.param


@pytest.mark.usefixtures("backend")
async def test_preparing_never_writes_through_a_planted_link(tmp_path: Path) -> None:
    victim, host_dir = tmp_path / "victim.txt", tmp_path / "hostdir"
    victim.write_text("original")
    host_dir.mkdir()
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "data.txt").write_text("data")
    (workspace / "main.py").symlink_to(victim)  # a file the call writes
    (workspace / "pkg").symlink_to(host_dir)  # a directory the call writes into
    (workspace / "inner").symlink_to("data.txt")  # inside the tree: kept
    (workspace / "up").symlink_to("../victim.txt")  # climbs out: dropped
    script = textwrap.dedent("""\
        import os
        print(sorted(os.listdir(".")), os.path.islink("inner"), open("inner").read(),
              os.path.islink("main.py"), os.path.isdir("pkg") and not os.path.islink("pkg"))
        """)
    result = await run_sandboxed(
        ["python", "main.py"],
        workspace=workspace,
        files={"main.py": script, "pkg/mod.py": "x = 1\n"},
    )
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "['data.txt', 'inner', 'main.py', 'pkg'] True data False True\n"
    assert victim.read_text() == "original"
    assert list(host_dir.iterdir()) == []


@pytest.mark.usefixtures("backend")
async def test_collecting_drops_links_that_point_outside_and_never_writes_through_one(
    tmp_path: Path,
) -> None:
    secret, victim = tmp_path / "secret.txt", tmp_path / "victim.txt"
    secret.write_text("host secret")
    victim.write_text("original")
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "out.txt").symlink_to(victim)  # planted where the code's output is copied
    script = textwrap.dedent(f"""\
        import os
        os.makedirs("sub")
        open("sub/a.txt", "w").write("a")
        open("out.txt", "w").write("output")
        os.symlink({str(secret)!r}, "leak")
        os.symlink("/etc/passwd", "passwd")
        os.symlink("../../..", "climb")
        os.symlink("sub/a.txt", "rel")
        """)
    result = await run_sandboxed(["python", "make.py"], files={"make.py": script}, keep=kept)
    assert result.exit_code == 0, result.stderr
    assert victim.read_text() == "original"
    assert not (kept / "out.txt").is_symlink() and (kept / "out.txt").read_text() == "output"
    assert not any(
        (kept / n).is_symlink() or (kept / n).exists() for n in ("leak", "passwd", "climb")
    )
    assert os.readlink(kept / "rel") == "sub/a.txt" and (kept / "rel").read_text() == "a"


async def test_a_hard_link_to_a_host_file_is_not_collected(tmp_path: Path, backend: str) -> None:
    secret = tmp_path / "scratch" / "secret.txt"  # same filesystem as the scratch directory
    secret.parent.mkdir()
    secret.write_text("host secret")
    script = textwrap.dedent(f"""\
        import os
        try:
            os.link({str(secret)!r}, "h.txt")
            print("linked")
        except OSError as exc:
            print("refused", type(exc).__name__)
        open("ok.txt", "w").write("ok")
        """)
    kept = tmp_path / "kept"
    result = await run_sandboxed(["python", "link.py"], files={"link.py": script}, keep=kept)
    assert result.exit_code == 0, result.stderr
    if backend == "bwrap":
        assert result.stdout.startswith("refused")  # the host file is not even visible
    assert not (kept / "h.txt").exists()
    assert (kept / "ok.txt").read_text() == "ok"


def test_sweeping_removes_only_directories_whose_owner_is_gone(tmp_path: Path) -> None:
    root = tmp_path / "root"
    live = Scratch(root)  # this process holds its lock
    dead = root / "12345-dead"
    (dead / "work").mkdir(parents=True)
    (dead / LOCK).write_text("")  # nobody holds it: its owner was killed
    assert sweep_stale(root) == 1
    assert not dead.exists() and live.path.exists()
    live.remove()
    assert list(root.iterdir()) == []


def test_sweeping_leaves_a_directory_made_a_moment_ago_and_not_yet_locked(tmp_path: Path) -> None:
    # Another run's Scratch between its lock file and its lock (two processes sharing the
    # default scratch root): its directory has no work/ yet, and sweeping must not take it,
    # or that run fails making work/ (an eval's sandboxed check did, under load).
    root = tmp_path / "root"
    starting = root / "12345-starting"
    starting.mkdir(parents=True)
    (starting / LOCK).write_text("")
    assert sweep_stale(root) == 0
    assert starting.exists()
    old = os.stat(starting).st_mtime - 120  # one killed in that moment, long ago: swept
    os.utime(starting, (old, old))
    assert sweep_stale(root) == 1 and not starting.exists()


@pytest.mark.slow
def test_bwrap_asked_for_and_missing_is_a_configuration_error(tmp_path: Path) -> None:
    scenario = code_run_scenario(tmp_path, ["print('hi')"], backend="bwrap")
    no_bwrap = {"PATH": str(tmp_path / "empty-path")}
    done = sopbus("run", scenario, "--quiet", env=no_bwrap)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert f'{scenario}: [sandbox].backend = "bwrap"' in done.stderr
    assert "install bubblewrap (apt-get install bubblewrap)" in done.stderr
    assert not (tmp_path / "runs").exists()  # nothing ran
    flag = sopbus(
        "run",
        code_run_scenario(tmp_path / "b", ["print('hi')"], backend="auto"),
        "--quiet",
        "--sandbox",
        "bwrap",
        env=no_bwrap,
    )
    assert flag.returncode == 2 and "apt-get install bubblewrap" in flag.stderr


@pytest.mark.slow
def test_an_unknown_backend_names_the_field(tmp_path: Path) -> None:
    scenario = code_run_scenario(tmp_path, ["print('hi')"], backend="docker")
    done = sopbus("validate", scenario)
    assert done.returncode == 2
    assert "$.sandbox.backend" in done.stderr and "docker" in done.stderr
    assert "Traceback" not in done.stderr
    flag = sopbus("run", scenario, "--sandbox", "docker")
    assert flag.returncode == 2 and "--sandbox" in flag.stderr


async def test_keep_creates_the_directories_it_needs(tmp_path: Path) -> None:
    kept = tmp_path / "a" / "b" / "kept"
    result = await run_sandboxed(
        ["python", "-c", "open('x.txt', 'w').write('x')"],
        keep=kept,
        sandbox=SandboxSettings(backend="local"),
    )
    assert result.exit_code == 0, result.stderr
    assert (kept / "x.txt").read_text() == "x"
