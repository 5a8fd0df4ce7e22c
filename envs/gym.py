"""Gymnasium adapter: ``agents_per_env`` copies of one Gymnasium env as one behavior.

`GymEnv("CartPole-v1", agents_per_env=16, seed=0)` makes 16 copies with
``gymnasium.make`` and steps them in a loop in this process; copy ``k`` is agent row ``k``
of the behavior named by the Gymnasium id (``"CartPole-v1"``).

Spaces:

* observation ``Box`` of rank 3 (``[H, W, C]``) -> one visual observation; ``uint8``
  images are scaled to [0, 1] float32, other dtypes are passed as float32 unchanged;
  ``Box`` of any other rank -> one vector observation (flattened); ``Discrete(n)`` ->
  a one-hot vector of size n.
* action ``Box`` -> continuous actions (flattened). The trainer's actions in [-1, 1] are
  clipped to [-1, 1] and rescaled linearly to ``[low, high]``; a dimension with an
  infinite bound gets the raw action instead. ``Discrete(n)`` -> one branch of size n;
  ``MultiDiscrete(nvec)`` -> one branch per entry (``start`` offsets are added).
* anything else raises `EnvError`.

Non-finite values: an observation or a reward that is NaN or infinite raises `EnvError`
naming the env, what was non-finite, the agent and whether it came from a reset or a step.
Unchecked, it reached the policy, whose NaN outputs became an invalid action that the env
then rejected (CartPole: ``AssertionError: 2 (<class 'int'>) invalid``): the report blamed
the action instead of the observation. Integer observation spaces cannot hold one and are
not checked; a float batch costs one sum per step unless that sum is not finite.

``gym:<module>:<id>`` imports ``<module>`` first (it registers the id); a module that
cannot be imported is one `EnvError` line naming the module and the id.

Episodes: ``terminated`` -> `TerminalSteps` with ``interrupted=False``; ``truncated``
(and not terminated) -> ``interrupted=True``. The copy is reset at once and the agent comes
back in `DecisionSteps` under a new id with reward 0. The first ``reset()`` seeds copy k
with ``seed + k``; later resets continue the copies' own generators, so a run is
reproducible from ``seed``.

Environment parameters (``environment_parameters:``) are keyword arguments of
``gymnasium.make``, for the parameters the env's constructor takes (a parameter it does not
take is an `EnvError` when the env is built). A copy is made with the values current when
it is made; a new value (a curriculum's next lesson) re-creates each copy at its next reset
(its episode's end, or a reset of the env), and a sampler re-creates the copy at every
episode's end with a fresh draw (``gymnasium.make`` per episode: a cost only samplers pay).
A whole number is passed as an int (a parameter read as a float works the same). A
re-created copy is reset with a seed derived from the env's seed, the copy and how many
times it was made, so runs stay reproducible.

This is the hot path of Gymnasium training: the step loop touches each copy once, and the
batch arrays are built once per step (they are fresh arrays, so callers may keep them).
"""
from __future__ import annotations

import importlib
import inspect
import math
from typing import Any, Callable, Dict, List, Mapping, NoReturn, Optional, Sequence, Tuple

import numpy as np

from envs.base_env import (
    ActionSpec,
    ActionTuple,
    BaseEnv,
    BehaviorSpec,
    DecisionSteps,
    ObservationKind,
    ObservationSpec,
    TerminalSteps,
)
from envs.exceptions import EnvError
from envs.parameters import Constant, ParameterDraws, ParameterValue, check_parameters

ObsConverter = Callable[[Sequence[Any]], np.ndarray]


def import_registering_module(gym_id: str) -> None:
    """For ``module:Id``: imports ``module`` (which registers ``Id``), or raises one
    `EnvError` line naming the module and the id. Plain ids import nothing.

    Done here rather than by ``gymnasium.make`` because Gymnasium re-raises a failed import
    as a bare ModuleNotFoundError (no module name on it, a traceback for the user), and
    lets any other exception from the module's import escape as is.
    """
    if ":" not in gym_id:
        return
    module, _, env_name = gym_id.partition(":")
    if not module or not env_name or ":" in env_name:
        raise EnvError(f"gym:{gym_id}: expected gym:<id> or gym:<module>:<id>, e.g. gym:CartPole-v1")
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name and (module == e.name or module.startswith(e.name + ".")):
            raise EnvError(
                f"gym:{gym_id}: no module named {module!r} to import for env {env_name!r} "
                f"(is it installed, or on PYTHONPATH?)"
            ) from e
        raise EnvError(
            f"gym:{gym_id}: importing module {module!r} for env {env_name!r} failed: "
            f"{type(e).__name__}: {_one_line(e)}"
        ) from e
    except Exception as e:  # the module's own code failed: its error, on one line
        raise EnvError(
            f"gym:{gym_id}: importing module {module!r} for env {env_name!r} failed: "
            f"{type(e).__name__}: {_one_line(e)}"
        ) from e


def _make(gym_id: str, make_kwargs: Mapping[str, Any]) -> Any:
    """``gymnasium.make`` with one-line `EnvError`s for what the user can fix."""
    import gymnasium
    from gymnasium import error as gym_error

    import_registering_module(gym_id)
    try:
        return gymnasium.make(gym_id, **make_kwargs)
    except gym_error.UnregisteredEnv as e:  # NameNotFound, VersionNotFound, NamespaceNotFound
        if ":" in gym_id:
            module, _, env_name = gym_id.partition(":")
            raise EnvError(
                f"gym:{gym_id}: module {module!r} was imported but registered no Gymnasium id {env_name!r} "
                f"({_one_line(e)})"
            ) from e
        raise EnvError(f"gym:{gym_id}: not a registered Gymnasium environment id ({_one_line(e)})") from e
    except gym_error.DeprecatedEnv as e:
        raise EnvError(f"gym:{gym_id}: {_one_line(e)}") from e
    except gym_error.DependencyNotInstalled as e:
        raise EnvError(f"gym:{gym_id}: a dependency is missing: {_one_line(e)}") from e
    except ModuleNotFoundError as e:
        if ":" in gym_id and e.name and gym_id.startswith(e.name.split(".")[0]):
            raise EnvError(f"gym:{gym_id}: cannot import module {e.name!r} to register the env") from e
        raise
    except TypeError as e:
        # Only the "wrong keyword" case is the user's; any other TypeError is a bug to see.
        if "keyword argument" in str(e):
            raise EnvError(f"gym:{gym_id}: gymnasium.make rejected env_args: {_one_line(e)}") from e
        raise


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split())


def gym_parameter_names(gym_id: str) -> Optional[Tuple[str, ...]]:
    """The keyword arguments the constructor of ``gym_id`` takes (environment parameters
    may only be these); None when it takes any (``**kwargs``) or cannot be inspected
    (``gymnasium.make`` then reports what it rejects)."""
    import gymnasium
    from gymnasium.envs.registration import load_env_creator

    import_registering_module(gym_id)
    try:
        entry = gymnasium.spec(gym_id).entry_point
        creator: Any = load_env_creator(entry) if isinstance(entry, str) else entry
        params = inspect.signature(creator).parameters
    except Exception:  # an unknown id or a module that fails: _make says why
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return None
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return tuple(name for name, p in params.items() if p.kind in kinds and name != "self")


def check_gym_parameters(gym_id: str, values: Mapping[str, Any], make_kwargs: Mapping[str, Any]) -> None:
    """`EnvError` for an environment parameter ``gym_id``'s constructor does not take, or one
    that env_args gives too."""
    if not values:
        return
    both = [name for name in values if name in make_kwargs]
    if both:
        raise EnvError(
            f"gym:{gym_id}: environment_parameters.{both[0]}: also given in env_args; give it in one of them"
        )
    names = gym_parameter_names(gym_id)
    if names is not None:
        check_parameters(f"gym:{gym_id}", values, {name: (-math.inf, math.inf) for name in names})


def _make_value(value: float) -> Any:
    """A drawn value as a ``gymnasium.make`` keyword: whole numbers as int (a constructor
    taking an int count gets one; float arithmetic is unchanged by it)."""
    return int(value) if float(value).is_integer() else float(value)


_add_reduce = np.add.reduce
_SMALL = 256  # up to this many values, a sum in Python beats a numpy reduction's fixed cost


def _sum(values: np.ndarray) -> float:
    """The sum of ``values`` (float32), accumulated in Python floats or numpy float64: no
    sum of float32 values can overflow those, so only a NaN or an infinity among the values
    makes it non-finite (and it never warns). Runs on every step: for the few values of
    vector observations a sum in Python costs a fraction of a numpy reduction."""
    if values.size > _SMALL:
        return float(_add_reduce(values, None, np.float64))
    if values.ndim == 1:
        return sum(values.tolist())
    if values.ndim == 2:
        return sum(map(sum, values.tolist()))
    return sum(values.reshape(-1).tolist())


_isfinite = math.isfinite


def _all_finite(values: np.ndarray) -> bool:
    """Whether every value of ``values`` is finite (NaN and infinities survive a sum)."""
    return _isfinite(_sum(values))


def _first_non_finite(values: np.ndarray) -> Optional[Tuple[int, float]]:
    """``(row, value)`` of the first NaN or infinity in ``values`` (``[n, ...]``), else None."""
    flat = values.reshape(len(values), -1)
    bad = ~np.isfinite(flat)
    rows = np.flatnonzero(bad.any(axis=1))
    if not len(rows):
        return None
    row = int(rows[0])
    return row, float(flat[row][bad[row]][0])


def _obs_adapter(gym_id: str, space: Any) -> Tuple[ObservationSpec, ObsConverter, bool]:
    """The observation spec, a converter ``list of n raw obs -> [n, *shape] float32``, and
    whether a converted observation can hold NaN or infinity (float ``Box`` spaces only)."""
    spec, convert = _obs_spec_and_converter(gym_id, space)
    from gymnasium import spaces

    can_be_non_finite = isinstance(space, spaces.Box) and not np.issubdtype(space.dtype, np.integer)
    return spec, convert, can_be_non_finite


def _obs_spec_and_converter(gym_id: str, space: Any) -> Tuple[ObservationSpec, ObsConverter]:
    from gymnasium import spaces

    if isinstance(space, spaces.Box):
        shape = tuple(space.shape)
        if len(shape) == 3:
            if space.dtype == np.uint8:
                scale = np.float32(1.0 / 255.0)

                def convert_image(raw: Sequence[Any]) -> np.ndarray:
                    return np.multiply(np.array(raw, dtype=np.uint8), scale, dtype=np.float32)

                return ObservationSpec(shape, "image", ObservationKind.VISUAL), convert_image

            def convert_float_image(raw: Sequence[Any]) -> np.ndarray:
                return np.array(raw, dtype=np.float32)

            return ObservationSpec(shape, "image", ObservationKind.VISUAL), convert_float_image
        size = int(np.prod(shape)) if shape else 1
        if len(shape) == 1:

            def convert_vector(raw: Sequence[Any]) -> np.ndarray:
                if len(raw) == 1:  # one copy: 3x cheaper than building from a list
                    return np.array(raw[0], dtype=np.float32).reshape(1, size)
                return np.array(raw, dtype=np.float32)

            return ObservationSpec((size,), "obs"), convert_vector

        def convert_flat(raw: Sequence[Any]) -> np.ndarray:
            return np.array(raw, dtype=np.float32).reshape(len(raw), size)

        return ObservationSpec((size,), "obs"), convert_flat
    if isinstance(space, spaces.Discrete):
        size, start = int(space.n), int(space.start)

        def convert_one_hot(raw: Sequence[Any]) -> np.ndarray:
            out = np.zeros((len(raw), size), np.float32)
            out[np.arange(len(raw)), np.asarray(raw, dtype=np.int64) - start] = 1.0
            return out

        return ObservationSpec((size,), "obs"), convert_one_hot
    raise EnvError(
        f"gym:{gym_id}: observation space {space} is not supported (Box or Discrete observations only)"
    )


class _Actions:
    """Converts a batch `ActionTuple` into one Gymnasium action per copy."""

    def __init__(self, gym_id: str, space: Any) -> None:
        from gymnasium import spaces

        self.kind: str
        if isinstance(space, spaces.Box):
            self.kind = "box"
            self.shape = tuple(space.shape)
            size = int(np.prod(self.shape)) if self.shape else 1
            low = np.asarray(space.low, np.float64).reshape(size)
            high = np.asarray(space.high, np.float64).reshape(size)
            finite = np.isfinite(low) & np.isfinite(high)
            # a in [-1, 1] -> center + a * half_range; infinite bounds: identity.
            low, high = np.where(finite, low, -1.0), np.where(finite, high, 1.0)
            self.half = (high - low) / 2.0
            self.center = (high + low) / 2.0
            self.identity = ~finite
            self.any_identity = bool(self.identity.any())
            self.dtype = space.dtype
            self.spec = ActionSpec(continuous_size=size)
        elif isinstance(space, spaces.Discrete):
            self.kind = "discrete"
            self.start = int(space.start)
            self.spec = ActionSpec(discrete_branches=(int(space.n),))
        elif isinstance(space, spaces.MultiDiscrete):
            self.kind = "multidiscrete"
            self.shape = tuple(space.nvec.shape)
            self.offsets = np.asarray(space.start, dtype=space.dtype).reshape(-1)
            self.dtype = space.dtype
            self.spec = ActionSpec(discrete_branches=tuple(int(b) for b in space.nvec.reshape(-1)))
        else:
            raise EnvError(
                f"gym:{gym_id}: action space {space} is not supported (Box, Discrete or MultiDiscrete only)"
            )

    def convert(self, action: ActionTuple, n: int) -> List[Any]:
        """One Gymnasium action per copy, from ``[n, ...]`` batch arrays."""
        if self.kind == "discrete":
            if action.discrete.shape != (n, 1):
                raise ValueError(f"discrete actions must have shape {(n, 1)}, got {action.discrete.shape}")
            column = action.discrete[:, 0].tolist()
            return [a + self.start for a in column] if self.start else column
        if self.kind == "multidiscrete":
            shape = (n, self.spec.discrete_size)
            if action.discrete.shape != shape:
                raise ValueError(f"discrete actions must have shape {shape}, got {action.discrete.shape}")
            acts = (action.discrete.astype(self.dtype) + self.offsets).reshape((n,) + self.shape)
            return list(acts)
        shape = (n, self.spec.continuous_size)
        if action.continuous.shape != shape:
            raise ValueError(f"continuous actions must have shape {shape}, got {action.continuous.shape}")
        raw = action.continuous
        scaled = np.clip(raw, -1.0, 1.0) * self.half + self.center
        if self.any_identity:
            scaled[:, self.identity] = raw[:, self.identity]
        return list(scaled.astype(self.dtype).reshape((n,) + self.shape))


class GymEnv(BaseEnv):
    """``agents_per_env`` copies of a Gymnasium env as the agents of one behavior."""

    def __init__(
        self,
        gym_id: str,
        agents_per_env: int = 1,
        seed: int = 0,
        env_parameters: Optional[Mapping[str, ParameterValue]] = None,
        **make_kwargs: Any,
    ) -> None:
        """
        Args:
            gym_id: a registered Gymnasium id, e.g. ``"CartPole-v1"`` (or
                ``"module:Id-v0"``, which imports ``module`` first).
            agents_per_env: number of copies, i.e. agents of the behavior.
            seed: copy k is reset with ``seed + k`` the first time.
            env_parameters: environment parameters: more ``gymnasium.make`` keywords (see
                the module docstring); the constructor must take them.
            **make_kwargs: passed to every ``gymnasium.make`` call.
        """
        if isinstance(agents_per_env, bool) or int(agents_per_env) < 1:
            raise EnvError(f"gym:{gym_id}: agents_per_env must be >= 1, got {agents_per_env!r}")
        self._gym_id = gym_id
        self._n = int(agents_per_env)
        self._seed = int(seed)
        self._envs: List[Any] = []
        self._steps: Optional[Tuple[DecisionSteps, TerminalSteps]] = None
        self._closed = False
        self._make_kwargs = dict(make_kwargs)
        check_gym_parameters(gym_id, env_parameters or {}, make_kwargs)
        self._parameters = ParameterDraws(seed, env_parameters)
        self._stale = [False] * self._n  # copies made with values that have changed since
        self._made = [1] * self._n  # times each copy was made (seeds its re-creations)
        try:
            for _ in range(self._n):
                self._envs.append(_make(gym_id, self._copy_kwargs()))
            first = self._envs[0]
            self._spaces = (first.observation_space, first.action_space)
            obs_spec, self._convert_obs, self._check_obs = _obs_adapter(gym_id, first.observation_space)
            self._actions = _Actions(gym_id, first.action_space)
        except BaseException:
            self.close()
            raise
        spec_id = getattr(first.spec, "id", None)
        self._name: str = spec_id or gym_id.split(":")[-1]
        self._spec = BehaviorSpec((obs_spec,), self._actions.spec)
        self._specs = {self._name: self._spec}
        self._default_action = self._actions.convert(self._spec.action_spec.empty_action(self._n), self._n)
        self._ids = np.arange(self._n, dtype=np.int32)
        self._next_id = 0
        self._pending: Optional[List[Any]] = None
        self._empty_terminal = TerminalSteps.empty(self._spec)
        self._has_reset = False

    @property
    def behavior_name(self) -> str:
        """The only behavior: the Gymnasium id, e.g. ``"CartPole-v1"``."""
        return self._name

    @property
    def gym_envs(self) -> Sequence[Any]:
        """The Gymnasium env copies (read-only use: rendering, inspection)."""
        return tuple(self._envs)

    @property
    def behavior_specs(self) -> Mapping[str, BehaviorSpec]:
        return self._specs

    def set_env_parameters(self, values: Mapping[str, Any]) -> None:
        """More ``gymnasium.make`` keywords: each copy is re-created with them at its next
        reset (see the module docstring)."""
        check_gym_parameters(self._gym_id, values, self._make_kwargs)
        if list(self._parameters.changed(values)):
            self._parameters.update(values)
            self._stale = [True] * self._n

    def _copy_kwargs(self) -> Dict[str, Any]:
        kwargs = dict(self._make_kwargs)
        for name in self._parameters.values:
            kwargs[name] = _make_value(self._parameters.draw_one(name))
        return kwargs

    def _remade(self, k: int, seed: Optional[int] = None) -> Optional[Any]:
        """Copy ``k`` re-created and reset (with ``seed``, else one derived from the env's)
        when its parameters changed or a sampler draws per episode: its first observation;
        None when the copy goes on as it is."""
        samplers = any(not isinstance(v, Constant) for v in self._parameters.values.values())
        if not (self._stale[k] or (samplers and self._has_reset)):
            return None
        fresh = _make(self._gym_id, self._copy_kwargs())
        if (fresh.observation_space, fresh.action_space) != self._spaces:
            fresh.close()
            raise EnvError(
                f"gym:{self._gym_id}: the environment parameters {self._parameters.values} changed its spaces; "
                "only parameters that keep the observation and action spaces can change during a run"
            )
        old, self._envs[k] = self._envs[k], fresh
        try:
            old.close()
        except Exception:  # the old copy is gone either way
            pass
        self._stale[k] = False
        if seed is None:
            seed = int(np.random.SeedSequence([self._seed, k, self._made[k]]).generate_state(1)[0] >> 1)
        self._made[k] += 1
        obs, _ = fresh.reset(seed=seed)
        return obs

    def reset(self) -> None:
        self._check_open()
        raw = []
        for k, env in enumerate(self._envs):
            remade = self._remade(k, None if self._has_reset else self._seed + k)
            if remade is not None:
                raw.append(remade)
                continue
            # Seed only once: later resets continue each copy's generator.
            obs, _ = env.reset(seed=self._seed + k) if not self._has_reset else env.reset()
            raw.append(obs)
        self._has_reset = True
        self._ids = np.arange(self._next_id, self._next_id + self._n, dtype=np.int32)
        self._next_id += self._n
        self._pending = None
        obs = self._convert_obs(raw)
        if self._check_obs and not _all_finite(obs):
            self._raise_non_finite("observation", obs, self._ids, None, "a reset")
        self._steps = (
            DecisionSteps([obs], np.zeros(self._n, np.float32), self._ids.copy()),
            self._empty_terminal,
        )

    def get_steps(self, behavior_name: str) -> Tuple[DecisionSteps, TerminalSteps]:
        if behavior_name != self._name:
            raise KeyError(f"unknown behavior {behavior_name!r}; this env has [{self._name!r}]")
        if self._steps is None:
            self._check_open()
            raise RuntimeError("call reset() before get_steps()")
        return self._steps

    def set_actions(self, behavior_name: str, action: ActionTuple) -> None:
        if behavior_name != self._name:
            raise KeyError(f"unknown behavior {behavior_name!r}; this env has [{self._name!r}]")
        self._pending = self._actions.convert(action, self._n)

    def step(self) -> None:
        if self._steps is None:
            self._check_open()
            raise RuntimeError("call reset() before step()")
        actions = self._pending if self._pending is not None else self._default_action
        self._pending = None
        envs = self._envs
        raw_obs: List[Any] = [None] * self._n
        rewards: List[float] = [0.0] * self._n
        ended: Optional[List[Tuple[int, Any, float, bool]]] = None
        for k in range(self._n):
            obs, reward, terminated, truncated, _ = envs[k].step(actions[k])
            if terminated or truncated:
                if ended is None:
                    ended = []
                ended.append((k, obs, float(reward), bool(truncated and not terminated)))
                obs = self._remade(k) if self._parameters else None
                if obs is None:
                    obs, _ = envs[k].reset()
                reward = 0.0
            raw_obs[k] = obs
            rewards[k] = reward
        terminal = self._empty_terminal
        if ended is not None:
            rows = [e[0] for e in ended]
            terminal = TerminalSteps(
                obs=[self._convert_obs([e[1] for e in ended])],
                reward=np.array([e[2] for e in ended], dtype=np.float32),
                interrupted=np.array([e[3] for e in ended], dtype=bool),
                agent_id=self._ids[rows],
            )
            when = "the last step of an episode"
            if self._check_obs and not _all_finite(terminal.obs[0]):
                self._raise_non_finite("observation", terminal.obs[0], terminal.agent_id, rows, when)
            if not _all_finite(terminal.reward):
                self._raise_non_finite("reward", terminal.reward, terminal.agent_id, rows, when)
            self._ids[rows] = np.arange(self._next_id, self._next_id + len(rows), dtype=np.int32)
            self._next_id += len(rows)
        obs = self._convert_obs(raw_obs)
        reward_batch = np.array(rewards, dtype=np.float32)
        # One sum over rewards and observations (see `_sum`), written out: this is per step.
        total = sum(reward_batch.tolist()) + _sum(obs) if self._check_obs else sum(reward_batch.tolist())
        if not _isfinite(total):
            if self._check_obs and not _all_finite(obs):
                self._raise_non_finite("observation", obs, self._ids, None, "a step")
            self._raise_non_finite("reward", reward_batch, self._ids, None, "a step")
        self._steps = (DecisionSteps([obs], reward_batch, self._ids.copy()), terminal)

    def _raise_non_finite(
        self, what: str, values: np.ndarray, agent_ids: np.ndarray, copies: Optional[List[int]], when: str
    ) -> NoReturn:
        """The `EnvError` for the first NaN or infinity in ``values`` (one row per agent of
        ``agent_ids``; ``copies``: their copy indices, None: row k is copy k)."""
        found = _first_non_finite(values)
        row, value = found if found is not None else (0, float("nan"))  # (the sum said so)
        copy = row if copies is None else copies[row]
        where = f"in observation {self._spec.observation_specs[0].name!r} " if what == "observation" else ""
        raise EnvError(
            f"gym:{self._gym_id}: the environment returned a non-finite {what}: {value} {where}"
            f"of agent {int(agent_ids[row])} (copy {copy}) after {when}"
        )

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._steps = None
        for env in self._envs:
            try:
                env.close()
            except Exception:  # closing must not fail half-way
                pass

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"GymEnv({self._gym_id!r}) is closed")
