"""Repository analyst: one role reads a git repository through the real ``mcp-server-git``
(read-only tools: ``git_status``, ``git_log``, ``git_show``, ``git_diff``) and reports what
changed; the verdict checks the report against the repository itself.

``[sop]`` options::

    repo = "../my-project"   # a git repository to analyse (relative to the scenario file);
                             # default: a small demo repository the run makes in its folder
    server = "git"           # the [mcp.NAME] server that runs in the repository
    action = "SummarizeChanges"  # the action whose output is the report
    max_commits = 20         # the range: the last commits of HEAD, at most this many

The team is the file's own ``[[roles]]`` (the analyst and its action, with its ``tools``).
The server runs with the repository as its folder, so the tools take ``repo_path = "."``.
The demo repository is made with fixed names and dates, so its commits have the same ids in
every run (the shipped fixtures name them). The verdict passes when the report names every
commit of the range (by an id prefix of 7 or more characters) and every file it names
(``changed_files``, ``risky_files``) was touched by a commit of the range.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

import msgspec

from sopbus.bus import ConfigError, RunRecord, Verdict

from .. import _sop
from .._sop import SopContext, Team

DEMO = "repo"  # the demo repository's folder in the run directory


class RepoOptions(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    repo: str | None = None
    server: str = "git"
    action: str = "SummarizeChanges"
    max_commits: int = 20


def build(ctx: SopContext) -> Team:
    o = ctx.options_as(RepoOptions)
    path = ctx.scenario.path
    if o.server not in ctx.scenario.mcp:
        raise ConfigError(
            f"{path}: [sop].server names {o.server!r}, but the file declares no "
            f'[mcp.{o.server}] table; add one with command = "mcp-server-git"'
        )
    if o.max_commits < 1:
        raise ConfigError(f"{path}: [sop].max_commits must be 1 or more, got {o.max_commits}")
    chosen = ctx.resolve(o.repo) if o.repo else None
    if chosen is not None and not _is_repo(chosen):
        raise ConfigError(
            f"{path}: [sop].repo = {o.repo!r} ({chosen}) is not a git repository - at "
            f"`$.sop.repo`: name a folder with a .git, relative to the scenario file"
        )

    # Whether the server's command is installed is checked where every [mcp.NAME] server's
    # is, before the run directory exists (bus.llm._mcp_launch: PATH, then beside sopbus).
    def workspace(run_dir: Path, live: bool) -> Mapping[str, Path]:
        repo = chosen or make_demo_repo(run_dir / DEMO)
        return {o.server: repo}

    def verdict(record: RunRecord) -> Verdict:
        repo = chosen or (record.artifacts_dir.parent / DEMO if record.artifacts_dir else None)
        return judge(record, repo, o.action, o.max_commits)

    return Team(roles=[], workspace=workspace, verdict=verdict)


def judge(record: RunRecord, repo: Path | None, action: str, max_commits: int) -> Verdict:
    """The report (the last ``action`` message's payload) against the repository's log."""
    reports = [m.payload for m in record.of(action) if isinstance(m.payload, dict)]
    if not reports:
        return Verdict(
            passed=False, reason=f"no {action} report (the run ended: {record.end_reason})"
        )
    if repo is None or not _is_repo(repo):
        return Verdict(passed=False, reason=f"the repository {repo} is not there to check against")
    commits, touched = repo_facts(repo, max_commits)
    report = reports[-1]
    named = [str(c).strip() for c in report.get("commits") or []]
    missed = [c[:7] for c in commits if not any(len(n) >= 7 and c.startswith(n) for n in named)]
    files = [*(report.get("changed_files") or []), *(report.get("risky_files") or [])]
    unknown = sorted({str(f) for f in files} - touched)
    problems = []
    if missed:
        problems.append(f"misses {len(missed)} of {len(commits)} commits ({', '.join(missed)})")
    if unknown:
        problems.append(f"names files no commit of the range touched ({', '.join(unknown)})")
    if not str(report.get("summary") or "").strip():
        problems.append("has an empty summary")
    if problems:
        return Verdict(passed=False, reason="the report " + "; ".join(problems))
    risky = len(report.get("risky_files") or [])
    return Verdict(
        passed=True,
        reason=f"the report covers all {len(commits)} commits and names only files they "
        f"touched ({risky} risky)",
    )


def repo_facts(repo: Path, max_commits: int) -> tuple[list[str], set[str]]:
    """The range's commit ids (newest first) and every path its commits touched."""
    out = _git(repo, "log", f"--max-count={max_commits}", "--format=@%H", "--name-only")
    commits = [line[1:] for line in out.splitlines() if line.startswith("@")]
    touched = {line for line in out.splitlines() if line and not line.startswith("@")}
    return commits, touched


# The demo: a small order service whose last two commits are the risky ones.
_DEMO_COMMITS: tuple[tuple[str, dict[str, str]], ...] = (
    (
        "Start the order service",
        {
            "README.md": "# orders\n\nA small order service.\n",
            "orders/app.py": "def handle(order):\n    return {'ok': True, 'id': order['id']}\n",
        },
    ),
    (
        "Read the settings from config.toml",
        {
            "orders/config.py": "import tomllib\n\n\ndef load(path):\n"
            "    with open(path, 'rb') as f:\n        return tomllib.load(f)\n",
            "config.toml": "[server]\nport = 8080\n",
        },
    ),
    (
        "Skip the token check for internal callers",
        {
            "orders/auth.py": "def allowed(request):\n"
            "    if request.headers.get('X-Internal') == '1':\n        return True\n"
            "    return check_token(request.headers.get('Authorization'))\n",
        },
    ),
    (
        "Pin requests 2.19 for the old proxy",
        {"requirements.txt": "requests==2.19.0\n"},
    ),
)


def make_demo_repo(folder: Path) -> Path:
    """The demo repository in ``folder`` (made once: a resume finds it as it was), with
    fixed author, committer and dates, so its commit ids are the same on every machine."""
    if _is_repo(folder):
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    _git(folder, "init", "--quiet", "--initial-branch=main")
    for i, (message, files) in enumerate(_DEMO_COMMITS):
        for rel, text in files.items():
            target = folder / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        _git(folder, "add", "--all")
        date = f"2026-01-{5 + i:02d}T10:00:00+00:00"
        _git(folder, "commit", "--quiet", "--no-gpg-sign", "-m", message, date=date)
    return folder


def _git(repo: Path, *args: str, date: str | None = None) -> str:
    """``git ARGS`` in ``repo``, with no user or system configuration (so no hook, signing
    or template of the user's changes what is made or read)."""
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": str(repo),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_AUTHOR_NAME": "Ada Analyst",
        "GIT_AUTHOR_EMAIL": "ada@example.com",
        "GIT_COMMITTER_NAME": "Ada Analyst",
        "GIT_COMMITTER_EMAIL": "ada@example.com",
        **({"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date} if date else {}),
    }
    try:
        done = subprocess.run(
            ["git", "-C", str(repo), *args], env=env, capture_output=True, text=True, check=True
        )
    except FileNotFoundError:
        raise ConfigError("the repo_analyst SOP needs git: install it (apt install git)") from None
    except subprocess.CalledProcessError as exc:
        raise ConfigError(f"git {' '.join(args)} failed in {repo}: {exc.stderr.strip()}") from None
    return done.stdout


def _is_repo(folder: Path) -> bool:
    return (folder / ".git").exists()


SOP = _sop.SOP(
    name="repo_analyst",
    description="Repository analyst: reads a git repository through the real mcp-server-git "
    "(read-only tools) and reports what changed, checked against the repository",
    build=build,
)
