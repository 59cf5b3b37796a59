"""``sopbus``'s public surface, pinned (as httpx's ``test_exported_members``).

A user writing a role, an SOP or a script imports from ``sopbus`` alone (the names are in
``support.public_api``). Adding a name there is a decision; removing one breaks users. Each name is one thing: ``sopbus.Verdict`` is the
verdict the engine computes, not a look-alike, and every error a user can meet derives from
:class:`sopbus.SopbusError`.
"""

from __future__ import annotations

import subprocess
import sys

import sopbus
from support.public_api import PUBLIC


def test_exported_members() -> None:
    assert sopbus.__all__ == sorted(PUBLIC)
    assert sorted(dir(sopbus)) == sorted(PUBLIC)
    for name in PUBLIC:
        assert getattr(sopbus, name) is not None


def test_each_name_is_the_one_thing_the_library_uses() -> None:
    from sopbus import bus, roles, sops

    assert sopbus.Verdict is bus.Verdict
    assert sopbus.Message is bus.Message and sopbus.Turn is bus.Turn
    assert sopbus.Role is roles.Role and sopbus.Action is roles.Action
    assert sopbus.LLMSettings is roles.LLMSettings
    assert sopbus.SOP is sops.SOP
    # sopbus.Team is a team declared in Python (sopbus._team); the team an SOP's build
    # returns is sopbus.sops.Team, which was sopbus.Team before (a decision, see
    # tests/api/test_team.py: the old call still makes it, with a warning).
    from sopbus._team import Team as PythonTeam

    assert sopbus.Team is PythonTeam and sopbus.Team is not sops.Team
    assert sopbus.read_events is bus.read_events
    # The scenario's [llm] table is another thing, with another name.
    assert bus.LLMConfig is not roles.LLMSettings and not hasattr(bus, "LLMSettings")


def test_every_error_a_user_can_meet_derives_from_one_base() -> None:
    from sopbus.bus.scenario._typespec import TypeSpecError
    from sopbus.roles.book._board import BoardError
    from sopbus.roles.book._tools import ToolError

    errors = [
        getattr(sopbus, n)
        for n in PUBLIC
        if n.endswith(("Error", "Exhausted", "Overrun", "Unavailable", "Died", "StopRun"))
    ]
    assert len(errors) == 10
    for error in [*errors, TypeSpecError, BoardError, ToolError]:
        assert issubclass(error, sopbus.SopbusError), error


def test_import_sopbus_loads_nothing_heavy() -> None:
    code = (
        "import sys, sopbus\n"
        "print(sorted(m for m in ('trio', 'openai', 'pydantic', 'rich', 'loguru') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_there_is_one_helper_of_each_kind() -> None:
    """One ``closest``, one exception-group walker, one redaction (docs/design/style.md: one helper per
    job): the copies that were are gone."""
    import sopbus.bus._run as run
    import sopbus.bus.nats._host as host
    import sopbus.roles._registry as registry
    import sopbus.roles.company._util as util

    assert not hasattr(registry, "closest") or registry.closest is sopbus.bus.closest
    for module in (run, host, util):
        assert not hasattr(module, "_leaves")
    assert sopbus.bus._run.exception_leaves is sopbus.bus._errors.exception_leaves
