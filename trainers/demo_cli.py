"""Kept for one release: the ``trainer-demo`` front-end is `trainers.cli.demo`."""
from trainers.cli.demo import *  # noqa: F401,F403
from trainers.cli.demo import main  # noqa: F401
