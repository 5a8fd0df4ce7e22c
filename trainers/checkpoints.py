"""Kept for one release: finding the checkpoint to resume from moved to `trainers.loop.checkpoints`."""
from trainers.loop.checkpoints import (  # noqa: F401
    _INDEX,
    adopt_checkpoint,
    checkpoint_candidates,
    restore_newest,
    run_relative,
)
