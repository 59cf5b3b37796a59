"""sopbus as a user installs it: a wheel built from this tree, in a fresh virtual environment,
used from a folder of the user's own that holds ``bus.py``, ``roles.py`` and ``sops.py``.

Each of those files raises when imported, so a run that imports any of them (a top-level
package of ours by a plain name, as the wheel once installed ``bus``, ``roles`` and ``sops``)
fails. The shipped scenarios run by name, ``sopbus new`` writes a team that validates and
runs, and the Python API works, all from outside the checkout.

The fresh environment gets sopbus from the wheel alone; its dependencies come from this test
run's environment through a path entry (not its ``.pth`` files, so the editable install of
the checkout stays out of sight).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from support.paths import ROOT
from support.sandbox import needs_bwrap

pytestmark = pytest.mark.slow

RAISES = "raise RuntimeError('the user\\'s own {name} was imported by sopbus')\n"


@dataclass(frozen=True)
class Installed:
    wheel: Path
    bin: Path
    user: Path  # the user's folder: bus.py, roles.py, sops.py that raise

    def run(
        self, *args: str, cwd: Path | None = None, timeout: float = 300
    ) -> subprocess.CompletedProcess[str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "COLUMNS")
        }
        env["PATH"] = f"{self.bin}{os.pathsep}{env.get('PATH', '')}"
        return subprocess.run(
            list(args),
            cwd=cwd or self.user,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    tmp = tmp_path_factory.mktemp("wheel")
    # Built from a copy: setuptools writes build/ and *.egg-info beside the sources, and a
    # stale build/ in the checkout would leak old modules into later wheels.
    source = tmp / "source"
    shutil.copytree(
        ROOT,
        source,
        ignore=shutil.ignore_patterns(
            ".git",
            ".venv",
            "build",
            "dist",
            "*.egg-info",
            "runs",
            "sweeps",
            "__pycache__",
            ".*_cache",
        ),
    )
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp / "dist"),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = (tmp / "dist").glob("sopbus-*.whl")
    venv = tmp / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120
    )
    purelib = Path(
        subprocess.run(
            [
                str(venv / "bin" / "python"),
                "-c",
                "import sysconfig; print(sysconfig.get_path('purelib'))",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(venv / "bin" / "python"),
            "install",
            "-q",
            "--no-deps",
            "--no-index",
            str(wheel),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    # The dependencies: this environment's site-packages as a plain path entry, after the
    # venv's own (a plain entry's .pth files are not run, so the checkout's editable
    # install is not seen).
    # Every package folder on this interpreter's path: its site-packages and any a .pth adds.
    folders = [p for p in sys.path if Path(p).name in ("site-packages", "dist-packages")]
    (purelib / "zz_deps.pth").write_text("\n".join(folders) + "\n")
    user = tmp / "user"
    user.mkdir()
    for name in ("bus", "roles", "sops"):
        (user / f"{name}.py").write_text(RAISES.format(name=f"{name}.py"))
    yield Installed(wheel=wheel, bin=venv / "bin", user=user)


def test_the_wheel_installs_one_top_level_name_with_its_data(installed: Installed) -> None:
    names = zipfile.ZipFile(installed.wheel).namelist()
    assert {n.split("/")[0] for n in names} == {
        "sopbus",
        f"{installed.wheel.name.split('-py')[0]}.dist-info",
    }
    for needed in (
        "sopbus/bus/money/prices.toml",
        "sopbus/bus/report/static/report.css",
        "sopbus/scenarios/software_company.toml",
        "sopbus/scenarios/fixtures/software_company.toml",
        "sopbus/scenarios/data/book_writer/outline.toml",
        "sopbus/scenarios/my_reviewer.py",
        "sopbus/_templates/team/scenario.toml",
        "sopbus/_templates/team/team.py.txt",
        "sopbus/cli/__main__.py",
        "sopbus/__main__.py",
    ):
        assert needed in names, needed
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    assert "sopbus = sopbus.cli:main" in zipfile.ZipFile(installed.wheel).read(entry).decode()


def test_the_cli_runs_from_outside_the_checkout(installed: Installed) -> None:
    version = installed.run("sopbus", "--version")
    assert version.returncode == 0 and version.stdout.startswith("sopbus 0."), version.stderr
    module = installed.run(str(installed.bin / "python"), "-m", "sopbus", "--help")
    assert module.returncode == 0 and "examples" in module.stdout, module.stderr
    listed = installed.run("sopbus", "examples", "--json")
    assert listed.returncode == 0, listed.stderr
    names = {e["name"] for e in json.loads(listed.stdout)}
    assert {"software_company", "flower_shop", "book_writer"} <= names
    wrong = installed.run("sopbus", "run", "sofware_company")
    assert wrong.returncode == 2 and "did you mean `software_company`" in wrong.stderr


@pytest.mark.parametrize("sandbox", ["local", pytest.param("bwrap", marks=needs_bwrap)])
def test_the_main_job_runs_by_name_with_the_users_modules_beside_it(
    installed: Installed, sandbox: str
) -> None:
    runs = f"runs-{sandbox}"
    done = installed.run(
        "sopbus", "run", "software_company", "--sandbox", sandbox, "--runs-dir", runs, "--quiet"
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (run,) = (installed.user / runs).iterdir()
    summary = json.loads((run / "summary.json").read_text())
    assert summary["verdict"]["passed"] is True, summary["verdict"]
    assert summary["llm_calls"] <= 20


def test_the_python_api_runs_a_shipped_scenario_by_name(installed: Installed) -> None:
    code = (
        "import sopbus\n"
        "r = sopbus.run_scenario('flower_shop', runs_dir='api-runs')\n"
        "print(r.status, r.summary.scenario, r.ok, type(r.verdict).__name__)\n"
    )
    done = installed.run(str(installed.bin / "python"), "-c", code)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["completed", "flower-shop", "True", "NoneType"]


def test_a_new_team_validates_and_runs_with_a_verdict(installed: Installed) -> None:
    made = installed.run("sopbus", "new", "my-team")
    assert made.returncode == 0, made.stderr
    team = installed.user / "my-team"
    assert sorted(p.name for p in team.iterdir()) == [
        ".env.example",
        "fixtures.toml",
        "my_team_team.py",
        "scenario.toml",
    ]
    checked = installed.run("sopbus", "validate", "scenario.toml", cwd=team)
    assert checked.returncode == 0, checked.stderr
    ran = installed.run("sopbus", "run", "scenario.toml", "--quiet", cwd=team)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    (run,) = (team / "runs").iterdir()
    summary = json.loads((run / "summary.json").read_text())
    assert summary["verdict"]["passed"] is True and summary["end_reason"] == "stop_condition"
    again = installed.run("sopbus", "new", "my-team")
    assert again.returncode == 2 and "would overwrite" in again.stderr  # nothing replaced
    copied = installed.run("sopbus", "new", "company", "--from", "software_company_python_reviewer")
    assert copied.returncode == 0, copied.stderr
    assert (installed.user / "company" / "my_reviewer.py").is_file()
    valid = installed.run(
        "sopbus",
        "validate",
        "software_company_python_reviewer.toml",
        cwd=installed.user / "company",
    )
    assert valid.returncode == 0, valid.stderr
