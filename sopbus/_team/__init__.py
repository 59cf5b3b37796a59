"""Teams in plain Python: :class:`Team` declares roles and run settings in code, and runs
them as the scenario file with the same content (``Team.to_toml()`` writes that file)."""

from ._team import Team as Team

__all__ = [
    "Team",
]
