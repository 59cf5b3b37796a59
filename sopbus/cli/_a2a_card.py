"""The Agent Card of ``sopbus a2a serve``: what a scenario's team is, in A2A's words.

The card's name and description are the scenario's; its skills are the team's roles, one
each (what the role is, what it watches and what it does), so a caller sees the pipeline
it is about to start. The agent takes text (the idea) and gives text (status lines, the
run's files as artifacts); it streams; it states the bearer scheme when the server has a
token.
"""

from __future__ import annotations

import re
from typing import Any

from sopbus.bus import Scenario

BEARER = "bearer"
"""The name of the card's one security scheme, when the server has a token."""


def agent_card(scenario: Scenario, team: Any, url: str, *, token: bool, version: str) -> Any:
    """The :class:`a2a.types.AgentCard` of ``scenario`` (its ``team`` built) served at ``url``."""
    from a2a.types import (
        AgentCapabilities,
        AgentCard,
        AgentInterface,
        HTTPAuthSecurityScheme,
        SecurityRequirement,
        SecurityScheme,
        StringList,
    )
    from a2a.utils.constants import PROTOCOL_VERSION_CURRENT, TransportProtocol

    card = AgentCard(
        name=scenario.name,
        description=scenario.info.description or f"the sopbus scenario {scenario.name}",
        version=version,
        supported_interfaces=[
            AgentInterface(
                url=url,
                protocol_binding=TransportProtocol.JSONRPC.value,
                protocol_version=PROTOCOL_VERSION_CURRENT,
            )
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[_skill(role) for role in team.roles],
    )
    if token:
        card.security_schemes[BEARER].CopyFrom(
            SecurityScheme(
                http_auth_security_scheme=HTTPAuthSecurityScheme(
                    scheme="Bearer", description="the token of the server's --token-file"
                )
            )
        )
        card.security_requirements.append(SecurityRequirement(schemes={BEARER: StringList()}))
    return card


def _skill(role: Any) -> Any:
    from a2a.types import AgentSkill

    actions = [action.name for action in role.actions]
    watches = ", ".join(sorted(role.watch)) or "nothing"
    who = role.profile or role.name
    goal = f": {role.goal}" if role.goal else ""
    return AgentSkill(
        id=re.sub(r"[^a-z0-9]+", "-", role.name.lower()).strip("-") or "role",
        name=f"{role.name} ({who})" if role.profile else role.name,
        description=f"{who}{goal}. Watches {watches}; does {', '.join(actions) or 'nothing'}.",
        tags=actions,
        input_modes=["text/plain"],
        output_modes=["text/plain"],
    )
