"""A role added in Python: a code reviewer joins the software company.

The scenario ``software_company_python_reviewer.toml`` names this module's ``SOP``
(``sop = "my_reviewer:SOP"``; the module is found beside the scenario file). Nothing is
wired: the reviewer *watches* ``WriteCode`` and addresses its review to the engineer.
"""

from __future__ import annotations

from pydantic import BaseModel

import sopbus
from sopbus import Action, Role, SopContext
from sopbus.sops import Team
from sopbus.sops.builtin.software_company import SOP as COMPANY


class ReviewCode(Action):
    instruction = (
        "Review the code in the messages above. List concrete problems "
        "(file, line, what to change); approve only code you would ship."
    )

    class Output(BaseModel):
        approved: bool
        problems: list[str]


class Reviewer(Role):
    profile = "Code Reviewer"
    goal = "catch bugs before QA does"
    watch = ("WriteCode",)
    actions = (ReviewCode,)
    send_to = ("Engineer",)


def build(ctx: SopContext) -> Team:
    team = COMPANY.build(ctx)
    team.roles.append(Reviewer(name="Rita", llm_defaults=ctx.llm_defaults, registry=ctx.registry))
    return team


SOP = sopbus.SOP(
    name="software_company_python_reviewer",
    description="the software company plus a code reviewer declared in Python",
    build=build,
)
