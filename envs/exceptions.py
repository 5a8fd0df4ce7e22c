"""User-facing errors raised by the environment layer.

The CLI prints ``str(error)`` as one line and exits non-zero; no traceback unless --debug.
"""


class EnvError(Exception):
    """A problem the user can fix: unknown env id, bad env argument, a worker that died."""


class EnvWorkerError(EnvError):
    """An environment worker raised or died; the message names the env and the worker."""


class DemoError(EnvError):
    """A .demo file is missing, empty, truncated, corrupt, or does not match the behavior."""


class EnvInterrupted(Exception):
    """An env manager stopped waiting for its workers because a stop was requested.

    Raised by `envs.managers.SubprocessEnvManager` while it waits for workers (and by
    any manager that honours `EnvManager.set_stop_check`) once the stop check it was given
    returns True: the training loop's SIGINT/SIGTERM handler only sets a flag, and a worker
    whose step hangs would otherwise keep the loop from ever seeing it. Not an `EnvError`:
    nothing is wrong with the environment, the run is being stopped. The manager is
    unusable afterwards (every call raises this again); ``close()`` it.
    """
