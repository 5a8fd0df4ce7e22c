"""`Paddles`: the two-team game's spaces, results, egocentric views, skill, seeding, bad input."""
from __future__ import annotations

from typing import Callable, Dict, Tuple

import numpy as np
import pytest

from envs.base_env import ActionTuple, DecisionSteps, behavior_ids
from envs.builtin import Paddles
from envs.exceptions import EnvError
from envs.registry import make_env

Player = Callable[[Paddles, str, DecisionSteps, np.random.Generator], ActionTuple]


def expert(env: Paddles, name: str, decision: DecisionSteps, rng: np.random.Generator) -> ActionTuple:
    return env.expert_action(name, decision)


def random(env: Paddles, name: str, decision: DecisionSteps, rng: np.random.Generator) -> ActionTuple:
    return env.behavior_specs[name].action_spec.random_action(len(decision), rng)


def play(players: Tuple[Player, Player], games: int, seed: int = 0, **kwargs) -> Dict[str, np.ndarray]:
    """Every game's first result per side (rows are games: row i stays game slot i)."""
    env = Paddles(num_agents=games, seed=seed, **kwargs)
    env.reset()
    names = list(env.behavior_specs)
    rng = np.random.default_rng(seed)
    results = {n: np.full(games, np.nan) for n in names}
    while np.isnan(results[names[0]]).any():
        rows = {}
        for name, player in zip(names, players):
            decision, _ = env.get_steps(name)
            rows[name] = {a: i for i, a in enumerate(decision.agent_id.tolist())}
            env.set_actions(name, player(env, name, decision, rng))
        env.step()
        for name in names:
            _, terminal = env.get_steps(name)
            assert not terminal.interrupted.any()
            for agent, reward in zip(terminal.agent_id.tolist(), terminal.reward.tolist()):
                row = rows[name][agent]
                if np.isnan(results[name][row]):
                    results[name][row] = reward
    return results


def test_two_teams_of_one_behavior_with_the_game_spaces():
    env = Paddles(num_agents=3)
    assert list(env.behavior_specs) == ["Paddles?team=0", "Paddles?team=1"]
    assert behavior_ids(env.behavior_specs) == {"Paddles": ["Paddles?team=0", "Paddles?team=1"]}
    spec = env.behavior_specs["Paddles?team=0"]
    assert [o.shape for o in spec.observation_specs] == [(8,)]
    assert spec.action_spec.discrete_branches == (3,) and env.teams == [0, 1]
    env.reset()
    ids = np.concatenate([env.get_steps(n)[0].agent_id for n in env.behavior_specs])
    assert len(set(ids.tolist())) == 6


def test_a_unity_games_names_and_spaces_per_side():
    env = Paddles(behavior_names=["Striker?team=0", "Goalie?team=1"], vec_obs_size=[294, 738], discrete=[3, 3, 3])
    specs = env.behavior_specs
    assert specs["Striker?team=0"].observation_specs[0].shape == (294,)
    assert specs["Goalie?team=1"].observation_specs[0].shape == (738,)
    assert specs["Goalie?team=1"].action_spec.discrete_branches == (3, 3, 3)
    env.reset()
    obs = env.get_steps("Goalie?team=1")[0].obs[0]
    assert obs.shape == (1, 738) and not obs[:, 8:].any()  # zero-padded beyond the game's 8


def test_results_are_plus_one_minus_one_or_a_draw_on_the_last_step_only():
    env = Paddles(num_agents=20, seed=4, max_episode_steps=60)
    env.reset()
    rng = np.random.default_rng(0)
    names = list(env.behavior_specs)
    seen = set()
    for _ in range(300):
        for name in names:
            decision, _ = env.get_steps(name)
            env.set_actions(name, random(env, name, decision, rng))
        env.step()
        (d0, t0), (d1, t1) = (env.get_steps(n) for n in names)
        assert not d0.reward.any() and not d1.reward.any()  # nothing before the end
        np.testing.assert_array_equal(t0.reward, -t1.reward)  # zero-sum, game by game
        assert set(t0.reward.tolist()) <= {1.0, -1.0, 0.0}
        seen |= set(t0.reward.tolist())
        # A finished game's agents come back under new ids in the same rows.
        assert not set(t0.agent_id.tolist()) & set(d0.agent_id.tolist())
    assert {1.0, -1.0} <= seen


def test_a_game_that_lasts_max_episode_steps_is_a_draw():
    results = play((expert, expert), 50, max_episode_steps=30)
    assert (results["Paddles?team=0"] == 0.0).all() and (results["Paddles?team=1"] == 0.0).all()


def test_each_side_sees_the_game_from_its_own_line():
    env = Paddles(num_agents=5, seed=2)
    env.reset()
    rng = np.random.default_rng(1)
    for _ in range(7):
        for name in env.behavior_specs:
            decision, _ = env.get_steps(name)
            env.set_actions(name, random(env, name, decision, rng))
        env.step()
    left = env.get_steps("Paddles?team=0")[0].obs[0]
    right = env.get_steps("Paddles?team=1")[0].obs[0]
    np.testing.assert_allclose(right[:, 0], 1.0 - left[:, 0], atol=1e-6)  # distance from one's own line
    np.testing.assert_allclose(right[:, 2], -left[:, 2], atol=1e-6)  # speed away from oneself
    np.testing.assert_array_equal(right[:, [1, 3, 7]], left[:, [1, 3, 7]])
    np.testing.assert_array_equal(right[:, [4, 5]], left[:, [5, 4]])  # mine and theirs swapped
    np.testing.assert_allclose(left[:, 6], left[:, 1] - left[:, 4], atol=1e-6)


def test_skill_matters_following_the_ball_beats_a_random_player():
    # 400 games each way: the scripted follower wins about 96 %, random against random
    # about half, the follower against itself almost always draws.
    first = play((expert, random), 400, seed=1)["Paddles?team=0"]
    second = play((random, expert), 400, seed=2)["Paddles?team=1"]
    assert np.mean(first > 0) > 0.9 and np.mean(second > 0) > 0.9
    even = play((random, random), 400, seed=3)["Paddles?team=0"]
    assert 0.4 < np.mean(even > 0) < 0.6
    assert np.mean(play((expert, expert), 100, seed=4)["Paddles?team=0"] == 0.0) > 0.9


def test_the_first_action_moves_the_paddle_and_the_others_are_ignored():
    def moves(**kwargs):
        env = Paddles(**kwargs)
        env.reset()
        names = list(env.behavior_specs)
        spec = env.behavior_specs[names[0]].action_spec
        up = ActionTuple(np.ones((1, spec.continuous_size), np.float32),
                         np.tile(np.array([b - 1 for b in spec.discrete_branches], np.int32), (1, 1)))
        env.set_actions(names[0], up)
        env.step()
        return float(env.get_steps(names[0])[0].obs[0][0, 4]) - 0.5

    assert moves() == pytest.approx(0.05)  # branch of 3: value 2 is up
    assert moves(discrete=[2]) == pytest.approx(0.05)
    assert moves(continuous=2, discrete=[]) == pytest.approx(0.05)
    assert moves(discrete=[3, 3, 3]) == pytest.approx(0.05)


def test_the_same_seed_plays_the_same_games():
    a = play((random, random), 30, seed=7)
    b = play((random, random), 30, seed=7)
    for name in a:
        np.testing.assert_array_equal(a[name], b[name])


def test_the_registry_builds_it_from_env_args():
    env = make_env("builtin:Paddles", {"behavior_names": ["Tennis?team=0", "Tennis?team=1"], "vec_obs_size": 9,
                                       "continuous": 3, "discrete": []}, seed=3, agents_per_env=4)
    spec = env.behavior_specs["Tennis?team=1"]
    assert spec.action_spec.continuous_size == 3 and spec.observation_specs[0].shape == (9,)
    env.reset()
    assert len(env.get_steps("Tennis?team=0")[0]) == 4


@pytest.mark.parametrize("kwargs, message", [
    ({"behavior_names": ["A?team=0"]}, "must name two sides"),
    ({"vec_obs_size": 4}, "vec_obs_size must be an integer >= 8"),
    ({"vec_obs_size": [8, 8, 8]}, "an integer or a list of two"),
    ({"discrete": [1]}, "discrete must be an integer >= 2"),
    ({"discrete": [], "continuous": 0}, "needs an action"),
    ({"paddle_size": 0.9}, "paddle_size must be in"),
    ({"max_episode_steps": 0}, "max_episode_steps must be an integer >= 1"),
])
def test_bad_env_args_are_one_line(kwargs, message):
    with pytest.raises(EnvError, match=message) as info:
        Paddles(**kwargs)
    assert "\n" not in str(info.value)
