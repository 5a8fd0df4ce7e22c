"""Built-in envs: spec contracts, episode semantics, seeding, and scripted experts."""
from __future__ import annotations

from typing import Any, Dict

import numpy as np
import pytest

from env_test_utils import random_policy, run_episodes
from envs.base_env import ActionTuple, BaseEnv, ObservationKind
from envs.builtin import Chain, Memory, Simple
from envs.exceptions import EnvError

EXPERT_CASES = [
    (Simple, {}),
    (Simple, {"continuous": 0, "discrete": 1}),
    (Simple, {"continuous": 2, "discrete": 1, "num_visual": 1, "vis_obs_size": [8, 8, 1]}),
    (Simple, {"num_agents": 3, "behavior_names": ["A", "B"], "step_size": 0.1}),
    (Memory, {}),
    (Memory, {"continuous": 0, "discrete": 2, "num_agents": 2}),
    (Chain, {}),
    (Chain, {"length": 5, "one_hot": False, "num_agents": 4}),
]


@pytest.mark.parametrize("cls,kwargs", EXPERT_CASES)
def test_expert_reaches_optimal_return(cls: Any, kwargs: Dict[str, Any]) -> None:
    env = cls(seed=3, **kwargs)
    env.reset()
    returns, interrupted = run_episodes(env, env.expert_action, 120)
    assert len(returns) >= 4
    assert not any(interrupted)
    np.testing.assert_allclose(returns, env.optimal_return(), atol=1e-5)


def test_simple_optimal_return_is_about_one() -> None:
    assert Simple().optimal_return() == pytest.approx(1.02)  # 4 x -0.01 + 1.06
    # ML-Agents' SUCCESS_REWARD is 1.06 whatever the step size: 1 x -0.01 + 1.06 with 0.8
    # (2 steps); 10 x -0.01 + 1.06 with 0.1, whose 10 steps sum to 0.9999999999999999 in
    # float64, so the goal is reached on the 11th.
    assert Simple(step_size=0.8).optimal_return() == pytest.approx(1.05)
    assert Simple(step_size=0.1).optimal_return() == pytest.approx(0.96)
    assert Chain().optimal_return() == 1.0


def test_simple_spec_and_first_steps() -> None:
    env = Simple(continuous=2, discrete=1, num_vector=2, vec_obs_size=3, num_visual=1, vis_obs_size=(4, 5, 3),
                 num_agents=2, seed=0)
    spec = env.behavior_specs["Simple"]
    assert [o.shape for o in spec.observation_specs] == [(3,), (3,), (4, 5, 3)]
    assert [o.kind for o in spec.observation_specs] == [ObservationKind.VECTOR] * 2 + [ObservationKind.VISUAL]
    assert spec.action_spec.continuous_size == 2 and spec.action_spec.discrete_branches == (2,)
    env.reset()
    decision, terminal = env.get_steps("Simple")
    assert len(decision) == 2 and len(terminal) == 0
    assert decision.agent_id.dtype == np.int32 and list(decision.agent_id) == [0, 1]
    assert decision.reward.dtype == np.float32 and not decision.reward.any()
    for obs, o_spec in zip(decision.obs, spec.observation_specs):
        assert obs.dtype == np.float32 and obs.shape == (2,) + o_spec.shape
    goal = decision.obs[0][:, 0]
    assert set(goal) <= {-1.0, 1.0}
    np.testing.assert_array_equal(decision.obs[1][:, 0], goal)
    # Visual: every pixel is the goal value, as ML-Agents' `_make_obs`.
    np.testing.assert_array_equal(decision.obs[2], np.broadcast_to(goal[:, None, None, None], (2, 4, 5, 3)))
    assert decision.action_mask is None


def test_default_spec_is_ml_agents_simple_environment() -> None:
    # SimpleEnvironment's defaults: action_sizes (1, 0), one vector observation of size 1,
    # images VIS_OBS_SIZE (3, 20, 20) channels-first, i.e. (20, 20, 3) here.
    spec = Simple().behavior_specs["Simple"]
    assert [o.shape for o in spec.observation_specs] == [(1,)]
    assert spec.action_spec.continuous_size == 1 and spec.action_spec.discrete_branches == ()
    assert Simple(num_visual=1, num_vector=0).behavior_specs["Simple"].observation_specs[0].shape == (20, 20, 3)


def test_unit_visual_images_hold_goal_plus_one_over_two() -> None:
    env = Simple(num_agents=8, num_visual=1, vis_obs_size=(2, 2, 1), unit_visual=True, seed=0)
    env.reset()
    decision = env.get_steps("Simple")[0]
    goal = decision.obs[0][:, 0]
    assert set(goal) == {-1.0, 1.0}
    np.testing.assert_array_equal(decision.obs[1], np.broadcast_to(((goal + 1) / 2)[:, None, None, None], (8, 2, 2, 1)))
    with pytest.raises(EnvError, match="unit_visual"):
        Simple(unit_visual="yes")


def _positions(env: Simple, name: str = "Simple") -> list:
    return env._state[name].position.tolist()  # type: ignore[attr-defined]


def test_continuous_delta_is_the_action_clamped_to_step_size() -> None:
    """ML-Agents: ``_delta = clamp(_delta, -self.step_size, self.step_size)``: an action of
    0.5 with step_size 0.2 moves 0.2; a smaller action moves by itself."""
    env = Simple(continuous=3, seed=0)
    env.reset()
    env.set_actions("Simple", ActionTuple(continuous=np.array([[0.5, -0.05, -7.0]], np.float32)))
    env.step()
    np.testing.assert_allclose(_positions(env), [[0.2, -0.05, -0.2]], rtol=0, atol=1e-8)
    assert _positions(env)[0][0] == 0.2  # exactly step_size (clamped in float64)
    # Any action >= step_size is a full step: 5 steps of 0.5 reach the goal.
    env = Simple(seed=0)
    env.reset()
    steps = 0
    while True:
        env.set_actions("Simple", ActionTuple(continuous=np.array([[0.5]], np.float32)))
        env.step()
        steps += 1
        decision, terminal = env.get_steps("Simple")
        if len(terminal):
            break
    assert steps == 5
    assert terminal.reward[0] in (np.float32(1.06), np.float32(-1.06)) and not terminal.interrupted[0]


def test_discrete_branch_value_one_moves_up_zero_moves_down() -> None:
    env = Simple(continuous=0, discrete=2, step_size=0.3, seed=0)
    env.reset()
    env.set_actions("Simple", ActionTuple(discrete=np.array([[1, 0]], np.int32)))
    env.step()
    assert _positions(env) == [[0.3, -0.3]]


def test_rewards_are_ml_agents_values() -> None:
    """-0.01 per step; at the end SUCCESS_REWARD (1.06, whatever step_size) x the mean over
    coordinates of position x goal: 1.06 all right, -1.06 all wrong, 0 half and half."""
    for step_size in (0.2, 0.5, 0.8):
        for sign, want in ((1, 1.06), (-1, -1.06)):
            env = Simple(step_size=step_size, seed=0)
            env.reset()
            rewards = []
            while True:
                goal = env._state["Simple"].goal[0]  # type: ignore[attr-defined]
                env.set_actions("Simple", ActionTuple(continuous=np.array([[sign * goal]], np.float32)))
                env.step()
                decision, terminal = env.get_steps("Simple")
                if len(terminal):
                    rewards.append(float(terminal.reward[0]))
                    break
                rewards.append(float(decision.reward[0]))
            steps = int(np.ceil(1 / step_size - 1e-9))
            assert rewards == pytest.approx([-0.01] * (steps - 1) + [want]), (step_size, sign)
    env = Simple(continuous=2, step_size=0.5, seed=0)
    env.reset()
    for _ in range(2):
        env.set_actions("Simple", ActionTuple(continuous=np.array([[1.0, -1.0]], np.float32)))
        env.step()
    assert env.get_steps("Simple")[1].reward.tolist() == [0.0]


def test_step_size_tenth_needs_eleven_steps_as_in_ml_agents() -> None:
    # 10 x 0.1 in float64 is 0.9999999999999999, and ML-Agents' done test is pos >= 1.0.
    env = Simple(step_size=0.1, seed=0)
    env.reset()
    for t in range(11):
        env.set_actions("Simple", ActionTuple(continuous=np.ones((1, 1), np.float32)))
        env.step()
        assert (len(env.get_steps("Simple")[1]) == 1) is (t == 10), t


def test_step_penalty_and_reward_since_last_decision() -> None:
    env = Simple(seed=0)
    env.reset()
    env.set_actions("Simple", ActionTuple(continuous=np.zeros((1, 1))))
    env.step()
    decision, terminal = env.get_steps("Simple")
    assert decision.reward.tolist() == pytest.approx([-0.01]) and len(terminal) == 0


def test_time_limit_interrupts_and_agent_gets_new_id() -> None:
    env = Simple(max_episode_steps=7, seed=0)
    env.reset()
    first_id = env.get_steps("Simple")[0].agent_id[0]
    for t in range(7):
        env.set_actions("Simple", ActionTuple(continuous=np.zeros((1, 1))))  # stays at 0
        env.step()
        decision, terminal = env.get_steps("Simple")
        if t < 6:
            assert len(terminal) == 0
    assert terminal.interrupted.tolist() == [True]
    assert terminal.agent_id.tolist() == [first_id]
    assert terminal.reward.tolist() == pytest.approx([-0.01])
    assert terminal.obs[0].shape == (1, 1)
    assert decision.agent_id[0] != first_id and decision.reward.tolist() == [0.0]


def test_wrong_way_is_a_true_terminal_with_negative_reward() -> None:
    env = Simple(seed=0)
    env.reset()

    def wrong(name: str, decision: Any) -> ActionTuple:
        expert = env.expert_action(name, decision)
        return ActionTuple(continuous=-expert.continuous)

    returns, interrupted = run_episodes(env, wrong, 5)
    assert interrupted == [False]
    assert returns[0] == pytest.approx(-0.04 - 1.06)


@pytest.mark.parametrize("cls", [Simple, Memory])
def test_no_time_limit_by_default(cls: Any) -> None:
    # ML-Agents' SimpleEnvironment never interrupts an episode.
    env = cls()
    env.reset()
    name = list(env.behavior_specs)[0]
    for _ in range(1000):
        env.step()  # no actions set: zeros, position stays at 0
        assert len(env.get_steps(name)[1]) == 0


def _memory_goals(env: Memory, steps: int, action: ActionTuple) -> list:
    """(vector obs, first pixel) of agent 0 after the reset and after each step."""
    env.reset()
    seen = []
    for _ in range(steps):
        decision, _ = env.get_steps("Memory")
        seen.append((float(decision.obs[0][0, 0]), float(decision.obs[1][0, 0, 0, 0])))
        env.set_actions("Memory", action)
        env.step()
    return seen


def test_memory_shows_the_goal_while_step_count_is_at_most_two() -> None:
    """ML-Agents' MemoryEnvironment: goal while ``step_count <= num_show_steps`` (2), then 0;
    ``step_count`` grows by one per action dimension per step. A 1-D agent sees the goal in
    its first 3 observations (reset, steps 1 and 2)."""
    env = Memory(num_visual=1, vis_obs_size=(2, 2, 1), seed=1)
    seen = _memory_goals(env, 5, ActionTuple(continuous=np.zeros((1, 1), np.float32)))
    goal = seen[0][0]
    assert goal in (-1.0, 1.0)
    assert seen == [(goal, goal)] * 3 + [(0.0, 0.0)] * 2
    assert list(env.behavior_specs) == ["Memory"]
    # Two action dimensions (hybrid): the counter is 2 after step 1, 4 after step 2.
    env = Memory(continuous=1, discrete=1, num_visual=1, vis_obs_size=(1, 1, 1), seed=1)
    hybrid = ActionTuple(continuous=np.zeros((1, 1), np.float32), discrete=np.ones((1, 1), np.int32))
    seen = _memory_goals(env, 4, hybrid)
    assert [s[0] != 0 for s in seen] == [True, True, False, False]
    # Three: only the observation after the reset.
    env = Memory(continuous=3, num_visual=1, vis_obs_size=(1, 1, 1), seed=1)
    seen = _memory_goals(env, 3, ActionTuple(continuous=np.zeros((1, 3), np.float32)))
    assert [s[0] != 0 for s in seen] == [True, False, False]
    # unit_visual images: (goal + 1) / 2, then 0.5.
    env = Memory(num_visual=1, vis_obs_size=(1, 1, 1), unit_visual=True, seed=1)
    seen = _memory_goals(env, 4, ActionTuple(continuous=np.zeros((1, 1), np.float32)))
    assert [s[1] for s in seen] == [(goal + 1) / 2] * 3 + [0.5]


def test_memory_final_and_next_episode_observations() -> None:
    """The final observation follows the same rule (step_size 1.0: the episode ends at step
    1, counter 1: goal shown); the next episode starts from a counter of 0."""
    env = Memory(step_size=1.0, num_agents=4, seed=2)
    env.reset()
    env.set_actions("Memory", ActionTuple(continuous=np.ones((4, 1), np.float32)))
    env.step()
    decision, terminal = env.get_steps("Memory")
    assert len(terminal) == 4 and set(terminal.obs[0][:, 0]) <= {-1.0, 1.0}
    assert set(decision.obs[0][:, 0]) <= {-1.0, 1.0} and decision.reward.tolist() == [0.0] * 4
    env = Memory(seed=2)  # 5 steps: the final observation (counter 5) hides the goal
    env.reset()
    for _ in range(5):
        env.set_actions("Memory", ActionTuple(continuous=np.ones((1, 1), np.float32)))
        env.step()
    decision, terminal = env.get_steps("Memory")
    assert terminal.obs[0].tolist() == [[0.0]] and decision.obs[0][0, 0] in (-1.0, 1.0)


def test_memory_needs_memory_to_score_well() -> None:
    """Without memory a policy sees only 0 once the goal is hidden (after 3 of the 5 steps
    of a perfect episode): walking at random from there averages about 0.48, biased walks
    less, against the expert's 1.02. (Why tests/trainers/test_memory.py expects a
    feed-forward network to stay below 0.6.)"""
    means = []
    for p_up in (0.5, 0.6):
        env = Memory(continuous=0, discrete=1, num_agents=256, seed=0)
        env.reset()
        rng = np.random.default_rng(1)

        def memoryless(name: str, decision: Any, p_up: float = p_up) -> ActionTuple:
            seen = decision.obs[0][:, 0]
            up = np.where(seen == 0, rng.random(len(seen)) < p_up, seen > 0)
            return ActionTuple(discrete=up[:, None].astype(np.int32))

        returns, _ = run_episodes(env, memoryless, 400)
        means.append(float(np.mean(returns)))
    assert 0.4 < means[0] < 0.55 and means[1] < means[0], means


def test_multi_agent_multi_behavior_ids_are_unique_and_stable() -> None:
    env = Simple(num_agents=3, behavior_names=["A", "B"], discrete=1, continuous=0, seed=0)
    env.reset()
    ids = {n: env.get_steps(n)[0].agent_id.tolist() for n in ("A", "B")}
    assert ids == {"A": [0, 1, 2], "B": [3, 4, 5]}
    # Only A gets the expert; B gets zeros (discrete 0 = move -1).
    seen_ids = set(ids["A"] + ids["B"])
    for _ in range(12):
        env.set_actions("A", env.expert_action("A", env.get_steps("A")[0]))
        env.step()
        for n in ("A", "B"):
            decision, terminal = env.get_steps(n)
            assert set(terminal.agent_id.tolist()) <= seen_ids
            new = set(decision.agent_id.tolist()) - seen_ids
            seen_ids |= new
    assert len(seen_ids) > 6  # both behaviors finished episodes and got new ids


def test_set_actions_checks_shapes_and_names() -> None:
    env = Simple(num_agents=2)
    env.reset()
    with pytest.raises(ValueError, match="shape"):
        env.set_actions("Simple", ActionTuple(continuous=np.zeros((3, 1))))
    with pytest.raises(KeyError):
        env.set_actions("Nope", ActionTuple(continuous=np.zeros((2, 1))))


def test_needs_reset_first_and_close_is_idempotent() -> None:
    env = Chain()
    with pytest.raises(RuntimeError, match="reset"):
        env.step()
    env.close()
    env.close()
    with pytest.raises(RuntimeError, match="closed"):
        env.reset()


def _goal_sequence(env: BaseEnv, name: str, steps: int) -> list:
    env.reset()
    seen = []
    for _ in range(steps):
        decision, _ = env.get_steps(name)
        env.set_actions(name, env.expert_action(name, decision))  # type: ignore[attr-defined]
        seen.append(decision.obs[0][:, 0].tolist())
        env.step()
    return seen


def test_seeding_is_reproducible() -> None:
    a = _goal_sequence(Simple(num_agents=4, seed=7), "Simple", 60)
    b = _goal_sequence(Simple(num_agents=4, seed=7), "Simple", 60)
    c = _goal_sequence(Simple(num_agents=4, seed=8), "Simple", 60)
    assert a == b and a != c


def test_chain_slip_is_seeded() -> None:
    def trace(seed: int) -> list:
        env = Chain(slip=0.3, num_agents=8, seed=seed)
        env.reset()
        out = []
        for _ in range(30):
            env.set_actions("Chain", env.expert_action("Chain", env.get_steps("Chain")[0]))
            env.step()
            out.append(env.get_steps("Chain")[0].obs[0].argmax(axis=1).tolist())
        return out

    assert trace(1) == trace(1) and trace(1) != trace(2)


def test_chain_is_hard_for_random_but_easy_for_count_based_exploration() -> None:
    # Random policy: the reward is found in well under 1% of the episodes.
    env = Chain(num_agents=200, seed=0)
    env.reset()
    _, interrupted = run_episodes(env, random_policy(env, 0), 400)
    assert len(interrupted) >= 1800
    assert np.mean(np.logical_not(interrupted)) < 0.01

    # Tabular Q-learning that is optimistic about untried actions and gets a novelty
    # bonus 1/sqrt(visits) (what curiosity approximates) finds it in a few dozen
    # episodes; a random policy would need about 300.
    env = Chain(seed=0)
    env.reset()
    q = np.full((20, 2), 5.0)
    visits = np.zeros((20, 2))
    found_at = None
    for episode in range(40):
        state, reward = 0, 0.0
        while True:
            action = int(np.argmax(q[state]))
            env.set_actions("Chain", ActionTuple(discrete=np.array([[action]])))
            env.step()
            decision, terminal = env.get_steps("Chain")
            ended = len(terminal) > 0
            nxt = int(np.argmax(terminal.obs[0][0] if ended else decision.obs[0][0]))
            visits[state, action] += 1
            reward = float(terminal.reward[0]) if ended else float(decision.reward[0])
            bootstrap = 0.0 if ended and not terminal.interrupted[0] else 0.95 * q[nxt].max()
            target = reward + 0.1 / np.sqrt(visits[state, action]) + bootstrap
            q[state, action] += 0.5 * (target - q[state, action])
            state = nxt
            if ended:
                break
        if reward == 1.0:
            found_at = episode
            break
    assert found_at is not None and found_at < 40


def test_expert_action_follows_decision_rows() -> None:
    env = Simple(num_agents=3, seed=5)
    env.reset()
    decision, _ = env.get_steps("Simple")
    goals = decision.obs[0][:, 0]
    order = np.array([2, 0, 1])
    sub = type(decision)(obs=[o[order] for o in decision.obs], reward=decision.reward[order],
                         agent_id=decision.agent_id[order])
    np.testing.assert_array_equal(env.expert_action("Simple", sub).continuous[:, 0], goals[order])


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"continuous": -1}, "continuous"),
        ({"continuous": 0, "discrete": 0}, "at least one action"),
        ({"num_vector": 0, "num_visual": 0}, "at least one observation"),
        ({"vis_obs_size": [3, 3]}, "vis_obs_size"),
        ({"step_size": 0.0}, "step_size"),
        ({"behavior_names": "A"}, "behavior_names"),
        ({"behavior_names": ["A", "A"]}, "duplicates"),
        ({"num_agents": 0}, "num_agents"),
    ],
)
def test_bad_values_are_one_line_env_errors(kwargs: Dict[str, Any], match: str) -> None:
    with pytest.raises(EnvError, match=match) as info:
        Simple(**kwargs)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "cls, kwargs",
    [
        (Simple, {"num_visual": 1, "vis_obs_size": [100_000, 100_000, 3]}),  # 112 GiB per image
        (Simple, {"num_agents": 10**12}),
        (Simple, {"discrete": 10**9}),  # the action spec alone would be a billion-entry tuple
        (Simple, {"num_vector": 10**8}),
        (Simple, {"num_agents": 5000, "behavior_names": [f"B{i}" for i in range(5000)], "vec_obs_size": 4}),
        (Memory, {"num_visual": 2, "vis_obs_size": [4096, 4096, 3]}),
        (Chain, {"length": 10**9}),
    ],
)
def test_absurd_sizes_are_refused_up_front_in_one_line(cls: Any, kwargs: Dict[str, Any]) -> None:
    # They used to reach numpy at the first reset: an allocation traceback, or swapping.
    with pytest.raises(EnvError) as info:
        cls(**kwargs)
    message = str(info.value)
    assert message.startswith(f"{cls.__name__}: one step would hold ")
    assert "more than the 67,108,864 allowed" in message and "\n" not in message


def test_large_but_sane_sizes_are_accepted() -> None:
    env = Simple(num_visual=1, vis_obs_size=(84, 84, 3), num_agents=64, seed=0)  # 1.4M values per step
    env.reset()
    assert env.get_steps("Simple")[0].obs[1].shape == (64, 84, 84, 3)
