"""trainer-learn: a TensorFlow-1-style static-graph PPO/SAC trainer for ML-Agents users."""

import os
import sys

__version__ = "0.1.0"

#: Set to 1 to see TensorFlow's own C++ log lines (its start-up notices, device probing)
#: as TensorFlow prints them. ``--debug`` sets it (`show_tensorflow_logs`); a user may set
#: it in the environment too. It is inherited by every process we start (env workers,
#: cluster workers), so they follow the same choice.
TF_LOGS_ENV = "TRAINER_LEARN_TF_LOGS"


def tensorflow_logs_shown() -> bool:
    """Whether TensorFlow's own log lines are to be shown (`TF_LOGS_ENV` set, not 0)."""
    return os.environ.get(TF_LOGS_ENV, "").strip() not in ("", "0")


# Before anything imports TensorFlow (this package is imported before any of its modules,
# and its worker processes import it too): its C++ logs at INFO and WARNING level are
# start-up notices, not our users' business. A level the user set is theirs. The lines
# TensorFlow's libraries print while they load, before this level is read, are filtered
# where TensorFlow is imported (`trainers.tf`).
_LEVEL_SET_HERE = False
if not tensorflow_logs_shown() and "TF_CPP_MIN_LOG_LEVEL" not in os.environ:
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
    _LEVEL_SET_HERE = True


def show_tensorflow_logs() -> None:
    """From now on, TensorFlow's own log lines are shown as TensorFlow prints them, in this
    process and in those it starts (``--debug``). The CLIs call it before anything imports
    TensorFlow; once it is imported (a CLI's ``main`` called in a test process), TensorFlow
    has read its level and this does nothing, rather than change the environment of what
    the process starts later."""
    global _LEVEL_SET_HERE
    if "tensorflow" in sys.modules:
        return
    os.environ[TF_LOGS_ENV] = "1"
    if _LEVEL_SET_HERE and os.environ.get("TF_CPP_MIN_LOG_LEVEL") == "2":
        del os.environ["TF_CPP_MIN_LOG_LEVEL"]
    _LEVEL_SET_HERE = False
