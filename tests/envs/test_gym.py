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


# --------------------------------------------------------------------------- non-finite values
class _NonFiniteEnv(gymnasium.Env):
    """Float observations of 0.5; at step ``bad_step`` (0: the reset) the copy reset with
    seed ``bad_seed`` returns ``value`` in its observation (or its reward, ``in_reward``)."""

    metadata: dict = {"render_modes": []}

    def __init__(self, bad_step: int = 2, bad_seed: int = 0, value: float = float("nan"),
                 in_reward: bool = False, terminate_at: int = 0, fill: float = 0.5) -> None:
        self.observation_space = spaces.Box(-np.inf, np.inf, (3,), np.float32)
        self.action_space = spaces.Discrete(2)
        self.bad_step, self.bad_seed, self.value = bad_step, bad_seed, value
        self.in_reward, self.terminate_at, self.fill = in_reward, terminate_at, fill
        self.seed_given: Optional[int] = None
        self.t = 0

    def _obs(self) -> np.ndarray:
        obs = np.full(3, self.fill, np.float32)
        if self.t == self.bad_step and self.seed_given == self.bad_seed and not self.in_reward:
            obs[1] = self.value
        return obs

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None) -> Any:
        super().reset(seed=seed)
        if seed is not None:
            self.seed_given = seed
        self.t = 0
        return self._obs(), {}

    def step(self, action: Any) -> Any:
        self.t += 1
        bad = self.in_reward and self.t == self.bad_step and self.seed_given == self.bad_seed
        return self._obs(), self.value if bad else 0.0, self.t == self.terminate_at, False, {}


# Registered on import, so that a worker process can make it as gym:test_gym:TestNonFinite-v0.
if "TestNonFinite-v0" not in gymnasium.registry:
    gymnasium.register(id="TestNonFinite-v0", entry_point=_NonFiniteEnv, disable_env_checker=True)


def _step_until_error(env: GymEnv, steps: int) -> None:
    env.reset()
    for _ in range(steps):
        env.step()


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"bad_step": 2}, "non-finite observation: nan in observation 'obs' of agent 0 (copy 0) after a step"),
        ({"bad_step": 0, "bad_seed": 1, "value": float("-inf")},
         "non-finite observation: -inf in observation 'obs' of agent 1 (copy 1) after a reset"),
        ({"bad_step": 3, "bad_seed": 1, "value": float("inf"), "in_reward": True},
         "non-finite reward: inf of agent 1 (copy 1) after a step"),
        ({"bad_step": 2, "bad_seed": 1, "terminate_at": 2},
         "non-finite observation: nan in observation 'obs' of agent 1 (copy 1) after the last step of an episode"),
        ({"bad_step": 2, "terminate_at": 2, "in_reward": True},
         "non-finite reward: nan of agent 0 (copy 0) after the last step of an episode"),
    ],
)
def test_a_non_finite_observation_or_reward_is_reported_as_what_it_is(kwargs: Any, message: str) -> None:
    # It used to reach the policy silently; NaN logits then sampled action 2 of Discrete(2),
    # which the env rejected: the report blamed the action.
    env = GymEnv("TestNonFinite-v0", agents_per_env=2, seed=0, **kwargs)
    with pytest.raises(EnvError) as info:
        _step_until_error(env, 4)
    assert str(info.value) == f"gym:TestNonFinite-v0: the environment returned a {message}"


def test_large_finite_values_are_accepted() -> None:
    env = GymEnv("TestNonFinite-v0", agents_per_env=2, seed=0, bad_step=-1, fill=3e38)
    _step_until_error(env, 3)  # 6 x 3e38 overflows a float32 sum: still no error
    assert env.get_steps("TestNonFinite-v0")[0].obs[0][0, 0] == np.float32(3e38)


def test_managers_report_a_nan_observation_naming_env_and_worker() -> None:
    from envs.managers.in_process import InProcessEnvManager
    from envs.managers.subprocess import SubprocessEnvManager
    from envs.exceptions import EnvWorkerError

    manager = InProcessEnvManager("gym:TestNonFinite-v0", {"bad_step": 1, "bad_seed": 1}, num_envs=2, seed=0)
    manager.reset()
    with pytest.raises(EnvWorkerError) as info:
        manager.step([{}, {}])
    assert str(info.value) == (
        "env 'gym:TestNonFinite-v0' worker 1: the environment returned a non-finite observation: "
        "nan in observation 'obs' of agent 0 (copy 0) after a step"
    )
    # A worker process imports this module to register the id (gym:<module>:<id>).
    env_id = "gym:test_gym:TestNonFinite-v0"
    with SubprocessEnvManager(env_id, {"bad_step": 1, "bad_seed": 1}, num_envs=2, seed=0) as workers:
        workers.reset()
        with pytest.raises(EnvWorkerError) as info:
            workers.step([{}, {}])
    assert str(info.value) == (
        f"env {env_id!r} worker 1: the environment returned a non-finite observation: "
        "nan in observation 'obs' of agent 0 (copy 0) after a step"
    )


# --------------------------------------------------------------------------- gym:<module>:<id>
@pytest.mark.parametrize(
    "env_id, message",
    [
        ("gym:no_such_module_xyz:Foo-v0",
         "gym:no_such_module_xyz:Foo-v0: no module named 'no_such_module_xyz' to import for env 'Foo-v0' "
         "(is it installed, or on PYTHONPATH?)"),
        ("gym:envs.no_such_module:Foo-v0",
         "gym:envs.no_such_module:Foo-v0: no module named 'envs.no_such_module' to import for env 'Foo-v0' "
         "(is it installed, or on PYTHONPATH?)"),
        ("gym:json:Foo-v0",
         "gym:json:Foo-v0: module 'json' was imported but registered no Gymnasium id 'Foo-v0' "
         "(Environment `Foo` doesn't exist.)"),
    ],
)
def test_gym_module_errors_are_one_line_naming_module_and_id(env_id: str, message: str) -> None:
    from envs.registry import make_env

    with pytest.raises(EnvError) as info:
        make_env(env_id, None, 0)
    assert str(info.value) == message


def test_a_module_that_fails_to_import_is_one_line(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from envs.registry import make_env

    (tmp_path / "broken_envs_xyz.py").write_text("import json\nraise RuntimeError('no licence\\nfound')\n")
    (tmp_path / "needs_dep_xyz.py").write_text("import missing_dependency_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(EnvError) as info:
        make_env("gym:broken_envs_xyz:Foo-v0", None, 0)
    assert str(info.value) == (
        "gym:broken_envs_xyz:Foo-v0: importing module 'broken_envs_xyz' for env 'Foo-v0' failed: "
        "RuntimeError: no licence found"
    )
    with pytest.raises(EnvError) as info:
        make_env("gym:needs_dep_xyz:Foo-v0", None, 0)
    assert str(info.value) == (
        "gym:needs_dep_xyz:Foo-v0: importing module 'needs_dep_xyz' for env 'Foo-v0' failed: "
        "ModuleNotFoundError: No module named 'missing_dependency_xyz'"
    )


def test_missing_gym_module_through_the_managers_is_the_same_line() -> None:
    from envs.managers import make_env_manager

    line = ("gym:no_such_module_xyz:Foo-v0: no module named 'no_such_module_xyz' to import for env 'Foo-v0' "
            "(is it installed, or on PYTHONPATH?)")
    for num_envs in (1, 2):
        with pytest.raises(EnvError) as info:
            make_env_manager("gym:no_such_module_xyz:Foo-v0", None, num_envs, 1, 0)
        assert str(info.value) == line
