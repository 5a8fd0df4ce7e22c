"""How to start and talk to Unity games: `UnityOptions`, the ``engine_settings`` keys
(`ENGINE_KEYS`, `engine_config`) and a Unity run's ``env_args`` (`unity_args`).

No env manager here: `envs.registry`, `envs.managers` and the trainer's configuration use
these without importing `envs.managers.unity` (the manager, which needs gRPC).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional, Tuple

from envs.exceptions import EnvError
from envs.unity.environment import EngineConfig

#: engine_settings keys (ML-Agents' names) -> type. `no_graphics` and `no_graphics_monitor`
#: (ML-Agents Release 22, mlagents 1.1.0: written into every configuration.yaml since) are
#: launch flags: all builds headless, or all but worker 0.
ENGINE_KEYS: Dict[str, type] = {
    "width": int,
    "height": int,
    "quality_level": int,
    "time_scale": float,
    "target_frame_rate": int,
    "capture_frame_rate": int,
    "no_graphics": bool,
    "no_graphics_monitor": bool,
}


@dataclass(frozen=True)
class UnityOptions:
    """How to start and talk to Unity games (from env_settings / engine_settings / the CLI)."""

    base_port: Optional[int] = None
    """First port; None: 5005 for builds, 5004 for the Editor (ML-Agents' defaults)."""
    timeout_wait: float = 60.0
    """Seconds for a game to connect, and for each of its answers."""
    engine: EngineConfig = field(default_factory=EngineConfig)
    additional_args: Tuple[str, ...] = ()
    """Extra command-line arguments for every build."""
    log_folder: Optional[str] = None
    """Builds write their player logs here (Player-<i>.log)."""
    env_parameters: Mapping[str, Any] = field(default_factory=dict)
    """Environment parameters (numbers or `envs.parameters.ParameterValue`), sent with the
    first reset (later ones: `EnvManager.set_env_parameters`)."""
    host: str = "localhost"
    """Interface the trainer listens on."""
    num_areas: int = 1
    """Training areas each game instantiates (``env_settings.num_areas``; sent in the handshake)."""


def engine_config(engine_settings: Mapping[str, Any]) -> EngineConfig:
    """``engine_settings`` (ML-Agents' keys) -> `EngineConfig`; `EnvError` names a bad key or value."""
    values: Dict[str, Any] = {}
    for key, value in dict(engine_settings).items():
        if key not in ENGINE_KEYS:
            raise EnvError(f"engine_settings.{key}: unknown key; expected one of {', '.join(ENGINE_KEYS)}")
        kind = ENGINE_KEYS[key]
        if value is None:
            continue
        if kind is bool:
            if not isinstance(value, bool):
                raise EnvError(f"engine_settings.{key}: expected true or false, got {value!r}")
        elif kind is int:
            if isinstance(value, bool) or not (isinstance(value, int) or (isinstance(value, float) and value.is_integer())):
                raise EnvError(f"engine_settings.{key}: expected an integer, got {value!r}")
            value = int(value)
        else:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise EnvError(f"engine_settings.{key}: expected a number, got {value!r}")
            value = float(value)
        values[key] = value
    for key in ("width", "height"):
        if key in values and values[key] <= 0:
            raise EnvError(f"engine_settings.{key}: expected a size > 0, got {values[key]}")
    if "time_scale" in values and values["time_scale"] <= 0:
        raise EnvError(f"engine_settings.time_scale: expected a number > 0, got {values['time_scale']}")
    return EngineConfig(**values)


def unity_args(env_args: Optional[Mapping[str, Any]]) -> Tuple[str, ...]:
    """``env_args`` of a Unity run: ``{"args": [...]}``, extra command-line arguments of the build."""
    if not env_args:
        return ()
    unknown = [k for k in env_args if k != "args"]
    args = env_args.get("args", [])
    if unknown or not isinstance(args, (list, tuple)) or not all(isinstance(a, (str, int, float)) for a in args):
        raise EnvError(
            "env_settings.env_args: for a Unity build, give {args: [list of command-line arguments]} "
            f"(got keys {', '.join(map(str, env_args))})"
        )
    return tuple(str(a) for a in args)
