"""`InProcessEnvManager`: steps its envs one after another in this process (the default for
``num_envs == 1``)."""
from __future__ import annotations

import traceback
from typing import Any, Dict, List, Mapping, Optional, Sequence

from envs.base_env import ActionTuple, BaseEnv, BehaviorSpec, all_steps
from envs.exceptions import EnvError, EnvWorkerError
from envs.managers.base import (
    EnvManager,
    EnvStep,
    _check_counts,
    _env_error_line,
    _one_line,
    _signals_deferred,
    check_actions,
    common_specs,
    resolve_seed,
)
from envs.registry import make_env, validate_env


class InProcessEnvManager(EnvManager):
    """Steps its envs one after another in this process."""

    def __init__(
        self,
        env_id: str,
        env_args: Optional[Mapping[str, Any]] = None,
        num_envs: int = 1,
        agents_per_env: int = 1,
        seed: int = 0,
        env_parameters: Optional[Mapping[str, Any]] = None,
    ) -> None:
        """
        Args:
            env_id: ``builtin:<Name>`` or ``gym:<id>`` (see `envs.registry`).
            env_args: kwargs of the env.
            num_envs: number of envs, stepped in sequence.
            agents_per_env: agents per behavior in each env.
            seed: env i uses ``seed + i``; -1 draws a random base seed.
            env_parameters: environment parameters every env starts with.
        """
        _check_counts(num_envs, agents_per_env)
        validate_env(env_id, env_args, env_parameters)
        self._env_id = env_id
        self._seed = resolve_seed(seed, int(num_envs))
        self._envs: List[BaseEnv] = []
        self._closed = False
        self._error: Optional[EnvWorkerError] = None
        try:
            for i in range(int(num_envs)):
                self._envs.append(make_env(env_id, env_args, self._seed + i, int(agents_per_env), env_parameters))
        except BaseException:
            self.close()
            raise
        self._specs = common_specs(env_id, [dict(e.behavior_specs) for e in self._envs])

    @classmethod
    def from_envs(cls, envs: Sequence[BaseEnv], env_id: str = "custom", seed: int = 0) -> "InProcessEnvManager":
        """A manager over envs built elsewhere (tests, custom envs). Takes ownership."""
        if not envs:
            raise ValueError("from_envs() needs at least one env")
        self = cls.__new__(cls)
        self._env_id = env_id
        self._seed = int(seed)
        self._envs = list(envs)
        self._closed = False
        self._error = None
        self._specs = common_specs(env_id, [dict(e.behavior_specs) for e in self._envs])
        return self

    @property
    def behavior_specs(self) -> Dict[str, BehaviorSpec]:
        return self._specs

    @property
    def num_workers(self) -> int:
        return len(self._envs)

    @property
    def seed(self) -> int:
        return self._seed

    @property
    def envs(self) -> Sequence[BaseEnv]:
        """The envs (e.g. for a built-in env's ``expert_action``)."""
        return tuple(self._envs)

    def reset(self) -> List[EnvStep]:
        self._check_open()
        out = []
        for i, env in enumerate(self._envs):
            try:
                env.reset()
                out.append(EnvStep(i, all_steps(env)))
            except Exception as e:
                raise self._worker_error(i, e) from e
        return out

    def step(self, actions: Sequence[Mapping[str, ActionTuple]]) -> List[EnvStep]:
        self._check_open()
        check_actions(actions, len(self._envs), self._specs)
        out = []
        for i, env in enumerate(self._envs):
            try:
                for name, action in actions[i].items():
                    env.set_actions(name, action)
                env.step()
                out.append(EnvStep(i, all_steps(env)))
            except Exception as e:
                raise self._worker_error(i, e) from e
        return out

    def set_env_parameters(self, values: Mapping[str, Any]) -> None:
        """Every env's `BaseEnv.set_env_parameters`; an env that refuses them raises its
        `EnvError` as is (the names are the user's, not a failure of the env)."""
        self._check_open()
        for env in self._envs:
            env.set_env_parameters(values)

    def close(self) -> None:
        """Closes every env once; a Ctrl-C meanwhile is delivered after the last one."""
        self._closed = True
        with _signals_deferred(redeliver=True):
            # Envs still open are taken one at a time, so a close() that is cut short
            # (an exception other than a signal) is finished by the next one.
            while self._to_close:
                env = self._to_close.pop(0)
                try:
                    env.close()
                except Exception:  # close every env even if one fails
                    pass

    @property
    def _to_close(self) -> List[BaseEnv]:
        if "_open_envs" not in self.__dict__:
            self._open_envs: List[BaseEnv] = list(self._envs)
        return self._open_envs

    def _worker_error(self, i: int, e: Exception) -> EnvWorkerError:
        """Like a crashed worker process: close every env; later calls raise the same error."""
        if isinstance(e, EnvWorkerError):
            err = e
        else:
            if isinstance(e, EnvError):  # the env's own one-line report (e.g. a NaN observation)
                line = _env_error_line(self._env_id, i, str(e))
            else:
                line = f"env {self._env_id!r} worker {i} raised {type(e).__name__}: {_one_line(str(e))}"
            err = EnvWorkerError(line)
            err.worker_traceback = traceback.format_exc()  # type: ignore[attr-defined]
        self._error = err
        self.close()
        return err

    def _check_open(self) -> None:
        if self._error is not None:
            raise self._error
        if self._closed:
            raise RuntimeError("the env manager is closed")
