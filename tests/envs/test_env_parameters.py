"""Environment parameters on the env side: the samplers' draws (ranges, seeds), the built-in
envs' parameters (declared names, applied at each agent's next episode start), Gymnasium
make() keywords (re-created copies), every env manager passing new values to its workers,
and the bytes of ML-Agents' EnvironmentParametersChannel, written by hand from
``ml-agents-envs/mlagents_envs/side_channel/environment_parameters_channel.py`` (Release 22).
"""
from __future__ import annotations

import struct
import uuid

import numpy as np
import pytest

from envs.base_env import ActionTuple
from envs.exceptions import EnvError
from envs.managers import make_env_manager
from envs.managers.in_process import InProcessEnvManager
from envs.managers.subprocess import SubprocessEnvManager
from envs.parameters import Constant, Gaussian, MultiRangeUniform, ParameterDraws, Uniform
from envs.registry import make_env, validate_env
from envs.unity.environment import UnityEnv
from envs.unity.fake_game import FakeBehavior, FakeGame, free_port, start_in_thread
from envs.unity.side_channels import EnvironmentParametersChannel, encode_side_channels


# ------------------------------------------------------------------------------ draws
def test_samplers_draw_within_their_ranges_and_repeat_with_their_seed() -> None:
    uniform = ParameterDraws(0, {"u": Uniform(0.5, 10.0, 7)}).draw("u", 20000)
    assert uniform.min() >= 0.5 and uniform.max() < 10.0
    assert abs(uniform.mean() - 5.25) < 0.1  # (0.5 + 10) / 2
    gauss = ParameterDraws(0, {"g": Gaussian(4.0, 0.5, 7)}).draw("g", 20000)
    assert abs(gauss.mean() - 4.0) < 0.02 and abs(gauss.std() - 0.5) < 0.02
    multi = ParameterDraws(0, {"m": MultiRangeUniform(((0.0, 1.0), (10.0, 13.0)), 7)}).draw("m", 20000)
    low, high = (multi >= 0) & (multi < 1), (multi >= 10) & (multi < 13)
    assert (low | high).all()
    assert abs(high.mean() - 0.75) < 0.02  # an interval's weight is its width: 3 / (1 + 3)
    # Same seed and stream: the same draws; another seed, or another env (stream): others.
    again = ParameterDraws(0, {"u": Uniform(0.5, 10.0, 7)}).draw("u", 5)
    assert np.array_equal(again, uniform[:5])
    assert not np.array_equal(ParameterDraws(0, {"u": Uniform(0.5, 10.0, 8)}).draw("u", 5), again)
    assert not np.array_equal(ParameterDraws(1, {"u": Uniform(0.5, 10.0, 7)}).draw("u", 5), again)
    assert np.array_equal(ParameterDraws(0, {"c": Constant(3.0)}).draw("c", 3), [3.0, 3.0, 3.0])


def test_an_unchanged_sampler_keeps_drawing_where_it_was() -> None:
    draws = ParameterDraws(0, {"u": Uniform(0.0, 1.0, 1)})
    first = draws.draw("u", 3)
    draws.update({"u": Uniform(0.0, 1.0, 1), "c": Constant(2.0)})  # another parameter changed
    assert np.array_equal(np.concatenate([first, draws.draw("u", 3)]),
                          ParameterDraws(0, {"u": Uniform(0.0, 1.0, 1)}).draw("u", 6))
    draws.update({"u": Uniform(0.0, 1.0, 2)})  # a new sampler (next lesson): a new generator
    assert np.array_equal(draws.draw("u", 3), ParameterDraws(0, {"u": Uniform(0.0, 1.0, 2)}).draw("u", 3))


# -------------------------------------------------------------------------- built-in
def _step(env, action: float = 1.0, name: str = "Simple"):
    decision, _ = env.get_steps(name)
    env.set_actions(name, ActionTuple(continuous=np.full((len(decision), 1), action, np.float32)))
    env.step()
    return env.get_steps(name)


def test_simple_goal_distance_and_step_size_shape_the_episodes() -> None:
    env = make_env("builtin:Simple", {"num_agents": 2}, 3, env_parameters={"goal_distance": Constant(0.4)})
    env.reset()
    goals = env._state["Simple"].goal.copy()
    decision, terminal = _step(env)
    assert len(terminal) == 0 and np.allclose(decision.reward, -0.01)
    decision, terminal = _step(env)  # two full steps of 0.2 reach the end at 0.4
    assert len(terminal) == 2
    # The final reward is computed from position / distance: 1.06 x goal, as at distance 1.
    assert np.allclose(terminal.reward, 1.06 * goals)
    env.set_env_parameters({"step_size": Constant(0.1), "goal_distance": Constant(0.3)})
    env.reset()
    assert np.array_equal(env._state["Simple"].step_size, [0.1, 0.1])
    for _ in range(2):
        assert len(_step(env)[1]) == 0
    assert len(_step(env)[1]) == 2  # three steps of 0.1 (float64: 0.30000000000000004 >= 0.3)


def test_parameters_apply_at_each_agents_next_episode_start() -> None:
    env = make_env("builtin:Simple", {"num_agents": 1}, 0)
    env.reset()
    env.set_actions("Simple", ActionTuple(continuous=np.ones((1, 1), np.float32)))
    env.step()  # one step into an episode of the default goal distance 1
    env.set_env_parameters({"goal_distance": Constant(0.2)})
    state = env._state["Simple"]
    assert state.goal_distance[0] == 1.0  # this episode keeps its distance ...
    for _ in range(4):  # ... and ends after its 5 steps of 0.2 (either end)
        env.set_actions("Simple", ActionTuple(continuous=np.ones((1, 1), np.float32)))
        env.step()
    assert len(env.get_steps("Simple")[1]) == 1
    assert state.goal_distance[0] == 0.2  # the next one has the new distance


def test_no_parameter_leaves_the_env_as_it_was() -> None:
    """Setting parameters at their defaults draws nothing from the env's generator: the
    same goals and rewards as without them."""
    plain = make_env("builtin:Simple", {"num_agents": 4}, 5)
    with_defaults = make_env("builtin:Simple", {"num_agents": 4}, 5,
                             env_parameters={"step_size": Constant(0.2), "goal_distance": Constant(1.0)})
    plain.reset(), with_defaults.reset()
    rng = np.random.default_rng(0)
    for _ in range(60):
        action = ActionTuple(continuous=rng.uniform(-1, 1, (4, 1)).astype(np.float32))
        for env in (plain, with_defaults):
            env.set_actions("Simple", action)
            env.step()
        a, b = plain.get_steps("Simple"), with_defaults.get_steps("Simple")
        assert np.array_equal(a[0].reward, b[0].reward) and np.array_equal(a[0].obs[0], b[0].obs[0])
        assert np.array_equal(a[1].reward, b[1].reward)


def test_sampled_parameters_draw_per_agent_episode_within_range() -> None:
    env = make_env("builtin:Memory", {"num_agents": 50}, 0,
                   env_parameters={"step_size": Uniform(0.1, 0.3, 4)})
    env.reset()
    sizes = env._state["Memory"].step_size
    assert sizes.min() >= 0.1 and sizes.max() < 0.3 and len(set(sizes.tolist())) == 50
    again = make_env("builtin:Memory", {"num_agents": 50}, 0, env_parameters={"step_size": Uniform(0.1, 0.3, 4)})
    again.reset()
    assert np.array_equal(again._state["Memory"].step_size, sizes)  # seeded: reproducible
    clipped = make_env("builtin:Simple", {"num_agents": 200}, 0, env_parameters={"step_size": Gaussian(0.5, 1.0, 4)})
    clipped.reset()  # a gaussian's draws are clipped to the parameter's range
    assert clipped._state["Simple"].step_size.min() >= 1e-6 and clipped._state["Simple"].step_size.max() <= 1.0


@pytest.mark.parametrize(
    "env_id, values, message",
    [
        ("builtin:Simple", {"gravity": Constant(1.0)},
         "builtin:Simple: environment_parameters.gravity: not a parameter of this environment "
         "(it takes: step_size, goal_distance)"),
        ("builtin:Simple", {"step_size": Uniform(0.5, 2.0, 1)},
         "builtin:Simple: environment_parameters.step_size: uniform [0.5, 2) seed 1 is outside the parameter's "
         "range [1e-06, 1]"),
        ("builtin:Chain", {"step_size": Constant(0.5)},
         "builtin:Chain: environment_parameters.step_size: not a parameter of this environment (it takes: none)"),
        ("gym:Pendulum-v1", {"gravity": Constant(9.0)},
         "gym:Pendulum-v1: environment_parameters.gravity: not a parameter of this environment "
         "(it takes: render_mode, g)"),
    ],
)
def test_unknown_parameters_are_one_line_before_anything_starts(env_id, values, message) -> None:
    with pytest.raises(EnvError) as info:
        validate_env(env_id, None, values)
    assert str(info.value) == message
    with pytest.raises(EnvError, match="^" + message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        make_env_manager(env_id, None, 2, 1, 0, env_parameters=values)  # before any worker starts


# --------------------------------------------------------------------------- gymnasium
def test_gym_parameters_are_make_keywords_and_a_change_remakes_each_copy_at_its_reset() -> None:
    env = make_env("gym:Pendulum-v1", None, 0, agents_per_env=2, env_parameters={"g": Constant(9.0)})
    env.reset()
    assert [e.unwrapped.g for e in env.gym_envs] == [9, 9]  # a whole number: an int keyword
    first = env.gym_envs[0]
    env.set_env_parameters({"g": Constant(3.5)})
    assert env.gym_envs[0] is first  # not before its reset
    for _ in range(200):  # Pendulum's time limit: every copy's episode ends at step 200
        env.set_actions("Pendulum-v1", ActionTuple(continuous=np.zeros((2, 1), np.float32)))
        env.step()
    assert len(env.get_steps("Pendulum-v1")[1]) == 2
    assert [e.unwrapped.g for e in env.gym_envs] == [3.5, 3.5] and env.gym_envs[0] is not first
    with pytest.raises(EnvError, match="also given in env_args"):
        make_env("gym:Pendulum-v1", {"g": 9.0}, 0, env_parameters={"g": Constant(9.0)})


def test_gym_samplers_draw_at_every_episode() -> None:
    env = make_env("gym:Pendulum-v1", None, 0, agents_per_env=3, env_parameters={"g": Uniform(5.0, 15.0, 2)})
    env.reset()
    seen = {e.unwrapped.g for e in env.gym_envs}
    env.reset()  # every reset re-creates the copies with fresh draws
    seen |= {e.unwrapped.g for e in env.gym_envs}
    assert len(seen) == 6 and all(5.0 <= g < 15.0 for g in seen)


# ---------------------------------------------------------------------------- managers
def _episode_lengths(manager, start, steps: int):
    """Steps every worker with +1 actions from ``start`` (the last steps); per worker, the
    lengths of the episodes that end (an agent's steps: the steps it acted in)."""
    lengths = {i: [] for i in range(manager.num_workers)}
    acting = {s.worker_id: s.steps["Simple"][0].agent_id.tolist() for s in start}
    age = {}
    for _ in range(steps):
        out = manager.step([{"Simple": ActionTuple(continuous=np.ones((1, 1), np.float32))}] * manager.num_workers)
        for env_step in out:
            w = env_step.worker_id
            for agent in acting[w]:
                age[(w, agent)] = age.get((w, agent), 0) + 1
            decision, terminal = env_step.steps["Simple"]
            lengths[w] += [age.pop((w, agent)) for agent in terminal.agent_id.tolist()]
            acting[w] = decision.agent_id.tolist()
    return lengths, out


@pytest.mark.parametrize("kind", ["in_process", "subprocess"])
def test_managers_pass_parameters_to_every_worker(kind: str) -> None:
    cls = InProcessEnvManager if kind == "in_process" else SubprocessEnvManager
    with cls("builtin:Simple", None, num_envs=2, seed=0, env_parameters={"goal_distance": Constant(0.2)}) as manager:
        lengths, last = _episode_lengths(manager, manager.reset(), 4)
        assert lengths == {0: [1, 1, 1, 1], 1: [1, 1, 1, 1]}  # one step of 0.2 reaches an end
        manager.set_env_parameters({"goal_distance": Constant(0.6)})
        lengths, last = _episode_lengths(manager, last, 7)
        # The episode under way (begun at the last step's end) keeps 0.2; the next ones: 3 steps.
        assert lengths == {0: [1, 3, 3], 1: [1, 3, 3]}
        manager.set_env_parameters({"goal_distance": Constant(1.0)})
        lengths, _ = _episode_lengths(manager, manager.reset(), 5)  # ML-Agents' require_reset
        assert lengths == {0: [5], 1: [5]}  # every episode starts with the new value at once
        with pytest.raises(EnvError, match="not a parameter of this environment"):
            manager.set_env_parameters({"nope": Constant(1.0)})
            manager.step([{}, {}])  # a worker process answers its next command with the error


def test_subprocess_reset_out_of_lockstep_drops_the_steps_in_flight() -> None:
    with SubprocessEnvManager("builtin:Simple", None, num_envs=2, seed=0) as manager:
        manager.reset()
        manager.step_some({0: {}, 1: {}})
        assert len(manager.wait_some()) >= 1  # worker 1 may still be stepping
        assert [s.worker_id for s in manager.reset()] == [0, 1]
        assert len(manager.step([{}, {}])) == 2


# ------------------------------------------------------------------------------ Unity
# ML-Agents' EnvironmentParametersChannel message bytes, written by hand from its code:
# write_string (int32 byte count + ASCII), write_int32 ('<i'), write_float32 ('<f'),
# write_float32_list (int32 count + floats); type FLOAT 0 / SAMPLER 1; sampler UNIFORM 0,
# GAUSSIAN 1, MULTIRANGEUNIFORM 2; for a sampler: key, type, seed, sampler type, floats.
FLOAT_GRAVITY = bytes.fromhex("07000000" "67726176697479" "00000000" "000018c1")  # "gravity" -9.5
UNIFORM_MASS = bytes.fromhex("04000000" "6d617373" "01000000" "39050000" "00000000" "0000003f" "00002041")
GAUSSIAN_G = bytes.fromhex("01000000" "67" "01000000" "07000000" "01000000" "00008040" "0000a040")
MULTI_H = bytes.fromhex(
    "01000000" "68" "01000000" "02000000" "02000000" "04000000" "0000803f" "00000040" "00004040" "00008040"
)


def test_environment_parameters_channel_bytes_match_ml_agents() -> None:
    channel = EnvironmentParametersChannel()
    channel.set_parameter("gravity", Constant(-9.5))
    channel.set_parameter("mass", Uniform(0.5, 10.0, 1337))
    channel.set_parameter("g", Gaussian(4.0, 5.0, 7))
    channel.set_parameter("h", MultiRangeUniform(((1.0, 2.0), (3.0, 4.0)), 2))
    assert channel.take_outgoing() == [FLOAT_GRAVITY, UNIFORM_MASS, GAUSSIAN_G, MULTI_H]
    # Framed as every side channel message: the channel id as C#'s Guid.ToByteArray, int32 length.
    channel.set_parameter("gravity", Constant(-9.5))
    framed = encode_side_channels([channel])
    assert framed == bytes.fromhex("1e894c530f81ea11a9d0822485860400") + struct.pack("<i", 19) + FLOAT_GRAVITY
    assert uuid.UUID(bytes_le=framed[:16]) == uuid.UUID("534c891e-810f-11ea-a9d0-822485860400")


def test_a_unity_game_gets_samplers_with_its_first_reset_and_changes_with_the_next_step() -> None:
    port = free_port()
    game = FakeGame(port, [FakeBehavior("S")])
    thread = start_in_thread(game)
    env = UnityEnv(None, base_port=port, host="127.0.0.1", timeout_wait=20, log=lambda s: None,
                   env_parameters={"mass": Uniform(0.5, 10.0, 1337), "gravity": Constant(-9.5)})
    try:
        assert game.parameters == {"mass": ("uniform", 1337, 0.5, 10.0), "gravity": -9.5}
        assert game.parameter_messages == [UNIFORM_MASS, FLOAT_GRAVITY]
        env.reset()
        env.set_env_parameters({"h": MultiRangeUniform(((1.0, 2.0), (3.0, 4.0)), 2), "g": Gaussian(4.0, 5.0, 7)})
        env.step()
        assert game.parameter_messages[2:] == [MULTI_H, GAUSSIAN_G]
        assert game.parameters["h"] == ("multirangeuniform", 2, 1.0, 2.0, 3.0, 4.0)
    finally:
        env.close()
        thread.join(10)
    assert game.error is None, game.error
