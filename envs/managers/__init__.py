"""Env managers: step ``num_envs`` copies of an environment for the trainer.

The trainer sees a list of workers. Worker ``i`` runs ``make_env(env_id, env_args,
seed + i, agents_per_env)``; ``seed == -1`` draws one random base seed in the manager
(`EnvManager.seed` tells which). Every call returns one `EnvStep` per worker, in worker
order, holding ``behavior name -> (DecisionSteps, TerminalSteps)``.

* `InProcessEnvManager` steps its envs one after another in this process (the default for
  ``num_envs == 1``).
* `SubprocessEnvManager` runs one worker process per env, stepped in parallel; its module
  explains the protocol (shared memory, spin-then-block waits, lockstep and out of
  lockstep, failures, stopping, the workers' lifetime).
* `envs.managers.unity.UnityEnvManager` steps Unity games (builds or the Editor).

Modules: `base` (the `EnvManager` API, `EnvStep`, the helpers the managers share),
`in_process`, `subprocess` (the parent's side of the worker processes), `_worker` (the
worker's side), `_wire` (what crosses between them: packing, the shared-memory layout,
framing). `make_env_manager`, here, is the only code that knows every manager.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Optional

from envs.exceptions import EnvError
from envs.managers.base import EnvManager, EnvStep, _check_counts, _check_timeout
from envs.managers.in_process import InProcessEnvManager
from envs.managers.subprocess import DEFAULT_STEP_TIMEOUT_S, SubprocessEnvManager
from envs.registry import parse_env_id

__all__ = [
    "DEFAULT_STEP_TIMEOUT_S",
    "EnvManager",
    "EnvStep",
    "InProcessEnvManager",
    "SubprocessEnvManager",
    "make_env_manager",
]


def make_env_manager(
    env_id: Optional[str],
    env_args: Optional[Mapping[str, Any]],
    num_envs: int,
    agents_per_env: int,
    seed: int,
    unity: Optional[Any] = None,
    step_timeout: Optional[float] = None,
    env_parameters: Optional[Mapping[str, Any]] = None,
) -> EnvManager:
    """The manager for ``env_settings``: in-process for one env, else one process per env;
    Unity games (a build path, or None for the Editor) in a `envs.managers.unity.UnityEnvManager`.

    Args:
        env_id: ``builtin:<Name>`` or ``gym:<id>``.
        env_args: kwargs of the env.
        num_envs: number of envs (``--num-envs``).
        agents_per_env: agents per behavior in each env.
        seed: env i uses ``seed + i``; -1 draws a random base seed once.
        unity: `envs.unity.options.UnityOptions` for Unity games (None: defaults).
        step_timeout: seconds every env has to answer a reset or a step, for every env
            kind (``env_settings.timeout_wait`` / ``--timeout-wait``); None: the default
            (`DEFAULT_STEP_TIMEOUT_S` for worker processes, ``unity.timeout_wait`` for
            Unity games). Worker processes that do not answer in time are killed and
            reported; for Unity games it replaces ``unity.timeout_wait``. One env stepped in
            this process (``num_envs == 1``) cannot be timed out: it runs in the caller's
            own thread (see `EnvManager.set_stop_check`).
        env_parameters: environment parameters (name -> `envs.parameters.ParameterValue`)
            every env starts with (Unity games: sent with their first reset, replacing
            ``unity.env_parameters``); later ones go through `EnvManager.set_env_parameters`.
    """
    _check_counts(num_envs, agents_per_env)
    step_timeout = _check_timeout("env_settings.timeout_wait", step_timeout)
    if env_id is None or parse_env_id(env_id)[0] == "unity":
        # Imported here for its cost, not to dodge a cycle (`envs.managers.unity` imports
        # only this package's base modules and `envs.unity`): gRPC and protobuf, ~0.12 s,
        # which only Unity runs pay for (every env worker imports this package).
        from envs.managers.unity import UnityEnvManager
        from envs.unity.options import UnityOptions, unity_args

        if int(agents_per_env) != 1:
            raise EnvError("env_settings.agents_per_env: a Unity game decides its own agents; leave it at 1")
        extra = unity_args(env_args)
        if unity is None:
            unity = UnityOptions()
        if extra:
            unity = dataclasses.replace(unity, additional_args=tuple(unity.additional_args) + extra)
        if step_timeout is not None:
            unity = dataclasses.replace(unity, timeout_wait=step_timeout)
        if env_parameters:
            unity = dataclasses.replace(unity, env_parameters=dict(env_parameters))
        return UnityEnvManager(env_id, int(num_envs), seed, unity)
    if int(num_envs) == 1:
        return InProcessEnvManager(env_id, env_args, 1, agents_per_env, seed, env_parameters=env_parameters)
    return SubprocessEnvManager(
        env_id, env_args, num_envs, agents_per_env, seed,
        step_timeout=DEFAULT_STEP_TIMEOUT_S if step_timeout is None else step_timeout,
        env_parameters=env_parameters,
    )
