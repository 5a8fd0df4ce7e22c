"""Moved to `envs.managers` (`base`, `in_process`, `subprocess`, `_worker`, `_wire`).

This module re-exports, for one release, every name that code, tests or scripts imported
from it; import from `envs.managers` instead. Patch a name where it is used (e.g.
``envs.managers.subprocess.SharedMemory``), not here.
"""
from envs.managers import make_env_manager
from envs.managers._wire import SPIN_S, _pack_actions, _pack_steps, _unpack_actions, _unpack_steps, _Waiter
from envs.managers._worker import PARENT_EXIT_GRACE_S
from envs.managers.base import (
    MAX_AGENTS_PER_ENV,
    MAX_NUM_ENVS,
    STOP_POLL_S,
    EnvManager,
    EnvStep,
    StepDict,
    check_actions,
    common_specs,
    resolve_seed,
)
from envs.managers.in_process import InProcessEnvManager
from envs.managers.subprocess import DEFAULT_STEP_TIMEOUT_S, SubprocessEnvManager

# The old private names of the helpers `envs.unity.manager` builds on.
_check_actions = check_actions
_common_specs = common_specs

__all__ = [
    "DEFAULT_STEP_TIMEOUT_S",
    "MAX_AGENTS_PER_ENV",
    "MAX_NUM_ENVS",
    "PARENT_EXIT_GRACE_S",
    "SPIN_S",
    "STOP_POLL_S",
    "EnvManager",
    "EnvStep",
    "InProcessEnvManager",
    "StepDict",
    "SubprocessEnvManager",
    "check_actions",
    "common_specs",
    "make_env_manager",
    "resolve_seed",
    # private names that tests import
    "_Waiter",
    "_check_actions",
    "_common_specs",
    "_pack_actions",
    "_pack_steps",
    "_unpack_actions",
    "_unpack_steps",
]
