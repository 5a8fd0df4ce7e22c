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


class RunLockedError(TrainerError):
    """Another trainer-learn process is training (or playing) the same run id."""


#: Lines TensorFlow puts around the reason of an ``OpError``: "Graph execution error:",
#: the Python stack of the op's definition and the node name, none of which a user can act on.
_OP_ERROR_NOISE = ("Graph execution error", "Detected at node", "Node:", "File ", "[[", "Traceback")


def op_error_reason(exc: BaseException) -> str:
    """The line of a TensorFlow error that says what went wrong (``Data loss: not an
    sstable``), not the ``Graph execution error:`` header TensorFlow puts first."""
    text = str(getattr(exc, "message", None) or exc)
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(_OP_ERROR_NOISE):
            return line
    return type(exc).__name__


def os_error_line(exc: OSError) -> str:
    """One line for a file-system error the user can fix (a read-only or missing folder, a
    full disk, a name too long): the path and the system's reason."""
    reason = exc.strerror or type(exc).__name__
    path = exc.filename if exc.filename is not None else None
    return f"{path}: {reason}" if path is not None else f"{reason} ({exc})"


#: Longest rendering of one value or key in an error or warning line. A value pasted by
#: mistake (a 4 KB error line in the CLI attack round) is cut to this many characters and
#: an ellipsis, with its length, so every message stays one readable line.
SHOWN_CHARS = 80


def shorten(text: str) -> str:
    """``text``, or its first `SHOWN_CHARS` characters and an ellipsis when it is longer."""
    if len(text) <= SHOWN_CHARS:
        return text
    return f"{text[: SHOWN_CHARS - 3]}... ({len(text)} characters)"
