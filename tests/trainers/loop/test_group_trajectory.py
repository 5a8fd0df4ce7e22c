"""Trajectories keep the group (MA-POCA): per step the groupmates' observations and actions,
the group reward, the mates' next observations and ``all_done`` at the end; an agent that
finishes early leaves its mates' statuses but its own last trajectory sees them; agents
in no group are untouched."""
from typing import List

import numpy as np

from envs.base_env import ActionSpec, BehaviorSpec, DecisionSteps, ObservationSpec, TerminalSteps
from trainers.loop.trajectory import AgentProcessor, Trajectory

SPEC = BehaviorSpec((ObservationSpec((1,)),), ActionSpec(1, (3,)))


def decision(ids, obs, rewards, gids=None, grew=None):
    n = len(ids)
    return DecisionSteps(
        [np.array(obs, np.float32).reshape(-1, 1)], np.array(rewards, np.float32), np.array(ids, np.int32),
        group_id=None if gids is None else np.array(gids, np.int32),
        group_reward=None if grew is None else np.full(n, grew, np.float32),
    )


def terminal(ids, obs, rewards, gids=None, grew=None):
    n = len(ids)
    return TerminalSteps(
        [np.array(obs, np.float32).reshape(-1, 1)], np.array(rewards, np.float32), np.zeros(n, bool),
        np.array(ids, np.int32),
        group_id=None if gids is None else np.array(gids, np.int32),
        group_reward=None if grew is None else np.full(n, grew, np.float32),
    )


def act(proc, dec):
    """Agent ``a`` at observation ``x`` takes continuous ``x + 0.5`` and discrete ``a % 3``."""
    n = len(dec)
    proc.add_actions(0, dec, [o.copy() for o in dec.obs], dec.obs[0] + 0.5,
                     (dec.agent_id % 3).reshape(n, 1).astype(np.int32), None, np.zeros(n, np.float32))


def step(proc, dec, term=None) -> List[Trajectory]:
    """The controller's order: terminal steps, decision steps, then actions."""
    out: List[Trajectory] = []
    if term is not None:
        out += proc.add_terminal(0, term)[0]
    out += proc.add_decision(0, dec)
    if len(dec):
        act(proc, dec)
    return out


def test_groupmates_statuses_rewards_and_early_finisher():
    """Agents 1, 2, 3 in group 7: obs = 10 * id + t. Agent 3's episode ends after its second
    step; 1 and 2 go on for four steps, then end together."""
    proc = AgentProcessor(SPEC, time_horizon=100)
    out: List[Trajectory] = []
    ids = [1, 2, 3]
    out += step(proc, decision(ids, [10, 20, 30], [0, 0, 0], [7, 7, 7]))
    out += step(proc, decision(ids, [11, 21, 31], [1, 2, 3], [7, 7, 7], grew=0.5))
    # t = 2: agent 3 ends (its reward 4), 1 and 2 decide.
    out += step(proc, decision([1, 2], [12, 22], [1, 2], [7, 7], grew=0.25), terminal([3], [32], [4.0], [7], grew=0.25))
    assert [t.agent for t in out] == [(0, 3)]  # returned by add_decision, after every status
    early = out[0]
    g = early.group
    assert g is not None and g.group_id == 7 and early.done
    np.testing.assert_array_equal(early.rewards, [3, 4])
    np.testing.assert_array_equal(g.group_reward, [0.5, 0.25])
    np.testing.assert_array_equal(g.present, [[1, 1], [1, 1]])
    # Each step: the mates' observations when they acted on that step, their actions.
    np.testing.assert_array_equal(np.sort(g.obs[0][:, :, 0], axis=1), [[10, 20], [11, 21]])
    np.testing.assert_array_equal(np.sort(g.continuous_action[:, :, 0], axis=1), [[10.5, 20.5], [11.5, 21.5]])
    np.testing.assert_array_equal(np.sort(g.discrete_action[:, :, 0], axis=1), [[1, 2], [1, 2]])
    np.testing.assert_array_equal(g.mate_rewards, [1 + 2, 1 + 2])
    # The mates play on: the early finisher bootstraps from the group.
    assert not g.all_done
    np.testing.assert_array_equal(np.sort(g.next_obs[0][:, 0]), [12, 22])

    out = step(proc, decision([1, 2], [13, 23], [1, 2], [7, 7]))
    out += step(proc, decision([1, 2], [14, 24], [1, 2], [7, 7], grew=1.0))
    out += step(proc, decision([], [], []), terminal([1, 2], [15, 25], [5.0, 6.0], [7, 7], grew=2.0))
    assert sorted(t.agent for t in out) == [(0, 1), (0, 2)]
    one = next(t for t in out if t.agent == (0, 1))
    g = one.group
    assert g is not None and len(one) == 5 and g.num_mates == 2
    # Agent 3 is a mate for the first two steps only (it left with its terminal step).
    np.testing.assert_array_equal(g.present, [[1, 1], [1, 1], [1, 0], [1, 0], [1, 0]])
    np.testing.assert_array_equal(g.obs[0][:, 0, 0], [20, 21, 22, 23, 24])  # agent 2
    np.testing.assert_array_equal(g.obs[0][:2, 1, 0], [30, 31])  # agent 3
    np.testing.assert_array_equal(g.obs[0][2:, 1, 0], [0, 0, 0])  # absent: zeros
    np.testing.assert_array_equal(g.group_reward, [0.5, 0.25, 0, 1.0, 2.0])
    np.testing.assert_array_equal(g.mate_rewards, [2 + 3, 2 + 4, 2, 2, 6])
    assert g.all_done  # the whole group ended with this step
    np.testing.assert_array_equal(g.next_obs[0][:, 0], [25])
    assert proc.agent_keys == [] and not proc._status and not proc._current_obs


def test_time_horizon_cut_keeps_group_data_per_trajectory():
    proc = AgentProcessor(SPEC, time_horizon=2)
    out: List[Trajectory] = []
    for t in range(5):
        out += step(proc, decision([1, 2], [10 + t, 20 + t], [0, 0], [3, 3], grew=float(t)))
    assert [t.agent for t in out] == [(0, 1), (0, 2), (0, 1), (0, 2)]
    second = out[2]
    assert second.group is not None and not second.done
    np.testing.assert_array_equal(second.group.obs[0][:, 0, 0], [22, 23])
    np.testing.assert_array_equal(second.group.group_reward, [3.0, 4.0])
    np.testing.assert_array_equal(second.group.next_obs[0][:, 0], [24])


def test_agents_without_group_are_untouched():
    """Ungrouped agents beside a group get exactly the trajectories a processor fed only
    them gives (the pre-group code path), with no group data."""
    mixed = AgentProcessor(SPEC, time_horizon=3)
    alone = AgentProcessor(SPEC, time_horizon=3)
    got_mixed: List[Trajectory] = []
    got_alone: List[Trajectory] = []
    for t in range(7):
        term = terminal([4, 5], [40 + t, 50 + t], [9, 9], [0, 2]) if t == 5 else None
        got_mixed += step(mixed, decision([1, 4, 5], [10 + t, 40 + t, 50 + t], [t, -t, 2 * t], [0, 0, 2], grew=1.0), term)
        term_alone = terminal([4], [40 + t], [9]) if t == 5 else None
        got_alone += step(alone, decision([1, 4], [10 + t, 40 + t], [t, -t]), term_alone)
    ungrouped = [t for t in got_mixed if t.agent != (0, 5)]
    assert [t.agent for t in ungrouped] == [t.agent for t in got_alone] and len(got_alone) >= 3
    for a, b in zip(ungrouped, got_alone):
        assert a.group is None and b.group is None
        for field in ("continuous_action", "discrete_action", "log_probs", "rewards"):
            np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
        np.testing.assert_array_equal(a.obs[0], b.obs[0])
        np.testing.assert_array_equal(a.next_obs[0], b.next_obs[0])
        assert (a.done, a.interrupted) == (b.done, b.interrupted)
    assert any(t.group is not None for t in got_mixed if t.agent == (0, 5))


def test_end_episodes_forgets_groups():
    proc = AgentProcessor(SPEC, time_horizon=10)
    step(proc, decision([1, 2], [1, 2], [0, 0], [1, 1]))
    step(proc, decision([1, 2], [1, 2], [0, 0], [1, 1]))
    assert proc._status
    proc.end_episodes()
    assert not proc._status and not proc._current_obs and proc.agent_keys == []
