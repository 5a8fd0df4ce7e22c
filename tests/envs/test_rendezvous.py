"""`builtin:Rendezvous`: closed forms of tiny seeded episodes, the group fields, scripted
against random play, bad arguments."""
from __future__ import annotations

from typing import Tuple

import numpy as np
import pytest

from envs.base_env import ActionTuple, DecisionSteps
from envs.builtin.rendezvous import OBS_SIZE, Rendezvous, group_ends, play
from envs.exceptions import EnvError
from envs.registry import make_env

NAME = "Rendezvous"


def _act(env: Rendezvous, moves: np.ndarray) -> None:
    env.set_actions(NAME, ActionTuple(np.zeros((len(moves), 0), np.float32), np.asarray(moves)[:, None]))
    env.step()


def _cells(d: DecisionSteps, length: int) -> Tuple[np.ndarray, np.ndarray]:
    """(my cell, meeting point) of each row, read back from the observation."""
    scale = length - 1
    return np.rint(d.obs[0][:, 0] * scale).astype(int), np.rint(d.obs[0][:, 1] * scale).astype(int)


def test_expert_episode_members_leave_as_they_arrive_and_the_last_ones_get_the_group_reward() -> None:
    length = 7
    env = Rendezvous(num_agents=3, group_size=3, length=length, max_steps=20, seed=5)
    env.reset()
    d, t = env.get_steps(NAME)
    assert len(t) == 0 and d.obs[0].shape == (3, OBS_SIZE)
    np.testing.assert_array_equal(d.agent_id, [0, 1, 2])
    np.testing.assert_array_equal(d.group_id, [1, 1, 1])
    np.testing.assert_array_equal(d.group_reward, [0, 0, 0])
    pos, goal = _cells(d, length)
    assert len(set(goal)) == 1 and np.all(pos != goal)
    np.testing.assert_allclose(d.obs[0][:, 2], (goal - pos) / (length - 1), atol=1e-6)
    np.testing.assert_allclose(d.obs[0][:, 3:], [[1.0, 1.0]] * 3)
    distance = np.abs(goal - pos)
    arrivals = {}  # agent id -> (step of arrival, group reward)
    for step in range(1, distance.max() + 1):
        _act(env, env.expert_action(NAME, d).discrete[:, 0])
        d, t = env.get_steps(NAME)
        assert not t.interrupted.any() and not t.reward.any() and not d.reward.any() and not d.group_reward.any()
        for agent, grew in zip(t.agent_id, t.group_reward):
            arrivals[int(agent)] = (step, float(grew))
        if step < distance.max():  # the group plays on without those that left
            assert sorted(d.agent_id) == sorted(a for a in range(3) if a not in arrivals)
            np.testing.assert_allclose(d.obs[0][:, 3], len(d) / 3)
            np.testing.assert_allclose(d.obs[0][:, 4], (20 - step) / 20)
    # Closed form: member i leaves after |goal - start_i| steps; the group reward (1) goes
    # to the members arriving in the last step only.
    assert arrivals == {i: (int(distance[i]), 1.0 if distance[i] == distance.max() else 0.0) for i in range(3)}
    np.testing.assert_array_equal(d.agent_id, [3, 4, 5])  # the group's next episode: new ids
    np.testing.assert_array_equal(d.group_id, [1, 1, 1])  # same group


def test_a_group_that_does_not_meet_in_time_fails_without_group_reward() -> None:
    env = Rendezvous(num_agents=6, group_size=3, length=5, max_steps=4, seed=0)
    env.reset()
    d, _ = env.get_steps(NAME)
    np.testing.assert_array_equal(d.group_id, [1, 1, 1, 2, 2, 2])
    for step in range(4):
        assert len(env.get_steps(NAME)[1]) == 0
        _act(env, np.ones(6, int))  # stay: nobody starts on the meeting point
    d, t = env.get_steps(NAME)
    np.testing.assert_array_equal(t.agent_id, range(6))
    np.testing.assert_array_equal(t.group_id, [1, 1, 1, 2, 2, 2])
    # A failure, not a cut: the step limit is part of the task (the clock is observed).
    assert not t.interrupted.any() and not t.group_reward.any() and not t.reward.any()
    np.testing.assert_allclose(t.obs[0][:, 4], 0.0)  # no step left
    assert group_ends(t).all()
    np.testing.assert_array_equal(d.agent_id, range(6, 12))


def test_seeded_and_random_play_is_worse_than_the_scripted_one() -> None:
    a, b = Rendezvous(seed=3), Rendezvous(seed=3)
    a.reset()
    b.reset()
    for _ in range(5):
        d = a.get_steps(NAME)[0]
        np.testing.assert_array_equal(d.obs[0], b.get_steps(NAME)[0].obs[0])
        _act(a, np.ones(len(d), int))
        _act(b, np.ones(len(d), int))
    # Defaults (12 agents, groups of 3, length 7, 20 steps), 2000 steps, env seed 1 and
    # random moves of seed 2: scripted play meets every time, random play about 1 in 4.
    expert, random = play(Rendezvous(seed=1), "expert", 2000), play(Rendezvous(seed=1), "random", 2000, seed=2)
    assert Rendezvous().optimal_return() == 1.0
    assert np.mean(expert) == 1.0 and len(expert) > 2000
    assert 0.15 < np.mean(random) < 0.4 and len(random) < len(expert) / 3


def test_shared_reward_copies_the_group_reward_into_each_members_own_reward() -> None:
    runs = []
    for shared in (False, True):
        env = Rendezvous(num_agents=6, group_size=3, seed=3, shared_reward=shared)
        env.reset()
        terminals = []
        for _ in range(12):
            d, _ = env.get_steps(NAME)
            _act(env, env.expert_action(NAME, d).discrete[:, 0])
            terminals.append(env.get_steps(NAME)[1])
        runs.append(terminals)
    assert sum(float(t.group_reward.sum()) for t in runs[1]) > 0
    for plain, shared_t in zip(*runs):  # same episodes; only the own reward differs
        np.testing.assert_array_equal(plain.agent_id, shared_t.agent_id)
        np.testing.assert_array_equal(plain.group_reward, shared_t.group_reward)
        assert not plain.reward.any()
        np.testing.assert_array_equal(shared_t.reward, shared_t.group_reward)
    with pytest.raises(EnvError, match="shared_reward must be true or false, got 'yes'"):
        make_env("builtin:Rendezvous", {"shared_reward": "yes"}, seed=0)


def test_bad_arguments_are_one_line() -> None:
    with pytest.raises(EnvError, match="num_agents must be a multiple of group_size=3, got 4"):
        make_env("builtin:Rendezvous", {"num_agents": 4}, seed=0)
    with pytest.raises(EnvError, match="length must be an integer >= 2"):
        make_env("builtin:Rendezvous", {"length": 1}, seed=0)
    env = make_env("builtin:Rendezvous", {"group_size": 2}, seed=0, agents_per_env=4)
    env.reset()
    assert len(env.get_steps(NAME)[0]) == 4
    with pytest.raises(ValueError, match="discrete actions must have shape"):
        env.set_actions(NAME, ActionTuple(np.zeros((3, 0)), np.zeros((3, 1))))
