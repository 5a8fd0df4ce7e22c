"""`Simple` and `Memory`: ML-Agents' 1-D test environments, by default identical to
``SimpleEnvironment`` and ``MemoryEnvironment`` of ML-Agents Release 22
(``ml-agents/mlagents/trainers/tests/simple_test_envs.py`` at commit ac576f9f, the Release
22 merge). See docs/ML-AGENTS-FACTS.md#4-test-environments-used-to-prove-learning.

Each agent has a goal ``g`` (-1 or +1, drawn per episode from the env's seeded generator)
and a position with one coordinate per action dimension (continuous dims first, then one
per discrete branch), starting at 0. Each step every coordinate gets a delta: the
continuous action value itself, or +1 / -1 for a discrete branch value 1 / 0 (ML-Agents:
``deltas.append(1 if _disc else -1)``), **clamped to [-step_size, step_size]**
(``_delta = clamp(_delta, -self.step_size, self.step_size)``): any continuous action
>= step_size is a full step. The coordinate is then clamped to [-1, 1]. The episode ends
when every coordinate is exactly at -1 or +1 (``all(pos >= 1.0 or pos <= -1.0 ...)``, in
float64: ten steps of 0.1 sum to 0.9999999999999999, so with step_size 0.1 the goal is
reached on the 11th step, as in ML-Agents). There is **no time limit** (ML-Agents never
interrupts an episode); ``max_episode_steps`` > 0 adds one (``interrupted=True``).

Rewards (``_compute_reward``): -0.01 (``TIME_PENALTY``) on every step that does not end the
episode; on the last step ``SUCCESS_REWARD x mean(position x g)`` with ``SUCCESS_REWARD =
1.0 + MIN_STEPS x TIME_PENALTY`` and ``MIN_STEPS = int(1.0 / STEP_SIZE) + 1`` computed from
ML-Agents' module constant ``STEP_SIZE = 0.2``, i.e. always 1.06 whatever the env's
step_size: +1.06 when every coordinate reached the goal, -1.06 when every one went the
wrong way. The optimal policy moves every coordinate towards the goal at full speed: with
step_size 0.2 it takes 5 steps and returns ``4 x -0.01 + 1.06 = 1.02``
(`optimal_return()`).

Observations (``_make_obs``), in this order: ``num_vector`` vector observations of size
``vec_obs_size`` and ``num_visual`` images of shape ``vis_obs_size`` (ML-Agents'
``VIS_OBS_SIZE = (3, 20, 20)`` is channels-first; ours is ``(H, W, C) = (20, 20, 3)``),
every entry and every pixel equal to ``g`` (-1 or +1). ``unit_visual=True`` fills images
with ``(g + 1) / 2`` instead (0 or 1, like camera images in [0, 1]: what a PNG ``.demo``
can store). ML-Agents' variable-length observations (``num_var_len``) and goal-signal
observations (``goal_indices``) have no counterpart (the env API has neither); both are
off by default there.

`Memory` (``MemoryEnvironment``) shows the goal while ML-Agents' ``step_count`` is
``<= num_show_steps = 2``, and 0 afterwards (0.5 in ``unit_visual`` images). ``step_count``
is 0 after a reset and grows by one **per action dimension** on every step (``+= 1`` inside
the loop over deltas), so a 1-D agent sees the goal in its first 3 observations (after the
reset, after step 1, after step 2), a 2-D one (hybrid, or two branches) in its first 2.
The final observation of an episode follows the same rule.

Beyond ML-Agents (defaults keep its behavior): several agents per behavior (``num_agents``;
ML-Agents has one), ``max_episode_steps``, ``unit_visual``, ``step_delay_ms``, the
environment parameters ``step_size`` and ``goal_distance`` (`Simple.ENV_PARAMETERS`), and
`Memory` accepts every `Simple` kwarg (ML-Agents' takes only action sizes and step_size). Apart
from that, only what a trainer never sees differs: the goals come from ``seed`` (ML-Agents
seeds ``random.Random`` with its constructor arguments), agent ids are unique across
behaviors, discrete actions come without an action mask (ML-Agents sends one that masks
nothing), and an agent given no action gets zeros (ML-Agents repeats its last one).
"""
from __future__ import annotations

import time
from typing import List, Optional, Sequence, Tuple

import numpy as np

from envs.base_env import ActionSpec, ActionTuple, BehaviorSpec, ObservationKind, ObservationSpec
from envs.builtin._base import BehaviorState, BuiltinEnv, check_float, check_int, check_names, check_step_size
from envs.exceptions import EnvError

TIME_PENALTY = 0.01
#: ML-Agents' ``SUCCESS_REWARD = 1.0 + MIN_STEPS * TIME_PENALTY`` with ``MIN_STEPS =
#: int(1.0 / STEP_SIZE) + 1`` from its module constant ``STEP_SIZE = 0.2`` (not the env's).
SUCCESS_REWARD = 1.0 + (int(1.0 / 0.2) + 1) * TIME_PENALTY


class _SimpleState(BehaviorState):
    def __init__(self, n: int, n_dims: int) -> None:
        super().__init__(n)
        self.goal = np.zeros(n, np.float64)  # -1 or +1
        self.position = np.zeros((n, n_dims), np.float64)
        # Per agent, from its episode's start, once the environment parameter is set
        # (None: every agent has the constructor's value, the fast path).
        self.step_size: Optional[np.ndarray] = None  # [n] float64
        self.goal_distance: Optional[np.ndarray] = None  # [n] float64


class Simple(BuiltinEnv):
    """Move every coordinate of a position to the goal (-1 or +1) shown in the observations.

    ML-Agents' ``SimpleEnvironment`` (Release 22); see the module docstring for the
    dynamics, rewards and observations.
    """

    #: ML-Agents' ``MemoryEnvironment.num_show_steps``: the goal is shown while the step
    #: counter (steps x action dimensions) is at most this; -1: always (`Simple`).
    num_show_steps: int = -1

    #: Environment parameters (``environment_parameters:``; beyond ML-Agents' test env),
    #: each agent's from its episode start: ``step_size`` replaces the constructor's;
    #: ``goal_distance`` d moves the ends to -d and +d (positions clamped to [-d, d], the
    #: episode ends when every coordinate is at an end, the final reward is computed from
    #: ``position / d``, so the returns stay those of the default, d = 1).
    ENV_PARAMETERS = {
        "step_size": (1e-6, 1.0, "largest move of a coordinate in one step"),
        "goal_distance": (1e-3, 10.0, "distance from the start to either end"),
    }

    def __init__(
        self,
        continuous: int = 1,
        discrete: int = 0,
        num_vector: int = 1,
        vec_obs_size: int = 1,
        num_visual: int = 0,
        vis_obs_size: Sequence[int] = (20, 20, 3),
        step_size: float = 0.2,
        num_agents: int = 1,
        behavior_names: Sequence[str] = ("Simple",),
        max_episode_steps: int = 0,
        unit_visual: bool = False,
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
            step_size: the largest move of a coordinate in one step (the action is
                clamped to [-step_size, step_size]), in (0, 1].
            num_agents: agents per behavior.
            behavior_names: one behavior per name, all with the same spec.
            max_episode_steps: time limit (``interrupted=True``); 0 = none (ML-Agents).
            unit_visual: images hold ``(goal + 1) / 2`` (0 or 1) instead of the goal
                value (-1 or +1), e.g. to record them in a PNG ``.demo``.
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
        if not isinstance(unit_visual, bool):
            raise EnvError(f"{env}: env_args.unit_visual must be true or false, got {unit_visual!r}")
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
        self._unit_visual = unit_visual
        self.success_reward = SUCCESS_REWARD
        obs_specs = [ObservationSpec((vec_obs_size,), f"vector_{i}") for i in range(num_vector)]
        obs_specs += [ObservationSpec(vis_shape, f"visual_{i}", ObservationKind.VISUAL) for i in range(num_visual)]
        spec = BehaviorSpec(tuple(obs_specs), ActionSpec(continuous, (2,) * discrete))
        super().__init__(spec, names, num_agents, max_episode_steps, seed)

    def optimal_return(self) -> float:
        """Undiscounted return of a perfect episode (1.02 with step_size 0.2): full steps,
        added in float64 as the env adds them, until the coordinate is at 1."""
        position, steps = 0.0, 0
        while position < 1.0:
            position = min(position + self._step_size, 1.0)
            steps += 1
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
        if state.step_size is not None:  # environment parameters, drawn after the goals
            state.step_size[rows] = self._parameter("step_size", rows)
        if state.goal_distance is not None:
            state.goal_distance[rows] = self._parameter("goal_distance", rows)

    def _parameters_set(self, state: BehaviorState, names: Sequence[str]) -> None:
        assert isinstance(state, _SimpleState)
        # Agents in an episode keep the value it started with: the constructor's.
        if "step_size" in names and state.step_size is None:
            state.step_size = np.full(state.n, self._step_size)
        if "goal_distance" in names and state.goal_distance is None:
            state.goal_distance = np.ones(state.n)

    def _advance(self, state: BehaviorState, action: ActionTuple) -> Tuple[np.ndarray, np.ndarray]:
        assert isinstance(state, _SimpleState)
        # ML-Agents' `_take_action` and `_compute_reward`, for all agents at once, in
        # float64 (its Python floats). Plain ufuncs with ``out=`` rather than np.clip and
        # .mean: the same numbers in fewer calls. With one agent each numpy call's fixed
        # cost is the env's cost (ML-Agents' small-buffer test steps it 20k times).
        c = self._continuous
        # Environment parameters: per-agent columns [n, 1]; unset, the scalars of ML-Agents.
        step = self._step_size if state.step_size is None else state.step_size[:, None]
        end = 1.0 if state.goal_distance is None else state.goal_distance[:, None]
        delta = np.empty_like(state.position)
        if c:
            delta[:, :c] = action.continuous  # float32 -> float64 before the clamp, as ML-Agents
        if self._discrete:
            delta[:, c:] = np.where(action.discrete != 0, 1.0, -1.0)
        np.maximum(delta, -step, out=delta)
        np.minimum(delta, step, out=delta)
        pos = np.add(state.position, delta, out=delta)
        np.maximum(pos, -end, out=pos)
        np.minimum(pos, end, out=pos)
        state.position = pos
        done = np.logical_and.reduce(np.abs(pos) >= end, axis=1)
        n_dims = pos.shape[1]
        # sum over coordinates of SUCCESS_REWARD * pos * goal / n_dims, as ML-Agents adds it
        # (with a goal distance, of pos / d: the ends are worth what +-1 is by default)
        scaled = pos if state.goal_distance is None else pos / end
        alignment = np.add.reduce(self.success_reward * scaled * state.goal[:, None] / n_dims, axis=1)
        reward = np.where(done, alignment, -TIME_PENALTY).astype(np.float32)
        return reward, done

    def _observe(self, state: BehaviorState) -> List[np.ndarray]:
        assert isinstance(state, _SimpleState)
        n = state.n
        goal = state.goal.astype(np.float32)
        hidden = None
        if self.num_show_steps >= 0:  # ML-Agents' step_count: one per action dimension per step
            step_count = state.episode_steps * (self._continuous + self._discrete)
            hidden = step_count > self.num_show_steps
        obs = []
        if self._num_vector:
            vector = goal if hidden is None else np.where(hidden, 0.0, goal).astype(np.float32)
            column = vector.reshape(n, 1)
            obs = [column.repeat(self._vec_size, axis=1) for _ in range(self._num_vector)]
        if self._num_visual:
            pixel = (goal + 1.0) * 0.5 if self._unit_visual else goal
            if hidden is not None:
                pixel = np.where(hidden, 0.5 if self._unit_visual else 0.0, pixel).astype(np.float32)
            for _ in range(self._num_visual):
                img = np.empty((n,) + self._vis_shape, np.float32)
                img[...] = pixel[:, None, None, None]
                obs.append(img)
        return obs

    def _expert(self, state: BehaviorState, rows: np.ndarray) -> ActionTuple:
        # ML-Agents' RecordEnvironment.solve: the goal as the continuous action, branch
        # value 1 for goal +1 and 0 for -1.
        assert isinstance(state, _SimpleState)
        goal = state.goal[rows]
        cont = np.repeat(goal[:, None], self._continuous, axis=1).astype(np.float32)
        disc = np.repeat((goal[:, None] > 0).astype(np.int32), self._discrete, axis=1)
        return ActionTuple(continuous=cont.reshape(len(rows), self._continuous),
                           discrete=disc.reshape(len(rows), self._discrete))


class Memory(Simple):
    """Simple, but the goal is shown only in the first observations (needs memory).

    ML-Agents' ``MemoryEnvironment`` (Release 22): the goal is shown while the step
    counter (steps x action dimensions) is at most 2 -- the first 3 observations of a
    1-D agent -- and 0 afterwards, so a policy must remember it (LSTM). Same kwargs as
    `Simple`, except ``behavior_names`` defaults to ``["Memory"]``.
    """

    num_show_steps = 2

    def __init__(
        self,
        continuous: int = 1,
        discrete: int = 0,
        num_vector: int = 1,
        vec_obs_size: int = 1,
        num_visual: int = 0,
        vis_obs_size: Sequence[int] = (20, 20, 3),
        step_size: float = 0.2,
        num_agents: int = 1,
        behavior_names: Sequence[str] = ("Memory",),
        max_episode_steps: int = 0,
        unit_visual: bool = False,
        step_delay_ms: float = 0.0,
        seed: int = 0,
    ) -> None:
        super().__init__(
            continuous=continuous, discrete=discrete, num_vector=num_vector, vec_obs_size=vec_obs_size,
            num_visual=num_visual, vis_obs_size=vis_obs_size, step_size=step_size, num_agents=num_agents,
            behavior_names=behavior_names, max_episode_steps=max_episode_steps, unit_visual=unit_visual,
            step_delay_ms=step_delay_ms, seed=seed,
        )
