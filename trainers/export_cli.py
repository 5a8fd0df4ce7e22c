"""Kept for one release: the ``trainer-export`` front-end is `trainers.cli.export`."""
from trainers.cli.export import *  # noqa: F401,F403
from trainers.cli.export import latest_checkpoints, main, restore_policy, run  # noqa: F401
