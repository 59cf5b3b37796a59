"""Small teams for tests, as scenario files: a pipeline of roles, each watching the action
of the one before it (the first watches the idea), declared in TOML as a user writes them.

    pipeline(("Dora", "Draft"), ("Pete", "Polish"), llm={"provider": "openai"})

gives ``[actions.Draft]`` and ``[actions.Polish]`` (free text unless ``outputs`` gives an
action's fields), a role per step, and the ``[scenario]``, ``[run]`` and ``[llm]`` tables.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import tomli_w

Step = tuple[str, str]
"""A role's name and the action it takes."""


def pipeline(
    *steps: Step,
    name: str = "pair",
    idea: str = "a haiku about tea",
    run: Mapping[str, Any] | None = None,
    llm: Mapping[str, Any] | None = None,
    outputs: Mapping[str, Mapping[str, str]] | None = None,
    role_llm: Mapping[str, Mapping[str, Any]] | None = None,
    extra: str = "",
) -> str:
    """The scenario file's text (see the module docstring); ``extra`` is TOML appended as is
    (a ``[prices]`` table, ``[[inject]]`` entries)."""
    doc: dict[str, Any] = {"scenario": {"name": name, "idea": idea}}
    if run:
        doc["run"] = dict(run)
    if llm:
        doc["llm"] = dict(llm)
    doc["actions"] = {
        action: {
            "instruction": f"{action} it.",
            **({"output": dict(outputs[action])} if outputs and action in outputs else {}),
        }
        for _, action in steps
    }
    watched = "UserRequirement"
    doc["roles"] = []
    for role, action in steps:
        entry: dict[str, Any] = {"name": role, "watch": [watched], "actions": [action]}
        if role_llm and role in role_llm:
            entry["llm"] = dict(role_llm[role])
        doc["roles"].append(entry)
        watched = action
    return tomli_w.dumps(doc) + (f"\n{extra}\n" if extra else "")
