"""`Simple` and `Memory`: ML-Agents' 1-D test environments.

See docs/ML-AGENTS-FACTS.md#4-test-environments-used-to-prove-learning.

Each agent has a goal ``g`` (-1 or +1, drawn per episode from the env's seeded generator)
and a position with one coordinate per action dimension (continuous dims first, then one
per discrete branch), starting at 0. Each step every coordinate moves by
``step_size x a``: ``a`` is the continuous action clipped to [-1, 1], or -1/+1 for a
discrete branch value 0/1. Positions are clipped to [-1, 1]. The episode ends when every
coordinate is at -1 or +1. Rewards:

* -0.01 on every step that does not end the episode;
* on the last step ``(1 + 0.01 x min_steps) x mean(position x g)`` with
  ``min_steps = int(1 / step_size) + 1``, i.e. +1.06 when every coordinate reached the goal
  (step_size 0.2), -1.06 when every coordinate went the wrong way.

The optimal policy moves every coordinate towards the goal at full speed: with
step_size 0.2 it takes 5 steps and returns ``4 x -0.01 + 1.06 = 1.02``
(`optimal_return()`). An episode that reaches ``max_episode_steps`` ends with
``interrupted=True`` and the ordinary -0.01 reward.

Observations: ``num_vector`` vector observations of size ``vec_obs_size`` filled with
``g``, and ``num_visual`` images of shape ``vis_obs_size`` whose every pixel is
``(g + 1) / 2``, i.e. 0 or 1 (visual observations live in [0, 1]). `Memory` shows the goal
only in the first two observations of an episode (after the reset and after step 1);
later observations carry no information: 0 in vector observations, 0.5 in images.
"""
from __future__ import annotations

import time
from typing import List, Sequence, Tuple

import numpy as np

from envs.base_env import ActionSpec, ActionTuple, BehaviorSpec, ObservationKind, ObservationSpec
from envs.builtin._base import BehaviorState, BuiltinEnv, check_float, check_int, check_names, check_step_size
from envs.exceptions import EnvError

TIME_PENALTY = 0.01


class _SimpleState(BehaviorState):
    def __init__(self, n: int, n_dims: int) -> None:
        super().__init__(n)
        self.goal = np.zeros(n, np.float64)  # -1 or +1
        self.position = np.zeros((n, n_dims), np.float64)


class Simple(BuiltinEnv):
    """Move every coordinate of a position to the goal (-1 or +1) shown in the observations.

    See the module docstring for the dynamics and rewards.
    """

    #: Steps for which `Memory` shows the goal; `Simple` always shows it.
    show_goal_steps: int = -1

    def __init__(
        self,
        continuous: int = 1,
        discrete: int = 0,
        num_vector: int = 1,
        vec_obs_size: int = 1,
        num_visual: int = 0,
        vis_obs_size: Sequence[int] = (36, 36, 3),
        step_size: float = 0.2,
        num_agents: int = 1,
        behavior_names: Sequence[str] = ("Simple",),
        max_episode_steps: int = 100,
        step_delay_ms: float = 0.0,
        seed: int = 0,
    ) -> None:
        """
        Args:
            continuous: number of continuous action dimensions.
            discrete: number of discrete branches, each of size 2 (0 = -1, 1 = +1).
            num_vector: number of vector observations, each of size ``vec_obs_size``.
            vec_obs_size: size of each vector observation.
            num_visual: number of visual observations, each of shape ``vis_obs_size``.
            vis_obs_size: ``(H, W, C)`` of each visual observation.
            step_size: how far one full action moves a coordinate, in (0, 1].
            num_agents: agents per behavior.
            behavior_names: one behavior per name, all with the same spec.
            max_episode_steps: time limit (``interrupted=True``); 0 = none.
            step_delay_ms: every ``step()`` sleeps this long first: a slow env (like a
                Unity build rendering) for throughput measurements. It sleeps, so parallel
                workers overlap even on a busy machine.
            seed: seeds the goal draws.
        """
        env = type(self).__name__
        continuous = check_int(env, "continuous", continuous, 0)
        discrete = check_int(env, "discrete", discrete, 0)
        if continuous + discrete == 0:
            raise EnvError(f"{env}: needs at least one action (env_args.continuous + env_args.discrete >= 1)")
        num_vector = check_int(env, "num_vector", num_vector, 0)
        vec_obs_size = check_int(env, "vec_obs_size", vec_obs_size, 1)
        num_visual = check_int(env, "num_visual", num_visual, 0)
        if num_vector + num_visual == 0:
            raise EnvError(f"{env}: needs at least one observation (env_args.num_vector + env_args.num_visual >= 1)")
        if isinstance(vis_obs_size, str) or not isinstance(vis_obs_size, Sequence) or len(vis_obs_size) != 3:
            raise EnvError(f"{env}: env_args.vis_obs_size must be [H, W, C], got {vis_obs_size!r}")
        vis_shape = tuple(check_int(env, "vis_obs_size", s, 1) for s in vis_obs_size)
        self._step_size = check_float(env, "step_size", step_size, 1e-6, 1.0)
        num_agents = check_int(env, "num_agents", num_agents, 1)
        names = check_names(env, behavior_names)
        max_episode_steps = check_int(env, "max_episode_steps", max_episode_steps, 0)
        self._step_delay_s = check_float(env, "step_delay_ms", step_delay_ms, 0.0, 60_000.0) / 1000.0
        seed = check_int(env, "seed", seed, 0)
        per_agent = num_vector * vec_obs_size + num_visual * vis_shape[0] * vis_shape[1] * vis_shape[2]
        check_step_size(env, per_agent + continuous + discrete, len(names), num_agents)  # before specs are built

        self._continuous = continuous
        self._discrete = discrete
        self._num_vector = num_vector
        self._vec_size = vec_obs_size
        self._num_visual = num_visual
        self._vis_shape = vis_shape
        self.min_steps = int(1.0 / self._step_size) + 1
        self.success_reward = 1.0 + TIME_PENALTY * self.min_steps
        obs_specs = [ObservationSpec((vec_obs_size,), f"vector_{i}") for i in range(num_vector)]
        obs_specs += [ObservationSpec(vis_shape, f"visual_{i}", ObservationKind.VISUAL) for i in range(num_visual)]
        spec = BehaviorSpec(tuple(obs_specs), ActionSpec(continuous, (2,) * discrete))
        super().__init__(spec, names, num_agents, max_episode_steps, seed)

    def optimal_return(self) -> float:
        """Undiscounted return of a perfect episode (1.02 with step_size 0.2)."""
        steps = int(np.ceil(1.0 / self._step_size - 1e-9))
        return -TIME_PENALTY * (steps - 1) + self.success_reward

    def step(self) -> None:
        if self._step_delay_s:
            time.sleep(self._step_delay_s)
        super().step()

    # ----------------------------------------------------------------- hooks
    def _init_state(self, n: int) -> _SimpleState:
        return _SimpleState(n, self._continuous + self._discrete)

    def _reset_rows(self, state: BehaviorState, rows: np.ndarray) -> None:
        assert isinstance(state, _SimpleState)
        state.goal[rows] = np.where(self._rng.integers(0, 2, size=len(rows)) == 1, 1.0, -1.0)
        state.position[rows] = 0.0

    def _advance(self, state: BehaviorState, action: ActionTuple) -> Tuple[np.ndarray, np.ndarray]:
        assert isinstance(state, _SimpleState)
        # Plain ufuncs with ``out=`` rather than np.clip, boolean indexing and .mean: the
        # same numbers in fewer calls. With one agent each numpy call's fixed cost is the
        # env's cost (ML-Agents' small-buffer test steps it 20k times).
        c = self._continuous
        step = self._step_size
        if c:
            delta = np.empty_like(state.position)
            np.clip(action.continuous, -1.0, 1.0, out=delta[:, :c])
            if self._discrete:
                delta[:, c:] = np.where(action.discrete == 1, 1.0, -1.0)
            delta *= step
        else:  # step * (+1 or -1), exactly
            delta = np.where(action.discrete == 1, step, -step)
        pos = np.add(state.position, delta, out=delta)
        np.maximum(pos, -1.0, out=pos)
        np.minimum(pos, 1.0, out=pos)
        at_edge = np.greater_equal(np.abs(pos), 1.0 - 1e-6)
        np.copysign(1.0, pos, out=pos, where=at_edge)  # 5 x 0.2 may sum to 0.9999999
        state.position = pos
        done = np.logical_and.reduce(at_edge, axis=1)
        alignment = np.add.reduce(pos * state.goal[:, None], axis=1) / pos.shape[1]  # the mean
        reward = np.where(done, self.success_reward * alignment, -TIME_PENALTY).astype(np.float32)
        return reward, done

    def _observe(self, state: BehaviorState) -> List[np.ndarray]:
        assert isinstance(state, _SimpleState)
        n = state.n
        goal = state.goal.astype(np.float32)
        hidden = state.episode_steps >= self.show_goal_steps if self.show_goal_steps >= 0 else None
        obs = []
        if self._num_vector:
            vector = goal if hidden is None else np.where(hidden, 0.0, goal).astype(np.float32)
            column = vector.reshape(n, 1)
            obs = [column.repeat(self._vec_size, axis=1) for _ in range(self._num_vector)]
        if self._num_visual:
            pixel = (goal + 1.0) * 0.5
            if hidden is not None:
                pixel = np.where(hidden, 0.5, pixel).astype(np.float32)
            for _ in range(self._num_visual):
                img = np.empty((n,) + self._vis_shape, np.float32)
                img[...] = pixel[:, None, None, None]
                obs.append(img)
        return obs

    def _expert(self, state: BehaviorState, rows: np.ndarray) -> ActionTuple:
        assert isinstance(state, _SimpleState)
        goal = state.goal[rows]
        cont = np.repeat(goal[:, None], self._continuous, axis=1).astype(np.float32)
        disc = np.repeat((goal[:, None] > 0).astype(np.int32), self._discrete, axis=1)
        return ActionTuple(continuous=cont.reshape(len(rows), self._continuous),
                           discrete=disc.reshape(len(rows), self._discrete))


class Memory(Simple):
    """Simple, but the goal is shown only in the first two observations (needs memory).

    A policy must remember the goal (LSTM) to score well after step 2. Same kwargs as
    `Simple`, except ``behavior_names`` defaults to ``["Memory"]``.
    """

    show_goal_steps = 2

    def __init__(
        self,
        continuous: int = 1,
        discrete: int = 0,
        num_vector: int = 1,
        vec_obs_size: int = 1,
        num_visual: int = 0,
        vis_obs_size: Sequence[int] = (36, 36, 3),
        step_size: float = 0.2,
        num_agents: int = 1,
        behavior_names: Sequence[str] = ("Memory",),
        max_episode_steps: int = 100,
        step_delay_ms: float = 0.0,
        seed: int = 0,
    ) -> None:
        super().__init__(
            continuous=continuous, discrete=discrete, num_vector=num_vector, vec_obs_size=vec_obs_size,
            num_visual=num_visual, vis_obs_size=vis_obs_size, step_size=step_size, num_agents=num_agents,
            behavior_names=behavior_names, max_episode_steps=max_episode_steps,
            step_delay_ms=step_delay_ms, seed=seed,
        )
