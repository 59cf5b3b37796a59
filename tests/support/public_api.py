"""``sopbus``'s public surface: the names a user imports from ``sopbus`` alone, pinned once.

``tests/api/test_public_api.py`` checks the package against it, and
``tests/structure/test_faces.py`` takes it as the ``sopbus`` face's pin. Adding a name here
is a decision; removing one breaks users.
"""

PUBLIC = [
    "OVERRIDES",
    "Action",
    "ActionContext",
    "ActionResult",
    "BudgetExhausted",
    "ConfigError",
    "LLMSettings",
    "Message",
    "ModelOutputError",
    "NatsUnavailable",
    "ProviderError",
    "ProviderOverrun",
    "Role",
    "RunOutcome",
    "RunRecord",
    "RunSummary",
    "SOP",
    "SopContext",
    "SopbusError",
    "StopRun",
    "Team",
    "Tool",
    "ToolServerError",
    "Turn",
    "Verdict",
    "Watch",
    "WorkerDied",
    "evaluate",
    "read_events",
    "run_scenario",
    "run_scenario_async",
    "run_scenario_asyncio",
    "tool",
]
