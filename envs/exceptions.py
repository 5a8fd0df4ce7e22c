"""User-facing errors raised by the environment layer.

The CLI prints ``str(error)`` as one line and exits non-zero; no traceback unless --debug.
"""


class EnvError(Exception):
    """A problem the user can fix: unknown env id, bad env argument, a worker that died."""


class EnvWorkerError(EnvError):
    """An environment worker raised or died; the message names the env and the worker."""


class DemoError(EnvError):
    """A .demo file is missing, empty, truncated, corrupt, or does not match the behavior."""
