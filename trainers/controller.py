"""Kept for one release: the training loop moved to `trainers.loop.controller`."""
from trainers.loop.controller import (  # noqa: F401
    _ENV_STAT_AGGREGATION,
    BehaviorState,
    CheckpointHook,
    Timers,
    TrainerController,
    _Acted,
)
