"""Kept for one release: threaded updates moved to `trainers.loop.threaded`."""
from trainers.loop.threaded import (  # noqa: F401
    SWITCH_INTERVAL_S,
    BackgroundUpdater,
    _running,
    _update_finished,
    _update_started,
)
