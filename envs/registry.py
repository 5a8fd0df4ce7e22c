"""Env ids -> environments: ``builtin:<Name>``, ``gym:<id>``, or a Unity build path.

`make_env` is what the env managers (and their worker processes) call. Every mistake a
user can make in ``env_settings`` (unknown id, unknown Gymnasium id, a bad ``env_args``
key, a Unity build path) is an `EnvError` with a one-line message.

Gymnasium is imported only for ``gym:`` ids, so built-in env workers start fast.
"""
from __future__ import annotations

import difflib
import inspect
import json
import os
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Type

import numpy as np

from envs.base_env import BaseEnv
from envs.builtin import Chain, CrashEnv, LookAlike, Memory, Paddles, Simple
from envs.builtin.rendezvous import Rendezvous
from envs.builtin.sorter import Sorter
from envs.exceptions import EnvError

BUILTIN_PREFIX = "builtin:"
GYM_PREFIX = "gym:"
UNITY_SUFFIXES = (".x86_64", ".x86", ".exe", ".app")

#: Public built-in envs, name -> class (``builtin:<name>``).
BUILTIN_ENVS: Dict[str, Type[BaseEnv]] = {
    "Simple": Simple,
    "Memory": Memory,
    "Chain": Chain,
    "LookAlike": LookAlike,
    "Paddles": Paddles,
    "Rendezvous": Rendezvous,
    "Sorter": Sorter,
}

#: Built-in envs for tests only: accepted by `make_env`, never listed.
_HIDDEN_ENVS: Dict[str, Type[BaseEnv]] = {"_Crash": CrashEnv}


def _forms() -> str:
    return "use builtin:<Name> (" + ", ".join(BUILTIN_ENVS) + ") or gym:<Gymnasium id>, e.g. gym:CartPole-v1"


def is_unity_path(env_id: str) -> bool:
    """True when ``env_id`` looks like a Unity build (a path, or a file on disk)."""
    return (
        "/" in env_id
        or "\\" in env_id
        or env_id.lower().endswith(UNITY_SUFFIXES)
        or os.path.exists(env_id)
        or any(os.path.exists(env_id + suffix) for suffix in UNITY_SUFFIXES)  # --env=3DBall, as ML-Agents
    )


def builtin_kwargs(name: str) -> List[str]:
    """The ``env_args`` keys accepted by built-in env ``name`` (``seed`` excluded)."""
    cls = BUILTIN_ENVS.get(name) or _HIDDEN_ENVS[name]
    params = inspect.signature(cls.__init__).parameters
    return [p for p in params if p not in ("self", "seed") and params[p].kind is not inspect.Parameter.VAR_KEYWORD]


def parse_env_id(env_id: str) -> Tuple[str, str]:
    """``(kind, name)`` with kind ``"builtin"``, ``"gym"`` or ``"unity"``; `EnvError` otherwise.

    Checks only the form (and that a built-in name exists); does not import Gymnasium.
    """
    if not isinstance(env_id, str) or not env_id.strip():
        raise EnvError(f"no environment given (env id {env_id!r}); {_forms()}")
    env_id = env_id.strip()
    if env_id.startswith(BUILTIN_PREFIX):
        name = env_id[len(BUILTIN_PREFIX):]
        if name not in BUILTIN_ENVS and name not in _HIDDEN_ENVS:
            close = difflib.get_close_matches(name, list(BUILTIN_ENVS), n=1)
            did_you_mean = f" (did you mean builtin:{close[0]}?)" if close else ""
            raise EnvError(
                f"unknown built-in environment {env_id!r}{did_you_mean}; built-in names: {', '.join(BUILTIN_ENVS)}"
            )
        return "builtin", name
    if env_id.startswith(GYM_PREFIX):
        name = env_id[len(GYM_PREFIX):]
        if not name:
            raise EnvError(f"{env_id!r} names no Gymnasium id; e.g. gym:CartPole-v1")
        module, colon, gym_name = name.partition(":")
        if colon and (not module or not gym_name or ":" in gym_name):
            raise EnvError(f"{env_id!r}: expected gym:<id> or gym:<module>:<id>, e.g. gym:CartPole-v1")
        return "gym", name
    if is_unity_path(env_id):
        return "unity", env_id
    hint = f" (did you mean builtin:{env_id}?)" if env_id in BUILTIN_ENVS else ""
    if not hint and "-v" in env_id:
        hint = f" (did you mean gym:{env_id}?)"
    raise EnvError(f"unknown environment id {env_id!r}{hint}; {_forms()}")


def _check_builtin_args(name: str, env_args: Mapping[str, Any]) -> None:
    cls = BUILTIN_ENVS.get(name) or _HIDDEN_ENVS[name]
    params = inspect.signature(cls.__init__).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return  # hidden test envs forward extra kwargs
    accepted = builtin_kwargs(name)
    for key in env_args:
        if key not in accepted:
            close = difflib.get_close_matches(str(key), accepted, n=1)
            did_you_mean = f"; did you mean {close[0]}?" if close else ""
            reason = "is set by env_settings.seed" if key == "seed" else "is not accepted"
            raise EnvError(
                f"builtin:{name}: env_args key {key!r} {reason}{did_you_mean} (accepted: {', '.join(accepted)})"
            )


def _check_builtin_parameters(name: str, env_parameters: Mapping[str, Any]) -> None:
    """`EnvError` for environment parameters built-in env ``name`` does not take (its
    ``ENV_PARAMETERS``) or values out of their range. An env whose parameters depend on its
    env_args (`LookAlike`) checks them itself when it is built."""
    cls = BUILTIN_ENVS.get(name) or _HIDDEN_ENVS[name]
    check = getattr(cls, "check_env_parameters", None)
    if check is not None:
        check(env_parameters)


def validate_env(
    env_id: str, env_args: Optional[Mapping[str, Any]] = None, env_parameters: Optional[Mapping[str, Any]] = None
) -> None:
    """Raise the `EnvError` that `make_env` would raise for the id form, builtin kwargs or
    environment parameters (names the env does not take, values out of their range).

    Cheap (builds nothing); env managers call it before starting worker processes. With
    environment parameters for a ``gym:`` id it imports Gymnasium to read the env's
    constructor.
    """
    kind, name = parse_env_id(env_id)
    if env_args is not None and not isinstance(env_args, Mapping):
        raise EnvError(f"env_args must be a mapping of keyword arguments, got {type(env_args).__name__}")
    if kind == "builtin":
        _check_builtin_args(name, env_args or {})
        if env_parameters:
            _check_builtin_parameters(name, env_parameters)
    if kind == "gym" and env_parameters:
        from envs.gym import check_gym_parameters

        check_gym_parameters(name, env_parameters, env_args or {})
    if kind == "unity":
        from envs.unity.environment import find_executable

        find_executable(name)  # "Unity build ... not found" before anything starts


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def make_env(
    env_id: str,
    env_args: Optional[Mapping[str, Any]],
    seed: int,
    agents_per_env: int = 1,
    env_parameters: Optional[Mapping[str, Any]] = None,
) -> BaseEnv:
    """Build the environment named by ``env_id``.

    Args:
        env_id: ``builtin:<Name>``, ``gym:<Gymnasium id>`` or a Unity build path (one game on
            port 5005; `envs.managers.make_env_manager` runs several on their own ports).
        env_args: keyword arguments of the built-in env, or of ``gymnasium.make``.
        seed: the env's seed (>= 0).
        agents_per_env: agents of each behavior: Gymnasium copies, or the built-in env's
            ``num_agents`` when > 1.
        env_parameters: environment parameters (name -> `envs.parameters.ParameterValue`)
            the env starts with (`BaseEnv.set_env_parameters`).

    Returns:
        The env, not yet reset.
    """
    validate_env(env_id, env_args, env_parameters)
    kind, name = parse_env_id(env_id)
    args: Dict[str, Any] = dict(env_args or {})
    if not _is_int(agents_per_env) or agents_per_env < 1:
        raise EnvError(f"{env_id}: agents_per_env must be an integer >= 1, got {agents_per_env!r}")
    if not _is_int(seed) or seed < 0:
        raise EnvError(f"{env_id}: seed must be an integer >= 0, got {seed!r}")
    agents_per_env, seed = int(agents_per_env), int(seed)
    if kind == "unity":
        from envs.unity.environment import UnityEnv
        from envs.unity.options import unity_args

        return UnityEnv(name, worker_id=0, seed=seed, additional_args=unity_args(env_args),
                        env_parameters=env_parameters)
    if kind == "builtin":
        cls = BUILTIN_ENVS.get(name) or _HIDDEN_ENVS[name]
        if agents_per_env > 1:
            if "num_agents" in args and args["num_agents"] != agents_per_env:
                raise EnvError(
                    f"{env_id}: env_args.num_agents={args['num_agents']!r} disagrees with "
                    f"agents_per_env={agents_per_env}; set only one"
                )
            args["num_agents"] = agents_per_env
        factory: Callable[..., BaseEnv] = cls  # every built-in env takes seed= and its env_args
        env = factory(seed=seed, **args)
        if env_parameters:
            env.set_env_parameters(env_parameters)  # before the first reset: every episode has them
        return env
    from envs.gym import GymEnv  # imports gymnasium; only gym workers pay for it

    return GymEnv(name, agents_per_env=agents_per_env, seed=seed, env_parameters=env_parameters, **args)


def _yaml(value: Any) -> str:
    """A default value as it would be written in the YAML config."""
    if isinstance(value, (tuple, list, bool)) or value is None:
        return json.dumps(list(value) if isinstance(value, tuple) else value)
    return repr(value)


def describe_env_ids() -> str:
    """Help text on env ids and built-in env kwargs (for the CLI and README)."""
    lines = [
        "Environment ids (env_settings.env_path, kwargs in env_settings.env_args):",
        "  builtin:<Name>   a built-in test environment; env_args are its kwargs",
        "  gym:<id>         a Gymnasium environment, e.g. gym:CartPole-v1; env_args go to gymnasium.make",
        "                   (gym:<module>:<id> imports <module> first to register the env)",
        "  <path>           a Unity build (ML-Agents 1.0+ package); none at all: the Unity Editor (press Play)",
        "Built-in environments:",
    ]
    for name, cls in BUILTIN_ENVS.items():
        summary = (inspect.getdoc(cls) or "").splitlines()[0]
        params = inspect.signature(cls.__init__).parameters
        args = ", ".join(f"{p}: {_yaml(params[p].default)}" for p in builtin_kwargs(name))
        lines.append(f"  builtin:{name}: {summary}")
        lines.append(f"      env_args: {args}")
        declared = getattr(cls, "ENV_PARAMETERS", None)
        if declared:
            taken = ", ".join(f"{p} [{low:g}, {high:g}]" for p, (low, high, _) in declared.items())
            lines.append(f"      environment_parameters: {taken}")
    lines.append("  max_episode_steps: 0 = no time limit; Chain's null = 2 x length. "
                 "env_settings.seed seeds env i with seed + i.")
    return "\n".join(lines)
