"""A one-role team whose action calls Python tools, for the tool loop tests. Scenarios name
it as ``sop = "tool_sop:SOP"`` with this directory on the path.

``py.append_note`` appends its note to the file ``TOOL_NOTES`` names (so a test sees whether
a tool really ran); ``py.word_count`` counts words.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel

from sopbus import sops
from sopbus.roles import Action, Role
from sopbus.sops import SopContext, Team
from sopbus import tool


@tool
def word_count(text: str) -> int:
    """How many words ``text`` has."""
    return len(text.split())


@tool
def append_note(note: str, times: int = 1) -> str:
    """Appends ``note`` to the notes file, ``times`` times."""
    with Path(os.environ["TOOL_NOTES"]).open("a") as notes:
        notes.write(f"{note}\n" * times)
    return f"noted {note!r}"


class Summary(BaseModel):
    summary: str
    words: int


class SummarizeNotes(Action, register=False):
    instruction = "Count the words of the idea with py.word_count, note it, then summarize."
    Output = Summary
    tools = ("py.*",)
    max_tool_steps = 3


class Analyst(Role, register=False):
    watch = ("UserRequirement",)
    actions = (SummarizeNotes,)


def build(ctx: SopContext) -> Team:
    analyst = Analyst(name="Analyst", llm_defaults=ctx.llm_defaults, registry=ctx.registry)
    return Team(roles=[analyst])


SOP = sops.SOP(name="tool_team", description="one analyst with Python tools", build=build)
