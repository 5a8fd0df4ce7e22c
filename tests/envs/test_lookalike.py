"""`LookAlike`: declared spaces per behavior, the sign task's rewards, seeding, bad input."""
from __future__ import annotations

import numpy as np
import pytest

from env_test_utils import random_policy, run_episodes
from envs.base_env import ActionTuple, ObservationKind
from envs.builtin import LookAlike
from envs.exceptions import EnvError
from envs.registry import make_env

# Strikers Vs. Goalie (ML-Agents' Learning-Environment-Examples.md): two behaviors with
# their own observation sizes, three discrete branches of 3 each.
STRIKERS = {
    "Striker?team=0": {"vector": [294], "discrete": [3, 3, 3]},
    "Goalie?team=1": {"vector": [738], "discrete": [3, 3, 3]},
}


def test_each_behavior_has_its_declared_spaces() -> None:
    env = LookAlike(
        {**STRIKERS, "Camera": {"vector": [4], "visual": [[8, 6, 3]], "continuous": 2, "discrete": [5]}},
        num_agents=2,
    )
    specs = env.behavior_specs
    assert [o.shape for o in specs["Striker?team=0"].observation_specs] == [(294,)]
    assert specs["Goalie?team=1"].action_spec.discrete_branches == (3, 3, 3)
    camera = specs["Camera"]
    assert [(o.shape, o.kind) for o in camera.observation_specs] == [
        ((4,), ObservationKind.VECTOR),
        ((8, 6, 3), ObservationKind.VISUAL),
    ]
    assert (camera.action_spec.continuous_size, camera.action_spec.discrete_branches) == (2, (5,))
    env.reset()
    ids = np.concatenate([env.get_steps(name)[0].agent_id for name in specs])
    assert len(set(ids.tolist())) == 6  # agent ids unique across behaviors (memories are keyed by them)
    for name, spec in specs.items():
        decision, _ = env.get_steps(name)
        assert [o.shape[1:] for o in decision.obs] == [o.shape for o in spec.observation_specs]


@pytest.mark.parametrize("declared", [{"vector": [3], "continuous": 2}, {"vector": [3], "discrete": [2, 4]}])
def test_expert_returns_one_its_opposite_minus_one_random_about_zero(declared) -> None:
    env = LookAlike({"B": declared}, num_agents=4, episode_length=5, seed=3)
    env.reset()
    returns, interrupted = run_episodes(env, env.expert_action, 50)
    assert len(returns) == 40 and not any(interrupted)
    np.testing.assert_allclose(returns, 1.0, atol=1e-6)

    def wrong(name, decision):
        right = env.expert_action(name, decision)
        return ActionTuple(-right.continuous, 1 - right.discrete)

    env.reset()
    returns, _ = run_episodes(env, wrong, 50)
    np.testing.assert_allclose(returns, -1.0, atol=1e-6)
    env.reset()
    returns, _ = run_episodes(env, random_policy(env, seed=1), 2000)
    assert abs(np.mean(returns)) < 0.05  # 1600 episodes: std of the mean ~0.011


def test_the_sign_is_shown_in_the_first_vector_entry_or_the_pixels() -> None:
    env = LookAlike({"V": {"vector": [2, 3], "discrete": [2]}, "P": {"visual": [[2, 2, 1]], "discrete": [2]}}, seed=5)
    env.reset()
    for _ in range(10):
        for name in ("V", "P"):
            decision, _ = env.get_steps(name)
            sign = env.expert_action(name, decision).discrete[:, 0] * 2 - 1
            if name == "V":
                assert decision.obs[0][:, 0].tolist() == sign.tolist()
                assert np.abs(decision.obs[1]).max() < 1.0  # noise only
            else:
                assert np.all(decision.obs[0] == ((sign + 1) / 2)[:, None, None, None])
            env.set_actions(name, ActionTuple(discrete=np.zeros((1, 1), np.int32)))
        env.step()


def test_same_seed_same_episodes() -> None:
    def trace(seed):
        env = make_env("builtin:LookAlike", {"behaviors": STRIKERS, "episode_length": 3}, seed)
        env.reset()
        out = []
        for _ in range(7):
            for name in STRIKERS:
                decision, _ = env.get_steps(name)
                out.append(decision.obs[0].ravel().copy())
            env.step()
        return np.concatenate(out)

    np.testing.assert_array_equal(trace(4), trace(4))
    assert not np.array_equal(trace(4), trace(5))


def test_declared_parameters_are_accepted_others_refused() -> None:
    env = LookAlike({"3DBall": {"vector": [8], "continuous": 2}}, parameters=["mass", "gravity"])
    env.set_env_parameters({"mass": 1.0})
    assert env.env_parameters == {"mass": 1.0}
    with pytest.raises(EnvError, match="unknown environment parameter 'scale' \\(accepted: mass, gravity\\)"):
        env.set_env_parameters({"scale": 2.0})


@pytest.mark.parametrize(
    "behaviors,message",
    [
        ({}, "behaviors must be a non-empty mapping"),
        ({"A": {"vector": [3]}}, "behaviors.A needs an action"),
        ({"A": {"discrete": [3]}}, "behaviors.A needs an observation"),
        ({"A": {"vector": [3], "discrete": [1]}}, r"behaviors.A.discrete\[0\] must be an integer >= 2, got 1"),
        ({"A": {"visual": [[8, 8]], "discrete": [2]}}, r"behaviors.A.visual\[0\] must be \[H, W, C\]"),
        ({"A": {"vector": [3], "actions": 2}}, "behaviors.A.actions is not accepted"),
        ({"A": {"vector": "8", "continuous": 1}}, "behaviors.A.vector must be a list of integers"),
    ],
)
def test_bad_declarations_are_one_line(behaviors, message) -> None:
    with pytest.raises(EnvError, match=message):
        LookAlike(behaviors)
