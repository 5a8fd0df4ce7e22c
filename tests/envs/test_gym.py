"""Gymnasium adapter: spaces, rescaling, terminal vs truncated, seeding, exactness."""
from __future__ import annotations

from typing import Any, List, Optional

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces

from env_test_utils import random_policy, run_episodes
from envs.base_env import ActionTuple, ObservationKind
from envs.exceptions import EnvError
from envs.gym import GymEnv


class _ProbeEnv(gymnasium.Env):
    """A tiny configurable env that records the actions it receives.

    Observations count the steps; the episode terminates at ``terminate_at`` (if set).
    """

    metadata: dict = {"render_modes": []}

    def __init__(self, obs_space: Any, act_space: Any, terminate_at: Optional[int] = None) -> None:
        self.observation_space = obs_space
        self.action_space = act_space
        self.terminate_at = terminate_at
        self.received: List[Any] = []
        self.t = 0

    def _obs(self) -> Any:
        if isinstance(self.observation_space, spaces.Discrete):
            return self.t % self.observation_space.n
        value = (self.t * 37) % 256
        return np.full(self.observation_space.shape, value, dtype=self.observation_space.dtype)

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None) -> Any:
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action: Any) -> Any:
        self.received.append(action)
        self.t += 1
        terminated = self.terminate_at is not None and self.t >= self.terminate_at
        return self._obs(), float(self.t), terminated, False, {}


_REGISTERED = False


def _register() -> None:
    global _REGISTERED
    if _REGISTERED:
        return
    gymnasium.register(
        id="TestImage-v0",
        entry_point=lambda **kw: _ProbeEnv(spaces.Box(0, 255, (6, 5, 3), np.uint8), spaces.Discrete(3), 4),
        max_episode_steps=10,
        disable_env_checker=True,
    )
    gymnasium.register(
        id="TestMultiDiscrete-v0",
        entry_point=lambda **kw: _ProbeEnv(
            spaces.Box(-1, 1, (2, 3), np.float32), spaces.MultiDiscrete([3, 4], start=[1, -2])
        ),
        disable_env_checker=True,
    )
    gymnasium.register(
        id="TestUnbounded-v0",
        entry_point=lambda **kw: _ProbeEnv(
            spaces.Discrete(5),
            spaces.Box(np.array([-np.inf, 0.0], np.float32), np.array([np.inf, 10.0], np.float32)),
        ),
        disable_env_checker=True,
    )
    gymnasium.register(
        id="TestDictObs-v0",
        entry_point=lambda **kw: _ProbeEnv(spaces.Dict({"a": spaces.Discrete(2)}), spaces.Discrete(2)),
        disable_env_checker=True,
    )
    _REGISTERED = True


def _probe(env: GymEnv, k: int = 0) -> _ProbeEnv:
    return env.gym_envs[k].unwrapped


def test_cartpole_spec_and_terminal_episodes() -> None:
    env = GymEnv("CartPole-v1", agents_per_env=4, seed=0)
    assert list(env.behavior_specs) == ["CartPole-v1"] and env.behavior_name == "CartPole-v1"
    spec = env.behavior_specs["CartPole-v1"]
    assert spec.observation_specs[0].shape == (4,) and spec.observation_specs[0].kind == ObservationKind.VECTOR
    assert spec.action_spec.discrete_branches == (2,) and spec.action_spec.continuous_size == 0
    env.reset()
    decision, terminal = env.get_steps("CartPole-v1")
    assert decision.obs[0].dtype == np.float32 and decision.obs[0].shape == (4, 4)
    assert decision.agent_id.tolist() == [0, 1, 2, 3] and len(terminal) == 0
    returns, interrupted = run_episodes(env, random_policy(env, 0), 200)
    assert len(returns) > 10 and not any(interrupted)  # random CartPole falls: true terminals
    assert all(r >= 1.0 for r in returns)  # +1 per step including the last
    env.close()
    env.close()


def test_cartpole_matches_raw_gymnasium_exactly() -> None:
    n, steps = 3, 150
    ours = GymEnv("CartPole-v1", agents_per_env=n, seed=11)
    raw = [gymnasium.make("CartPole-v1") for _ in range(n)]
    ours.reset()
    raw_obs = [raw[k].reset(seed=11 + k)[0] for k in range(n)]
    rng = np.random.default_rng(0)
    episodes = 0
    for _ in range(steps):
        decision, _ = ours.get_steps("CartPole-v1")
        np.testing.assert_array_equal(decision.obs[0], np.array(raw_obs, np.float32))
        actions = rng.integers(0, 2, size=(n, 1))
        ours.set_actions("CartPole-v1", ActionTuple(discrete=actions))
        ours.step()
        decision, terminal = ours.get_steps("CartPole-v1")
        final_obs, final_flags = [], []
        for k in range(n):
            obs, reward, term, trunc, _ = raw[k].step(int(actions[k, 0]))
            if term or trunc:
                final_obs.append(obs)
                final_flags.append(bool(trunc and not term))
                obs, _ = raw[k].reset()
            else:
                assert decision.reward[k] == reward
            raw_obs[k] = obs
        assert len(terminal) == len(final_obs)
        if final_obs:  # terminal rows come in copy order
            np.testing.assert_array_equal(terminal.obs[0], np.array(final_obs, np.float32))
            assert terminal.interrupted.tolist() == final_flags
            episodes += len(final_obs)
    assert episodes >= 5
    ours.close()


def test_truncation_is_interrupted_with_new_agent_id() -> None:
    env = GymEnv("CartPole-v1", agents_per_env=2, seed=0, max_episode_steps=3)
    env.reset()
    ids = env.get_steps("CartPole-v1")[0].agent_id.tolist()
    for _ in range(3):
        env.set_actions("CartPole-v1", ActionTuple(discrete=np.array([[0], [1]])))
        env.step()
    decision, terminal = env.get_steps("CartPole-v1")
    assert terminal.interrupted.tolist() == [True, True]
    assert terminal.agent_id.tolist() == ids and terminal.reward.tolist() == [1.0, 1.0]
    assert decision.agent_id.tolist() == [2, 3] and decision.reward.tolist() == [0.0, 0.0]


def test_pendulum_rescales_and_clips_continuous_actions() -> None:
    env = GymEnv("Pendulum-v1", agents_per_env=4, seed=0)
    spec = env.behavior_specs["Pendulum-v1"]
    assert spec.action_spec.continuous_size == 1 and spec.observation_specs[0].shape == (3,)
    env.reset()
    env.set_actions("Pendulum-v1", ActionTuple(continuous=np.array([[1.0], [-1.0], [0.25], [7.0]])))
    env.step()
    received = [float(e.unwrapped.last_u) for e in env.gym_envs]
    assert received == pytest.approx([2.0, -2.0, 0.5, 2.0])
    # Pendulum never terminates: its 200-step limit is an interruption.
    for _ in range(199):
        env.step()
    decision, terminal = env.get_steps("Pendulum-v1")
    assert terminal.interrupted.tolist() == [True] * 4 and len(decision) == 4


def test_image_observations_become_visual_in_unit_range() -> None:
    _register()
    env = GymEnv("TestImage-v0", agents_per_env=2, seed=0)
    spec = env.behavior_specs["TestImage-v0"]
    assert spec.observation_specs[0].kind == ObservationKind.VISUAL
    assert spec.observation_specs[0].shape == (6, 5, 3)
    assert spec.action_spec.discrete_branches == (3,)
    env.reset()
    env.set_actions("TestImage-v0", ActionTuple(discrete=np.array([[2], [0]])))
    env.step()
    decision, _ = env.get_steps("TestImage-v0")
    assert decision.obs[0].dtype == np.float32
    np.testing.assert_allclose(decision.obs[0], 37 / 255.0, rtol=1e-6)
    assert _probe(env, 0).received == [2] and _probe(env, 1).received == [0]
    for _ in range(3):
        env.step()
    decision, terminal = env.get_steps("TestImage-v0")
    assert terminal.interrupted.tolist() == [False, False]  # terminated at t=4
    np.testing.assert_allclose(terminal.obs[0], (4 * 37 % 256) / 255.0, rtol=1e-6)
    assert terminal.reward.tolist() == [4.0, 4.0]
    np.testing.assert_allclose(decision.obs[0], 0.0)  # reset observation


def test_multidiscrete_actions_and_flattened_box_observations() -> None:
    _register()
    env = GymEnv("TestMultiDiscrete-v0", seed=0)
    spec = env.behavior_specs["TestMultiDiscrete-v0"]
    assert spec.action_spec.discrete_branches == (3, 4)
    assert spec.observation_specs[0].shape == (6,)
    env.reset()
    env.set_actions("TestMultiDiscrete-v0", ActionTuple(discrete=np.array([[2, 0]])))
    env.step()
    got = _probe(env).received[0]
    assert got.tolist() == [3, -2]  # start offsets [1, -2] added
    assert env.gym_envs[0].action_space.contains(got)


def test_discrete_observations_one_hot_and_unbounded_box_passthrough() -> None:
    _register()
    env = GymEnv("TestUnbounded-v0", seed=0)
    spec = env.behavior_specs["TestUnbounded-v0"]
    assert spec.observation_specs[0].shape == (5,) and spec.action_spec.continuous_size == 2
    env.reset()
    env.set_actions("TestUnbounded-v0", ActionTuple(continuous=np.array([[3.5, 0.5]])))
    env.step()
    assert _probe(env).received[0].tolist() == pytest.approx([3.5, 7.5])
    assert env.get_steps("TestUnbounded-v0")[0].obs[0].tolist() == [[0, 1, 0, 0, 0]]


def test_frozenlake_discrete_obs_is_one_hot() -> None:
    env = GymEnv("FrozenLake-v1", seed=0)
    env.reset()
    obs = env.get_steps("FrozenLake-v1")[0].obs[0]
    assert obs.shape == (1, 16) and obs[0, 0] == 1.0 and obs.sum() == 1.0


def test_unsupported_spaces_raise_env_error() -> None:
    _register()
    with pytest.raises(EnvError, match="observation space"):
        GymEnv("TestDictObs-v0")


def test_same_seed_same_trajectories_different_seed_differs() -> None:
    def trace(seed: int) -> np.ndarray:
        env = GymEnv("CartPole-v1", agents_per_env=2, seed=seed)
        env.reset()
        policy = random_policy(env, 5)
        out = []
        for _ in range(60):
            decision, _ = env.get_steps("CartPole-v1")
            out.append(decision.obs[0])
            env.set_actions("CartPole-v1", policy("CartPole-v1", decision))
            env.step()
        return np.stack(out)

    np.testing.assert_array_equal(trace(3), trace(3))
    assert not np.array_equal(trace(3), trace(4))


def test_returned_arrays_are_not_reused() -> None:
    env = GymEnv("CartPole-v1", agents_per_env=2, seed=0)
    env.reset()
    first = env.get_steps("CartPole-v1")[0]
    kept = first.obs[0].copy()
    env.step()
    np.testing.assert_array_equal(first.obs[0], kept)
