"""The document half of the software company: product manager, architect, project manager.

Each role watches the previous document and writes the next one (the idea -> PRD ->
system design -> task list), as a validated structured output that also lands in the run's
artifacts as Markdown (``docs/prd.md``, ``docs/system_design.md``, ``docs/tasks.md``).
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from sopbus.bus import ChatMessage

from .._action import Action, ActionContext, ActionResult, UserRequirement
from .._prompt import render_output
from .._role import Role
from ._util import task_prompt


class _Doc(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DocumentAction(Action, register=False):
    """An action whose output is a document: the default model call, then the rendered
    Markdown, under its title, written to ``artifact`` under the run's artifacts (the role
    keeps it: :meth:`sopbus.roles.Action.keep`)."""

    title: ClassVar[str] = ""

    def prompt(self, ctx: ActionContext) -> tuple[ChatMessage, ...]:
        """Laid out as the engineer's calls are (:func:`task_prompt`): the documents first,
        so that the engineer's calls start as the project manager's did."""
        return task_prompt(ctx, self.name, self.instruction_for(ctx), self.context(ctx))

    def keep(self, result: ActionResult, ctx: ActionContext) -> None:
        if self.artifact is not None:
            ctx.turn.write_artifact(self.artifact, f"# {self.title}\n\n{result.content}\n")


# -- product manager ----------------------------------------------------------------------


class Requirement(_Doc):
    priority: Literal["P0", "P1", "P2"] = Field(
        description="P0 must have, P1 should, P2 nice to have"
    )
    description: str


class PRD(_Doc):
    project_name: str = Field(description="short snake_case name of the product")
    product_goals: list[str] = Field(description="up to three clear goals")
    user_stories: list[str] = Field(description="'As a ..., I want ... so that ...'")
    competitive_analysis: list[str] = Field(description="similar products and how we differ")
    requirements: list[Requirement]
    ui_sketch: str = Field(
        title="UI sketch",
        description="what the user sees and types (for a CLI: example commands and output)",
    )
    open_questions: list[str]


class WritePRD(DocumentAction):
    """Write the product requirement document for the user's idea."""

    instruction = (
        "Write a product requirement document (PRD) for the idea above. Keep the "
        "scope small enough for a few source files. Requirements carry priorities "
        "(P0 must have). The UI sketch shows exactly how it is used."
    )
    Output = PRD
    artifact = "docs/prd.md"
    title = "Product requirement document"

    def render(self, output: BaseModel) -> str:
        assert isinstance(output, PRD)
        # The sketch is a screen: its lines and columns are the point, so it is a code block.
        return render_output(
            output.model_copy(update={"ui_sketch": _fenced(output.ui_sketch, "text")})
        )


class ProductManager(Role):
    profile = "Product Manager"
    goal = "turn the boss's idea into a PRD a small team can build"
    constraints = "keep the product small and testable; write in the language of the idea"
    watch = (UserRequirement,)
    actions = (WritePRD,)


# -- architect ----------------------------------------------------------------------------


class SystemDesign(_Doc):
    implementation_approach: str = Field(
        description="how to build it, libraries to use, hard parts"
    )
    file_list: list[str] = Field(
        description="relative paths of the source files, e.g. 'pkg/core.py' (no tests)"
    )
    data_structures_and_interfaces: str = Field(
        description="a Mermaid classDiagram with classes, functions and exact signatures"
    )
    program_call_flow: str = Field(description="a Mermaid sequenceDiagram of the main call flow")
    anything_unclear: str


class WriteDesign(DocumentAction):
    """Design the system for the PRD: approach, files, interfaces, call flow."""

    instruction = (
        "Design the system for the PRD above in Python, standard library only unless "
        "a package is essential. Name every source file (a package directory with "
        "modules, runnable with `python -m <package>`), and give the exact function "
        "and class signatures, so that files written separately fit together."
    )
    Output = SystemDesign
    artifact = "docs/system_design.md"
    title = "System design"

    def render(self, output: BaseModel) -> str:
        assert isinstance(output, SystemDesign)
        shown = output.model_copy(
            update={
                "data_structures_and_interfaces": _fenced(
                    output.data_structures_and_interfaces, "mermaid"
                ),
                "program_call_flow": _fenced(output.program_call_flow, "mermaid"),
            }
        )
        return render_output(shown)


def _fenced(text: str, lang: str) -> str:
    body = text.strip("\n")
    if body.lstrip().startswith("```"):
        return body.strip()  # the model fenced it already
    fence = "```"
    while fence in body:
        fence += "`"
    return f"{fence}{lang}\n{body}\n{fence}"


class Architect(Role):
    profile = "Architect"
    goal = "design a small, coherent Python system that meets the PRD"
    constraints = "standard library first; exact interfaces; few files"
    watch = (WritePRD,)
    actions = (WriteDesign,)


# -- project manager ----------------------------------------------------------------------


class FileLogic(_Doc):
    file: str
    logic: str = Field(description="what the file contains and which other files it uses")


class TaskList(_Doc):
    required_packages: list[str] = Field(
        description="third-party packages, e.g. 'rich==13.7' (none: empty)"
    )
    logic_analysis: list[FileLogic]
    task_list: list[str] = Field(description="the source files to write, dependencies first")
    shared_knowledge: str = Field(description="conventions every file must follow")


class WriteTasks(DocumentAction):
    """Break the design into an ordered list of files to write."""

    instruction = (
        "Break the system design above into tasks: analyse each source file's logic "
        "and dependencies, list the files to write in dependency order (the design's "
        "file list, tests excluded), and state the conventions they share."
    )
    Output = TaskList
    artifact = "docs/tasks.md"
    title = "Tasks"


class ProjectManager(Role):
    profile = "Project Manager"
    goal = "break the design into tasks the engineer can do file by file"
    watch = (WriteDesign,)
    actions = (WriteTasks,)
