"""Kept for one release: the run directory's checks and lock moved to `trainers.loop.run_dir`."""
from trainers.loop.run_dir import (  # noqa: F401
    MAX_NAME_BYTES,
    RunLock,
    check_results_dir,
    check_run_id,
    clear_run,
)
