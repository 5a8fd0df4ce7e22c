"""Entity observations (ML-Agents' variable-length observations, Unity's BufferSensor) in
the env layer: the spec, the Unity communicator (a rank-2 observation with dimension
properties ``(VARIABLE_SIZE, NONE)``, through the fake game), the ``.demo`` format (written
and read back), `builtin:LookAlike`'s entity option and `builtin:Sorter`."""
from __future__ import annotations

import numpy as np
import pytest

from envs.base_env import ActionSpec, ActionTuple, BehaviorSpec, ObservationKind, ObservationSpec
from envs.builtin.lookalike import LookAlike
from envs.builtin.sorter import Sorter
from envs.demo import demonstration_pb2 as pb
from envs.demo.messages import RecordError, plan_observations
from envs.exceptions import EnvError
from envs.parameters import Constant
from envs.unity.environment import UnityEnv, trainer_capabilities
from envs.unity.fake_game import FakeBehavior, FakeGame, free_port, start_in_thread


def test_entity_spec_is_rank_2():
    spec = ObservationSpec((20, 23), "tiles", ObservationKind.ENTITIES)
    assert spec.kind == ObservationKind("entities") and spec.shape == (20, 23)
    with pytest.raises(ValueError, match="needs shape \\(max_entities, entity_size\\)"):
        ObservationSpec((20,), "tiles", ObservationKind.ENTITIES)


def test_plan_maps_variable_size_none_to_entities_and_refuses_other_2d():
    buffer = pb.ObservationProto(shape=[6, 4], dimension_properties=[4, 1], name="BufferSensor")
    (plan,) = plan_observations([buffer])
    assert plan.spec == ObservationSpec((6, 4), "BufferSensor", ObservationKind.ENTITIES)
    other = pb.ObservationProto(shape=[6, 4], dimension_properties=[1, 1], name="Grid")
    with pytest.raises(RecordError, match="Grid.*dimension properties \\[1, 1\\].*\\[4, 1\\]"):
        plan_observations([other])


def test_unity_game_sends_a_buffer_sensor():
    assert trainer_capabilities().variableLengthObservation  # Unity sends BufferSensors to us
    port = free_port()
    game = FakeGame(port, [FakeBehavior("Sorter", num_agents=3, continuous=1, entities=(4, 2))])
    thread = start_in_thread(game)
    env = UnityEnv(None, base_port=port, host="127.0.0.1", timeout_wait=20, log=lambda line: None, seed=1)
    try:
        specs = env.behavior_specs["Sorter?team=0"].observation_specs
        assert [(o.kind, o.shape) for o in specs] == [
            (ObservationKind.VECTOR, (1,)),
            (ObservationKind.ENTITIES, (4, 2)),
        ]
        env.reset()
        d, _ = env.get_steps("Sorter?team=0")
        entities = d.obs[1]
        assert entities.shape == (3, 4, 2) and entities.dtype == np.float32
        for row, uid in enumerate(d.agent_id):
            present = 1 + int(uid) % 4  # the fake game's rule, rows in order
            goal = d.obs[0][row, 0]
            np.testing.assert_array_equal(entities[row, :present], goal)
            np.testing.assert_array_equal(entities[row, present:], 0.0)
        env.set_actions("Sorter?team=0", ActionTuple(np.zeros((3, 1), np.float32)))
        env.step()
        assert env.get_steps("Sorter?team=0")[0].obs[1].shape[1:] == (4, 2)
    finally:
        env.close()
        thread.join(10)
    assert game.error is None, game.error


def test_demo_round_trip_keeps_entities(tmp_path):
    from envs.demo.reader import load_demonstration
    from envs.demo.writer import DemoWriter

    spec = BehaviorSpec(
        (ObservationSpec((2,), "vector"), ObservationSpec((3, 2), "buffer", ObservationKind.ENTITIES)), ActionSpec(0, (3,))
    )
    path = str(tmp_path / "e.demo")
    entities = np.array([[1, 2], [3, 4], [0, 0]], np.float32)
    with DemoWriter(path, "demo", "Sorter", spec) as writer:
        for t in range(3):
            writer.add_step([np.array([t, -t], np.float32), entities * t], np.zeros(0, np.float32), np.array([t % 3]),
                            reward=1.0, done=t == 2)
    demo = load_demonstration(path)
    assert demo.behavior_spec.observation_specs[1].kind == ObservationKind.ENTITIES
    np.testing.assert_array_equal(demo.obs[1][1], entities)  # the rows that have their action paired


def test_lookalike_entities_hold_1_to_max_present_rows():
    env = LookAlike({"Sorter": {"vector": [4], "entities": [[5, 3]], "discrete": [3]}}, num_agents=64, seed=2)
    assert env.behavior_specs["Sorter"].observation_specs[1] == ObservationSpec((5, 3), "buffer_0", ObservationKind.ENTITIES)
    env.reset()
    d, _ = env.get_steps("Sorter")
    present = np.abs(d.obs[1]).sum(axis=2) > 0
    counts = present.sum(axis=1)
    assert counts.min() == 1 and counts.max() == 5
    assert np.all(present[:, :-1] >= present[:, 1:])  # the first rows, as a BufferSensor
    np.testing.assert_array_equal(d.obs[1][:, 0, 0], d.obs[0][:, 0])  # the sign, as the vector shows it
    with pytest.raises(EnvError, match="entities\\[0\\] must be \\[max_entities, entity_size\\]"):
        LookAlike({"B": {"entities": [[5]], "discrete": [2]}})


def _episodes(env: Sorter, policy, steps: int):
    env.reset()
    d, _ = env.get_steps("Sorter")
    running, returns = {}, []
    rng = np.random.default_rng(0)
    for _ in range(steps):
        env.set_actions("Sorter", policy(d, rng))
        env.step()
        nd, t = env.get_steps("Sorter")
        for i, a in enumerate(t.agent_id):
            returns.append(running.pop(int(a), 0.0) + float(t.reward[i]))
        for i, a in enumerate(nd.agent_id):
            running[int(a)] = running.get(int(a), 0.0) + float(nd.reward[i])
        d = nd
    return float(np.mean(returns))


def test_sorter_expert_sorts_and_random_fails():
    """Seed 2, 8 agents: the expert's mean return is the optimum (1 + 4) / 2 within the
    sampling noise of ~2000 episodes; a uniformly random policy is near -0.82."""
    env = Sorter(num_agents=8, seed=2)
    expert = _episodes(env, lambda d, rng: env.expert_action("Sorter", d), 1500)
    assert abs(expert - env.optimal_return()) < 0.1
    random = _episodes(Sorter(num_agents=8, seed=2), lambda d, rng: ActionTuple(
        np.zeros((len(d), 0), np.float32), rng.integers(0, 8, (len(d), 1)).astype(np.int32)), 1500)
    assert -1.0 < random < -0.6


def test_sorter_observations_and_rules():
    env = Sorter(max_tiles=3, num_values=5, num_agents=1, seed=0)
    env.reset()
    d, _ = env.get_steps("Sorter")
    tiles = d.obs[1][0]
    count = int((tiles[:, :5].sum(axis=1) > 0).sum())
    values = sorted(int(np.argmax(r[:5])) for r in tiles[:count])
    assert tiles.shape == (3, 6) and np.all(tiles[count:] == 0) and np.all(tiles[:, 5] == 0)
    for k, v in enumerate(values):  # ascending: +1 each, the visited flag set, progress grows
        env.set_actions("Sorter", ActionTuple(np.zeros((1, 0), np.float32), np.array([[v]], np.int32)))
        env.step()
        d, t = env.get_steps("Sorter")
        if k < count - 1:
            assert d.reward[0] == 1.0 and d.obs[0][0, 0] == pytest.approx((k + 1) / count)
            assert d.obs[1][0][:, 5].sum() == k + 1
    assert len(t) == 1 and t.reward[0] == 1.0 and not t.interrupted[0]
    wrong = int(np.argmax(d.obs[1][0][:, :5].sum(axis=0) == 0))  # a value no tile holds
    env.set_actions("Sorter", ActionTuple(np.zeros((1, 0), np.float32), np.array([[wrong]], np.int32)))
    env.step()
    _, t = env.get_steps("Sorter")
    assert len(t) == 1 and t.reward[0] == -1.0
    env.set_env_parameters({"num_tiles": Constant(1.0)})  # the curriculum's parameter, from the next episode
    t = None
    while t is None or len(t) == 0:  # the episode under way keeps its tiles
        d, _ = env.get_steps("Sorter")
        env.set_actions("Sorter", env.expert_action("Sorter", d))
        env.step()
        t = env.get_steps("Sorter")[1]
    for _ in range(6):  # every later episode has one tile: the right pick ends it with +1
        d, _ = env.get_steps("Sorter")
        env.set_actions("Sorter", env.expert_action("Sorter", d))
        env.step()
        d, t = env.get_steps("Sorter")
        assert len(t) == 1 and t.reward[0] == 1.0 and (np.abs(d.obs[1][0]).sum(axis=1) > 0).sum() == 1
    with pytest.raises(EnvError, match="num_values must be >= max_tiles"):
        Sorter(max_tiles=6, num_values=4)
