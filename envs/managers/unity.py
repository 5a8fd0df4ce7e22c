"""N Unity games on N ports as one `EnvManager`; the options that configure them are in
`envs.unity.options`.

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
from typing import List, Mapping, Optional, Sequence

from envs.base_env import ActionTuple, BaseEnv, all_steps
from envs.exceptions import EnvError, EnvWorkerError
from envs.managers.base import EnvStep, check_actions, common_specs, resolve_seed
from envs.managers.in_process import InProcessEnvManager
from envs.unity.environment import DEFAULT_BASE_PORT, DEFAULT_EDITOR_PORT, UnityEnv
from envs.unity.options import UnityOptions, unity_args

__all__ = ["UnityEnvManager"]


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
        self._specs = common_specs(self._env_id, [dict(e.behavior_specs) for e in self._envs])

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
        check_actions(actions, len(self._envs), self._specs)
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
