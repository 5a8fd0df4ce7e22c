"""Kept for one release: trajectory assembly moved to `trainers.loop.trajectory`."""
from trainers.loop.trajectory import (  # noqa: F401
    AgentKey,
    AgentProcessor,
    EpisodeEnd,
    Trajectory,
    _AgentRecord,
)
