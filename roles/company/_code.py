"""The engineer of the software company: writes the files of a task list side by side,
optionally has each one reviewed, summarizes the code, and fixes what QA reports.

One model call per file (``WriteCode``), all files of a task list at once in a trio
nursery, so a pipeline with five files costs one call's wall time, not five. Every file
lands under ``artifacts/workspace/``. The engineer publishes ``WriteCode`` (the files it
wrote, for reviewers) and then ``SummarizeCode`` (the whole workspace, for QA).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from sopbus.bus import Message, Turn

from .._action import Action, ActionContext
from .._llm import layered
from .._role import Role
from ._docs import WriteDesign, WriteTasks
from ._util import WORKSPACE, concurrently, is_test, listing, task_prompt, unique_paths

BUG_REPORT = "DebugError"
"""The action name of QA's bug reports (declared in the QA module, which imports this one)."""


class CodeFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    code: str = Field(description="the complete content of the file, nothing else")


class CodeReview(BaseModel):
    model_config = ConfigDict(extra="forbid")
    lgtm: bool = Field(description="true when the file can ship as it is")
    issues: list[str] = Field(description="concrete problems to fix (empty when lgtm)")


class FileSummary(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str
    purpose: str


class CodeSummary(BaseModel):
    model_config = ConfigDict(extra="forbid")
    summary: str = Field(description="what the code does and how to run it")
    files: list[FileSummary]
    todo: list[str] = Field(description="known gaps, if any")


class WriteCode(Action):
    """Write one source file of the task list (one call per file)."""

    instruction = (
        "Write the complete content of this one file. Follow the design's interfaces "
        "exactly: the other files are written at the same time from the same design. "
        "Python 3.11; standard library only unless the task list names a package; no "
        "placeholders. Put the whole file into `code`."
    )
    Output = CodeFile
    # Whole files are longer than a document section; a scenario's [llm].max_tokens and the
    # role's settings still win (a CPU server may need every answer short).
    default_max_tokens = 4096

    async def write(
        self,
        ctx: ActionContext,
        path: str,
        *,
        files: Sequence[str],
        context: Sequence[Message],
        current: dict[str, str] | None = None,
    ) -> str:
        """The new content of ``path``. With ``current`` (the workspace as it is), the
        prompt shows the code and asks for a fix of what ``context`` reports."""
        # What every file of this round shares comes first, the file's own lines last, so
        # that the calls of one round share their prompt's prefix (a server's cache).
        text = f"Files of the project: {', '.join(files)}\n\n{self.instruction}"
        if current is not None:
            text += f"\n\nThe current code:\n\n{listing(current)}"
        text += f"\n\nFile to write: {path}"
        if current is not None:
            text += (
                f"\n\nRewrite {path} so that the problems reported above are fixed. Keep "
                f"its interface unless the report says the interface is wrong."
            )
        prompt = task_prompt(ctx, self.name, text, context=context)
        return (await self.ask(ctx, prompt, output=CodeFile, subject=path)).code


class WriteCodeReview(Action):
    """Review one file against the design; list what must change."""

    instruction = (
        "Review this file against the design and the task list above: correctness, "
        "the interfaces other files rely on, error handling, readability. Answer "
        "lgtm = true when it can ship; otherwise list concrete issues."
    )
    Output = CodeReview

    async def review(
        self, ctx: ActionContext, path: str, code: str, *, context: Sequence[Message]
    ) -> CodeReview:
        text = f"{self.instruction}\n\nFile to review: {path}\n\n{listing({path: code})}"
        prompt = task_prompt(ctx, self.name, text, context=context)
        return await self.ask(ctx, prompt, output=CodeReview, subject=path)


class SummarizeCode(Action):
    """Summarize the written code for QA: what each file does, how to run it."""

    instruction = (
        "Summarize the code above for the QA engineer who will test it: what it does, "
        "how to run it, the purpose of each file, and any known gaps."
    )
    Output = CodeSummary

    async def summarize(self, ctx: ActionContext, workspace: dict[str, str]) -> CodeSummary:
        # The code first: QA's calls about this code start with the same listing.
        prompt = task_prompt(
            ctx, self.name, self.instruction, ctx.news[-3:], code=listing(workspace)
        )
        return await self.ask(ctx, prompt, output=CodeSummary)


class Engineer(Role):
    """Writes the code of a task list and fixes the files QA's bug reports name.

    ``review``: each file gets ``WriteCodeReview`` and up to ``max_review_rounds`` rewrites
    while the review finds issues. ``max_files`` bounds the files of one task list (a
    model that lists fifty files is not followed there). Other messages addressed to the
    engineer (a reviewer's report, test results) are remembered and shown to the model
    the next time it writes or fixes a file; they start no work of their own, so a
    reviewer of ``WriteCode`` cannot loop with the engineer.
    """

    profile = "Engineer"
    goal = "write elegant, readable, working Python code that follows the design"
    constraints = "follow the interfaces of the design exactly; standard library first"
    watch = (WriteDesign, WriteTasks)
    actions = (WriteCode, SummarizeCode)

    def __init__(
        self, *, review: bool = False, max_review_rounds: int = 1, max_files: int = 8, **fields: Any
    ) -> None:
        super().__init__(**fields)
        if max_review_rounds < 0 or max_files < 1:
            raise ValueError(
                f"Engineer needs max_review_rounds >= 0 and max_files >= 1, got "
                f"{max_review_rounds} and {max_files}"
            )
        self.review, self.max_review_rounds, self.max_files = review, max_review_rounds, max_files
        self.reviewer = WriteCodeReview()
        self.workspace: dict[str, str] = {}
        self.version = 0

    def fields(self) -> dict[str, Any]:
        return {
            **super().fields(),
            "review": self.review,
            "max_review_rounds": self.max_review_rounds,
            "max_files": self.max_files,
        }

    def models(self) -> set[str | None]:
        return super().models() | {layered(self.llm_defaults, self.reviewer.llm, self.llm).model}

    async def step(self, news: Sequence[Message], turn: Turn) -> Sequence[Message]:
        fresh = tuple(news)
        self.memory.extend(fresh)
        tasks = [m for m in fresh if m.cause_by == WriteTasks.name]
        bugs = [m for m in fresh if m.cause_by == BUG_REPORT]
        if tasks:
            return await self._build(tasks[-1], fresh, turn)
        if bugs:
            return await self._fix(bugs[-1], fresh, turn)
        return ()

    # -- writing ---------------------------------------------------------------------------

    async def _build(self, tasks: Message, news: tuple[Message, ...], turn: Turn) -> list[Message]:
        paths = unique_paths(_planned(tasks.payload), limit=self.max_files)
        self.workspace = {}
        written = await self._write(paths, paths, news, turn, fixing=False)
        return await self._publish(written, news, turn, reason="tasks")

    async def _fix(self, report: Message, news: tuple[Message, ...], turn: Turn) -> list[Message]:
        named = report.payload.get("files_to_fix", []) if isinstance(report.payload, dict) else []
        sources = [p for p in self.workspace if not is_test(p)]
        if not sources:
            return []  # a report about code this engineer never wrote: nothing to fix
        targets = [p for p in sources if p in set(named)] or sources
        turn.emit("fixing", files=targets, report=report.id)
        written = await self._write(targets, sources, news, turn, fixing=True)
        return await self._publish(written, news, turn, reason="bug report")

    async def _write(
        self,
        targets: Sequence[str],
        files: Sequence[str],
        news: tuple[Message, ...],
        turn: Turn,
        *,
        fixing: bool,
    ) -> dict[str, str]:
        writer = self.action_named(WriteCode.name)
        assert isinstance(writer, WriteCode)
        ctx = self.context(writer, news, turn)
        context = self._context(fixing)
        current = dict(self.workspace) if fixing else None

        async def one(path: str) -> str:
            code = await writer.write(ctx, path, files=files, context=context, current=current)
            return await self._reviewed(path, code, files, context, current, news, turn)

        codes = await concurrently([functools.partial(one, p) for p in targets])
        return dict(zip(targets, codes))

    async def _reviewed(
        self,
        path: str,
        code: str,
        files: Sequence[str],
        context: list[Message],
        current: dict[str, str] | None,
        news: tuple[Message, ...],
        turn: Turn,
    ) -> str:
        if not self.review:
            return code
        writer = self.action_named(WriteCode.name)
        assert isinstance(writer, WriteCode)
        for rnd in range(1, self.max_review_rounds + 1):
            verdict = await self.reviewer.review(
                self.context(self.reviewer, news, turn), path, code, context=context
            )
            turn.emit(
                "code_reviewed",
                file=path,
                review_round=rnd,
                lgtm=verdict.lgtm,
                issues=verdict.issues,
            )
            if verdict.lgtm:
                break
            notes = Message(
                cause_by=WriteCodeReview.name,
                sent_from=self.name,
                content="Review of " + path + ":\n" + "\n".join(f"- {i}" for i in verdict.issues),
            )
            code = await writer.write(
                self.context(writer, news, turn),
                path,
                files=files,
                context=[*context, notes],
                current={**(current or {}), path: code},
            )
        return code

    def _context(self, fixing: bool) -> list[Message]:
        """The design and the task list, in the order they were written (the project
        manager's call starts with the design too: one prefix for a cache); when fixing,
        also what was reported to the engineer since (bug reports, test results, reviewers'
        notes), newest last."""
        docs = [
            m
            for m in (self.memory.latest(WriteDesign.name), self.memory.latest(WriteTasks.name))
            if m
        ]
        if not fixing:
            return docs
        own = {WriteDesign.name, WriteTasks.name, WriteCode.name, SummarizeCode.name}
        reports = [m for m in self.memory if m.cause_by not in own and m.sent_from != self.name]
        return [*docs, *reports[-6:]]

    # -- publishing ------------------------------------------------------------------------

    async def _publish(
        self, written: dict[str, str], news: tuple[Message, ...], turn: Turn, *, reason: str
    ) -> list[Message]:
        self.version += 1
        for path, code in written.items():
            self.workspace[path] = code
            turn.write_artifact(f"{WORKSPACE}/{path}", code)
        code_msg = self._message(
            WriteCode.name,
            listing(written),
            news,
            {"files": written, "version": self.version, "reason": reason},
        )
        summarizer = self.action_named(SummarizeCode.name)
        assert isinstance(summarizer, SummarizeCode)
        summary = await summarizer.summarize(self.context(summarizer, news, turn), self.workspace)
        text = summarizer.render(summary)
        turn.write_artifact("docs/code_summary.md", f"# Code summary\n\n{text}\n")
        payload = {
            **summary.model_dump(mode="json"),
            "workspace": dict(self.workspace),
            "version": self.version,
        }
        return [code_msg, self._message(SummarizeCode.name, text, news, payload)]

    def _message(
        self, action: str, content: str, news: tuple[Message, ...], payload: Any
    ) -> Message:
        message = Message(
            cause_by=action,
            sent_from=self.name,
            send_to=self.send_to,
            content=content,
            payload=payload,
            parents=tuple(dict.fromkeys(m.id for m in news if m.id)),
        )
        self.memory.add(message)
        return message


def _planned(payload: Any) -> Iterable[str]:
    """The files a task list asks for: ``task_list``, else the files of ``logic_analysis``."""
    if not isinstance(payload, dict):
        return ()
    listed = [f for f in payload.get("task_list", []) if isinstance(f, str)]
    if listed:
        return listed
    return [
        f["file"] for f in payload.get("logic_analysis", []) if isinstance(f, dict) and "file" in f
    ]
