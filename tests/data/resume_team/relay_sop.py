"""A small team for the resume, replay and fork tests: four rounds, two concurrent calls in
one of them, and an artifact written by every turn (so "the artifacts are equal" means
something). Scenarios name it as ``sop = "relay_sop:SOP"`` with this directory on the path.

    round 1  Planner  RelayPlan   -> plan.md
    round 2  Ann, Ben RelayDraft  -> drafts/<name>.md   (concurrent)
    round 3  Editor   RelayEdit   -> final.md           (reads both drafts)
    round 4  Checker  RelayCheck  -> check.md
"""

from __future__ import annotations

from pydantic import BaseModel

from sopbus.roles import Action, ActionContext, ActionResult, Role
from sopbus import sops
from sopbus.sops import SopContext, Team


class _Written(Action, register=False):
    """Asks as usual, then keeps the answer as an artifact (written by the action itself,
    under a lower-case role name, which ``Action.artifact`` templates do not do)."""

    path = ""

    async def run(self, ctx: ActionContext) -> ActionResult:
        result = await super().run(ctx)
        ctx.turn.write_artifact(self.path.format(role=ctx.role.name.lower()), result.content)
        return result


class Plan(BaseModel):
    title: str
    steps: list[str]


class Draft(BaseModel):
    heading: str
    body: str


class Edit(BaseModel):
    summary: str
    merged: str


class Check(BaseModel):
    approved: bool
    notes: list[str]


class RelayPlan(_Written):
    instruction = "Plan the piece: a title and three steps."
    Output = Plan
    path = "plan.md"


class RelayDraft(_Written):
    instruction = "Draft your part of the plan."
    Output = Draft
    path = "drafts/{role}.md"


class RelayEdit(_Written):
    instruction = "Merge the drafts into one text."
    Output = Edit
    path = "final.md"


class RelayCheck(_Written):
    instruction = "Check the merged text."
    Output = Check
    path = "check.md"


class Planner(Role, register=False):
    watch = ("UserRequirement",)
    actions = (RelayPlan,)


class Writer(Role, register=False):
    watch = (RelayPlan,)
    actions = (RelayDraft,)


class Editor(Role, register=False):
    watch = (RelayDraft,)
    actions = (RelayEdit,)


class Checker(Role, register=False):
    watch = (RelayEdit,)
    actions = (RelayCheck,)


def build(ctx: SopContext) -> Team:
    def make(cls: type[Role], name: str) -> Role:
        return cls(name=name, llm_defaults=ctx.llm_defaults, registry=ctx.registry)

    return Team(roles=[make(Planner, "Planner"), make(Writer, "Ann"), make(Writer, "Ben"),
                       make(Editor, "Editor"), make(Checker, "Checker")])


SOP = sops.SOP(name="relay", description="plan, two drafts side by side, edit, check", build=build)
