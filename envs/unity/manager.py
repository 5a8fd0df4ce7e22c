"""N Unity games on N ports as one `EnvManager`, and the options that configure them.

Worker ``i`` is a `UnityEnv` on ``base_port + i`` (a build it launches, or the Editor for
one worker without a path). The games are separate processes, so one manager in the
trainer's process steps them in parallel: `step()` answers every game's pending call
before it waits for any answer. The games start in parallel too. With
``engine_settings.no_graphics_monitor`` worker 0 renders and the others start headless
(``-nographics -batchmode``), as ML-Agents' ``UnityEnvironment`` does.

A game that disconnects, exits or stops answering makes the manager close every game and
raise `EnvWorkerError` (one line naming the build and port); the controller checkpoints
before reporting it. Every launched build is killed on close, on garbage collection and
at interpreter exit (``weakref.finalize`` in `UnityEnv`).

Stats the games record (StatsRecorder) come back on ``EnvStep.env_stats``.
"""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from envs.base_env import ActionTuple, BaseEnv, all_steps
from envs.env_manager import EnvStep, InProcessEnvManager, _check_actions, _common_specs, resolve_seed
from envs.exceptions import EnvError, EnvWorkerError
from envs.unity.environment import DEFAULT_BASE_PORT, DEFAULT_EDITOR_PORT, EngineConfig, UnityEnv

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
    env_parameters: Mapping[str, float] = field(default_factory=dict)
    """Float environment parameters sent before the first reset."""
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


class UnityEnvManager(InProcessEnvManager):
    """Steps ``num_envs`` Unity games at once (see the module docstring).

    An `InProcessEnvManager` over `UnityEnv` objects (same properties, error handling and
    close); only the start and the step differ: both run the games in parallel.
    """

    def __init__(self, env_path: Optional[str], num_envs: int = 1, seed: int = 0,
                 options: Optional[UnityOptions] = None) -> None:
        """
        Args:
            env_path: the build; None = the Unity Editor (one env).
            num_envs: games, on ports ``base_port .. base_port + num_envs - 1``.
            seed: game i gets ``seed + i``; -1 draws one.
            options: ports, timeouts, engine settings, extra arguments.
        """
        options = options or UnityOptions()
        if env_path is None and num_envs != 1:
            raise EnvError(f"num_envs {num_envs}: the Unity Editor is one environment; give a build path for more")
        self._env_id = env_path or "Unity Editor"
        self._seed = resolve_seed(seed, int(num_envs))
        self._envs: List[BaseEnv] = []
        self._closed = False
        self._error: Optional[EnvWorkerError] = None
        base_port = options.base_port
        if base_port is None:
            base_port = DEFAULT_BASE_PORT if env_path else DEFAULT_EDITOR_PORT

        abort = threading.Event()

        def start(i: int) -> UnityEnv:
            return UnityEnv(
                env_path, worker_id=i, base_port=base_port, seed=self._seed + i,
                timeout_wait=options.timeout_wait, engine=options.engine,
                env_parameters=options.env_parameters, additional_args=options.additional_args,
                log_folder=options.log_folder, host=options.host, num_areas=options.num_areas, abort=abort,
            )

        pool = ThreadPoolExecutor(max_workers=int(num_envs))
        futures = [pool.submit(start, i) for i in range(int(num_envs))]
        errors = []
        try:
            for f in futures:
                try:
                    self._envs.append(f.result())
                except Exception as e:
                    errors.append(e)
        except BaseException:
            # Ctrl-C while the games start or the Editor's Play is awaited: every start
            # gives up within 0.25 s instead of waiting out its timeout.
            abort.set()
            pool.shutdown(wait=True)
            for f in futures:
                if f.exception() is None and f.result() not in self._envs:
                    self._envs.append(f.result())
            self.close()
            raise
        pool.shutdown(wait=True)
        if errors:
            self.close()
            raise errors[0]
        self._specs = _common_specs(self._env_id, [dict(e.behavior_specs) for e in self._envs])

    def _unity(self) -> List[UnityEnv]:
        return self._envs  # type: ignore[return-value]

    def _with_stats(self, steps: List[EnvStep]) -> List[EnvStep]:
        for env_step, env in zip(steps, self._unity()):
            env_step.env_stats = env.drain_stats()
        return steps

    def reset(self) -> List[EnvStep]:
        return self._with_stats(super().reset())

    def step(self, actions: Sequence[Mapping[str, ActionTuple]]) -> List[EnvStep]:
        self._check_open()
        _check_actions(actions, len(self._envs), self._specs)
        envs = self._unity()
        i = 0
        try:
            for i, (env, mapping) in enumerate(zip(envs, actions)):  # every game starts its step ...
                for name, action in mapping.items():
                    env.set_actions(name, action)
                env.send(env.step_input())
            for i, env in enumerate(envs):  # ... before we wait for any
                env.receive_into(env.receive_output())
        except Exception as e:
            raise self._worker_error(i, e) from None
        return self._with_stats([EnvStep(i, all_steps(env)) for i, env in enumerate(envs)])
