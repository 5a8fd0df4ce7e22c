"""User-facing errors raised by the trainer.

The CLI prints ``str(error)`` as one line and exits 1; no traceback unless --debug. Every
message names what is wrong and where (a file, a YAML path, a behavior), so the user can fix
it without reading our code.
"""


class TrainerError(Exception):
    """A problem the user can fix: a bad config, a missing checkpoint, a bad demo."""


class ConfigError(TrainerError):
    """The trainer configuration (YAML file or command line) is missing or invalid.

    The message is one line: ``<file>: <yaml.path>: <what was expected>``.
    """


class CheckpointError(TrainerError):
    """A checkpoint or the run's training status is missing, corrupt or incompatible."""


class ClusterError(TrainerError):
    """A cluster run cannot go on: a worker did not answer, a device does not exist."""


class WorkerLostError(ClusterError):
    """A cluster worker stopped answering mid-run (the controller saves a checkpoint first)."""
