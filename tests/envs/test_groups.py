"""Multi-agent groups in the env layer: ``group_id`` / ``group_reward`` of `DecisionSteps`
and `TerminalSteps` across the subprocess wire (packed and shared memory), the managers,
the Unity protocol against the fake game, and the `.demo` reader (which ignores them)."""
from __future__ import annotations

from multiprocessing.shared_memory import SharedMemory
from typing import Dict, List, Tuple

import numpy as np
import pytest

from envs.base_env import ActionSpec, ActionTuple, BehaviorSpec, DecisionSteps, ObservationSpec, TerminalSteps
from envs.exceptions import EnvError
from envs.managers.base import EnvManager, StepDict
from envs.managers.in_process import InProcessEnvManager
from envs.managers.subprocess import SubprocessEnvManager
from envs.managers._wire import _Channel, _Layout, _pack_steps, _unpack_steps
from envs.unity.environment import UnityEnv, trainer_capabilities
from envs.unity.fake_game import FakeBehavior, FakeGame, free_port, start_in_thread

FIELDS = ("obs", "reward", "agent_id", "action_mask", "interrupted", "group_id", "group_reward")


def _assert_steps_equal(a: StepDict, b: StepDict) -> None:
    assert list(a) == list(b)
    for name in a:
        for x, y in zip(a[name], b[name]):
            for field in FIELDS:
                vx, vy = getattr(x, field, None), getattr(y, field, None)
                if isinstance(vx, list):
                    assert isinstance(vy, list) and len(vx) == len(vy)
                    for ex, ey in zip(vx, vy):
                        np.testing.assert_array_equal(ex, ey)
                elif vx is None:
                    assert vy is None
                else:
                    np.testing.assert_array_equal(vx, vy)
                    assert vy is not None and vx.dtype == vy.dtype, field


def test_group_fields_default_to_zeros_and_check_their_shape() -> None:
    d = DecisionSteps([np.zeros((2, 1), np.float32)], np.zeros(2, np.float32), np.arange(2, dtype=np.int32))
    assert d.group_id.dtype == np.int32 and d.group_reward.dtype == np.float32
    np.testing.assert_array_equal(d.group_id, [0, 0])
    np.testing.assert_array_equal(d.group_reward, [0, 0])
    spec = BehaviorSpec((ObservationSpec((1,)),), ActionSpec(1))
    assert DecisionSteps.empty(spec).group_id.shape == (0,) and TerminalSteps.empty(spec).group_reward.shape == (0,)
    with pytest.raises(ValueError, match=r"must be \[2\], one per agent"):
        DecisionSteps(d.obs, d.reward, d.agent_id, group_id=np.array([1], np.int32))


def _grouped_steps() -> Tuple[Dict[str, BehaviorSpec], StepDict]:
    spec = BehaviorSpec((ObservationSpec((2,)),), ActionSpec(0, (3,)))
    rng = np.random.default_rng(0)
    decision = DecisionSteps(
        [rng.random((3, 2), dtype=np.float32)], np.array([0.5, 0, -1], np.float32), np.array([4, 5, 6], np.int32),
        [np.array([[False, True, False]] * 3)],
        group_id=np.array([1, 1, 7], np.int32), group_reward=np.array([0.25, 0.25, -2.5], np.float32),
    )
    terminal = TerminalSteps(
        [rng.random((2, 2), dtype=np.float32)], np.array([1, 2], np.float32), np.array([True, False]),
        np.array([2, 3], np.int32), group_id=np.array([7, 0], np.int32), group_reward=np.array([3.0, 0], np.float32),
    )
    specs = {"G": spec, "H": spec}
    return specs, {"G": (decision, terminal), "H": (DecisionSteps.empty(spec), TerminalSteps.empty(spec))}


def test_wire_round_trip_of_group_fields_packed_and_through_shared_memory() -> None:
    specs, steps = _grouped_steps()
    names = list(specs)
    _assert_steps_equal(steps, _unpack_steps(names, specs, _pack_steps(names, steps)))
    layout = _Layout(names, specs, {"G": 3, "H": 3})
    shm = SharedMemory(create=True, size=layout.size)
    try:
        worker, parent = _Channel(shm, layout), _Channel(SharedMemory(shm.name), layout)
        assert worker.write_steps(steps)
        _assert_steps_equal(steps, parent.read_steps())
        worker.release()
        parent.release()
    finally:
        shm.unlink()


def _play(manager: EnvManager, steps: int) -> List[List[StepDict]]:
    """Every worker's steps over ``steps`` random moves (seed 7), from the reset on."""
    rng = np.random.default_rng(7)
    seen = [[s.steps for s in manager.reset()]]
    for _ in range(steps):
        actions = []
        for worker in seen[-1]:
            n = len(worker["Rendezvous"][0])
            actions.append({"Rendezvous": ActionTuple(np.zeros((n, 0), np.float32), rng.integers(0, 3, (n, 1)))})
        seen.append([s.steps for s in manager.step(actions)])
    return seen


@pytest.mark.parametrize("shared_memory", [True, False])
def test_managers_carry_group_fields_of_the_cooperative_env(shared_memory: bool) -> None:
    # builtin:Rendezvous, 2 workers of 2 groups of 3, seed 3: groups end (some with a
    # group reward) and the agent counts change as members leave.
    args = {"length": 4, "max_steps": 6}
    with InProcessEnvManager("builtin:Rendezvous", args, num_envs=2, agents_per_env=6, seed=3) as local:
        expected = _play(local, 40)
    with SubprocessEnvManager("builtin:Rendezvous", args, num_envs=2, agents_per_env=6, seed=3,
                              shared_memory=shared_memory) as remote:
        got = _play(remote, 40)
    for a, b in zip(expected, got):
        for wa, wb in zip(a, b):
            _assert_steps_equal(wa, wb)
    terminals = [w["Rendezvous"][1] for step in got for w in step]
    assert sum(float(t.group_reward.sum()) for t in terminals) >= 2  # some groups met
    assert {int(g) for t in terminals for g in t.group_id} == {1, 2}
    assert len({len(w["Rendezvous"][0]) for step in got for w in step}) > 1  # members left


def _connect(behaviors: List[FakeBehavior], **game_kwargs: object) -> Tuple[UnityEnv, FakeGame]:
    port = free_port()
    game = FakeGame(port, behaviors, **game_kwargs)  # type: ignore[arg-type]
    start_in_thread(game)
    env = UnityEnv(None, base_port=port, host="127.0.0.1", timeout_wait=20, log=lambda s: None)
    return env, game


def test_unity_protocol_carries_group_ids_and_group_rewards() -> None:
    assert trainer_capabilities().multiAgentGroups
    # 3 agents, groups of 2 (Unity ids 0, 1 -> group 1; 2 -> group 2); agent 0 walks to its
    # goal (2 steps of 0.5), the others stay: its arrival gives group 1 a reward of 0.5.
    env, game = _connect([FakeBehavior("G", num_agents=3, step_size=0.5, max_step=50, group_size=2,
                                       group_reward=0.5)])
    try:
        env.reset()
        d, t = env.get_steps("G?team=0")
        np.testing.assert_array_equal(d.group_id, [1, 1, 2])
        np.testing.assert_array_equal(d.group_reward, [0, 0, 0])
        goal = float(d.obs[0][0, 0])
        for _ in range(2):
            env.set_actions("G?team=0", ActionTuple(np.array([[goal], [0.0], [0.0]], np.float32)))
            env.step()
        d, t = env.get_steps("G?team=0")
        first = d.agent_id[0]
        assert len(t) == 1 and not t.interrupted[0]
        np.testing.assert_array_equal(t.group_id, [1])
        np.testing.assert_array_equal(t.group_reward, [0.5])  # the finisher's own terminal info
        # The groupmate still playing gets it too; the new episode of agent 0 (same Unity
        # id, same group) starts with none; group 2 gets nothing.
        np.testing.assert_array_equal(d.group_id, [1, 1, 2])
        np.testing.assert_array_equal(d.group_reward, [0, 0.5, 0])
        env.set_actions("G?team=0", ActionTuple(np.zeros((3, 1), np.float32)))
        env.step()
        d, _ = env.get_steps("G?team=0")
        np.testing.assert_array_equal(d.group_reward, [0, 0, 0])  # sent once, then reset
        assert d.agent_id[0] == first
    finally:
        env.close()
    assert game.error is None


def test_unity_group_reward_that_is_not_finite_is_one_line() -> None:
    from envs.demo import demonstration_pb2 as demo_pb

    info = demo_pb.AgentInfoProto(id=3, group_id=1, group_reward=float("nan"))
    with pytest.raises(EnvError, match="behavior G: agent 3 sent a group reward of nan, expected a finite number"):
        UnityEnv._groups("G", [info])


def test_look_alike_groups_closed_form() -> None:
    from envs.builtin import LookAlike

    spaces = {"vector": [4], "discrete": [3, 3, 3]}
    env = LookAlike({"S?team=0": spaces, "S?team=1": spaces, "Solo": spaces}, num_agents=4, episode_length=2,
                    group_size={"S?team=0": 2, "S?team=1": 4}, seed=0)
    env.reset()
    np.testing.assert_array_equal(env.get_steps("S?team=0")[0].group_id, [1, 1, 2, 2])
    np.testing.assert_array_equal(env.get_steps("S?team=1")[0].group_id, [3, 3, 3, 3])
    np.testing.assert_array_equal(env.get_steps("Solo")[0].group_id, [0, 0, 0, 0])
    # Team 0 agrees with its signs (+1/2 each step), team 1's agent 2 only: group rewards are
    # the means of the members' rewards; at the episode end they come with the terminal rows.
    for step in range(2):
        for name in env.behavior_specs:
            d = env.get_steps(name)[0]
            action = env.expert_action(name, d)
            if name == "S?team=1":
                action.discrete[[0, 1, 3], 0] = 1 - action.discrete[[0, 1, 3], 0]
            env.set_actions(name, action)
        env.step()
        d0, t0 = env.get_steps("S?team=0")
        d1, t1 = env.get_steps("S?team=1")
        got0, got1 = (d0, d1) if step == 0 else (t0, t1)
        np.testing.assert_allclose(got0.group_reward, [0.5] * 4)
        np.testing.assert_allclose(got1.reward, [-0.5, -0.5, 0.5, -0.5])
        np.testing.assert_allclose(got1.group_reward, [-0.25] * 4)
        assert not env.get_steps("Solo")[0].group_reward.any()
    assert len(t0) == 4 and not d0.group_reward.any()  # the next episode has earned nothing
    np.testing.assert_array_equal(t1.group_id, [3, 3, 3, 3])


@pytest.mark.parametrize("group_size, message", [
    (3, "num_agents=4 is not a multiple of the group size 3 of L"),
    ({"M": 2}, "group_size names 'M', not a behavior (L)"),
    (-1, "group_size must be an integer >= 0, got -1"),
])
def test_look_alike_bad_group_size_is_one_line(group_size: object, message: str) -> None:
    from envs.registry import make_env

    with pytest.raises(EnvError, match=message.replace("(", r"\(").replace(")", r"\)")):
        make_env("builtin:LookAlike", {"behaviors": {"L": {"vector": [2], "continuous": 1}}, "num_agents": 4,
                                       "group_size": group_size}, seed=0)


def test_demo_reader_ignores_group_fields(tmp_path) -> None:
    # As ML-Agents' demo loader (its buffer keeps each agent's own reward only): a recording
    # whose AgentInfoProto carries a group id and a group reward reads as the same one without.
    from envs.demo import demonstration_pb2 as demo_pb
    from envs.demo.framing import BRAIN_PARAMETERS_OFFSET, encode_varint32, read_delimited
    from envs.demo.reader import load_demonstration
    from envs.demo.writer import DemoWriter

    spec = BehaviorSpec((ObservationSpec((2,)),), ActionSpec(0, (3,)))
    plain = tmp_path / "plain.demo"
    with DemoWriter(plain, "groups", "G", spec) as writer:
        for step in range(6):
            writer.add_step([np.full(2, step, np.float32)], discrete_action=[step % 3], reward=0.5 * step,
                            done=step == 5)
    data = plain.read_bytes()
    _, pos = read_delimited(data, BRAIN_PARAMETERS_OFFSET, "brain")
    grouped = bytearray(data[:pos])
    while pos < len(data):
        raw, pos = read_delimited(data, pos, "record")
        pair = demo_pb.AgentInfoActionPairProto.FromString(raw)
        pair.agent_info.group_id, pair.agent_info.group_reward = 4, 2.5
        body = pair.SerializeToString()
        grouped += encode_varint32(len(body)) + body
    (tmp_path / "grouped.demo").write_bytes(bytes(grouped))
    a, b = load_demonstration(plain), load_demonstration(tmp_path / "grouped.demo")
    assert len(a) == len(b) == 5
    np.testing.assert_array_equal(a.rewards, b.rewards)
    np.testing.assert_array_equal(a.rewards, [0.5, 1.0, 1.5, 2.0, 2.5])
    np.testing.assert_array_equal(a.obs[0], b.obs[0])
