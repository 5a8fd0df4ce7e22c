"""Trajectory assembly from batched steps: rewards credited to the right step, cuts at
time_horizon, terminal vs interrupted, new agent ids after a reset."""
import numpy as np

from envs.base_env import ActionSpec, BehaviorSpec, DecisionSteps, ObservationSpec, TerminalSteps
from trainers.loop.trajectory import AgentProcessor

SPEC = BehaviorSpec((ObservationSpec((1,)),), ActionSpec(1, ()))


def decision(ids, obs, rewards):
    return DecisionSteps([np.array(obs, np.float32).reshape(-1, 1)], np.array(rewards, np.float32), np.array(ids, np.int32))


def terminal(ids, obs, rewards, interrupted):
    return TerminalSteps([np.array(obs, np.float32).reshape(-1, 1)], np.array(rewards, np.float32),
                         np.array(interrupted, bool), np.array(ids, np.int32))


def act(proc, dec, value):
    n = len(dec)
    proc.add_actions(0, dec, [o.copy() for o in dec.obs], np.full((n, 1), value, np.float32),
                     np.zeros((n, 0), np.int32), None, np.full(n, -1.0, np.float32))


def test_rewards_are_credited_to_the_action_that_earned_them_and_cut_at_horizon():
    proc = AgentProcessor(SPEC, time_horizon=3)
    out = []
    for t in range(7):
        dec = decision([5], [t], [10.0 * t])
        out += proc.add_decision(0, dec)
        act(proc, dec, t)
    assert [len(tr) for tr in out] == [3, 3]
    first, second = out
    np.testing.assert_array_equal(first.obs[0][:, 0], [0, 1, 2])
    np.testing.assert_array_equal(first.rewards, [10, 20, 30])  # reward of step t arrives at t+1
    np.testing.assert_array_equal(first.continuous_action[:, 0], [0, 1, 2])
    np.testing.assert_array_equal(first.next_obs[0], [[3]])  # bootstrap observation
    assert not first.done and first.bootstrap
    np.testing.assert_array_equal(second.obs[0][:, 0], [3, 4, 5])


def test_terminal_and_interrupted_episodes():
    proc = AgentProcessor(SPEC, time_horizon=100)
    for agent, interrupted in ((1, False), (2, True)):
        dec = decision([agent], [0.5], [0.0])
        proc.add_decision(0, dec)
        act(proc, dec, 0.1)
        dec = decision([agent], [0.6], [1.0])
        proc.add_decision(0, dec)
        act(proc, dec, 0.2)
        trajs, episodes = proc.add_terminal(0, terminal([agent], [0.9], [5.0], [interrupted]))
        (traj,) = trajs
        np.testing.assert_array_equal(traj.rewards, [1.0, 5.0])
        np.testing.assert_allclose(traj.next_obs[0], [[0.9]])
        assert traj.done and traj.interrupted == interrupted
        assert traj.bootstrap == interrupted  # only a time limit bootstraps
        assert episodes[0].reward == 6.0 and episodes[0].length == 2
    assert proc.agent_keys == []


def test_many_agents_and_workers_are_kept_apart():
    proc = AgentProcessor(SPEC, time_horizon=2)
    out = []
    for t in range(4):
        for worker in (0, 1):
            dec = decision([0, 1], [worker * 10 + t, worker * 10 + t + 100], [t, -t])
            out += proc.add_decision(worker, dec)
            proc.add_actions(worker, dec, [o.copy() for o in dec.obs], np.zeros((2, 1), np.float32),
                             np.zeros((2, 0), np.int32), None, np.zeros(2, np.float32))
    assert len(out) == 4
    keys = sorted(tr.agent for tr in out)
    assert keys == [(0, 0), (0, 1), (1, 0), (1, 1)]
    for tr in out:
        worker, agent = tr.agent
        np.testing.assert_array_equal(tr.obs[0][:, 0], [worker * 10 + agent * 100, worker * 10 + agent * 100 + 1])
        np.testing.assert_array_equal(tr.rewards, [1, 2] if agent == 0 else [-1, -2])
