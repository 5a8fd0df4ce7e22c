"""DemoWriter -> load_demonstration round trips, and the bytes the writer lays out."""
from __future__ import annotations

import io
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from envs.base_env import ActionSpec, BehaviorSpec, ObservationKind, ObservationSpec
from envs.demo import DemoWriter, check_demo_spec, load_demonstration
from envs.demo import demonstration_pb2
from envs.exceptions import DemoError
from test_demo_support import fields, framed, packed_varints, varint

VISUAL = ObservationKind.VISUAL


def _episode_steps(rng, spec, agent_id, length, interrupted=False, visual_scale=1.0):
    """``length`` steps of one agent; the last one is terminal."""
    steps = []
    for t in range(length):
        obs = [rng.random(o.shape).astype(np.float32) * (visual_scale if o.kind == VISUAL else 10)
               for o in spec.observation_specs]
        cont = rng.uniform(-1, 1, spec.action_spec.continuous_size).astype(np.float32)
        disc = np.array([rng.integers(0, b) for b in spec.action_spec.discrete_branches], np.int32)
        done = t == length - 1
        steps.append(dict(obs=obs, continuous_action=cont, discrete_action=disc, reward=float(t) + 0.5,
                          done=done, interrupted=interrupted and done, agent_id=agent_id))
    return steps


def _write(path, spec, steps, name="roundtrip"):
    with DemoWriter(path, name, "Behavior", spec) as w:
        for s in steps:
            w.add_step(**{k: (None if k.endswith("_action") and np.size(v) == 0 else v) for k, v in s.items()})
    return w


def _expected_rows(steps):
    """Rows as the reader defines them: (s_t, a_t, r_{t+1}, done_{t+1}) per agent."""
    by_agent = {}
    for s in steps:
        by_agent.setdefault(s["agent_id"], []).append(s)
    rows = []
    for agent_steps in by_agent.values():
        for cur, nxt in zip(agent_steps[:-1], agent_steps[1:]):
            rows.append((cur, nxt))
    return rows


def _check_round_trip(demo, steps, spec):
    rows = _expected_rows(steps)
    assert len(demo) == len(rows)
    for r, (cur, nxt) in enumerate(rows):
        for i, o in enumerate(spec.observation_specs):
            tol = 0.5 / 255 + 1e-6 if o.kind == VISUAL else 1e-6
            want = np.clip(cur["obs"][i], 0, 1) if o.kind == VISUAL else cur["obs"][i]
            np.testing.assert_allclose(demo.obs[i][r], want, atol=tol)
        np.testing.assert_allclose(demo.continuous_actions[r], cur["continuous_action"], atol=1e-6)
        np.testing.assert_array_equal(demo.discrete_actions[r], cur["discrete_action"])
        assert demo.rewards[r] == pytest.approx(nxt["reward"])
        assert demo.done[r] == nxt["done"] and demo.interrupted[r] == nxt["interrupted"]
        assert demo.agent_ids[r] == cur["agent_id"]


def test_vector_round_trip(tmp_path):
    spec = BehaviorSpec((ObservationSpec((5,), "vec"),), ActionSpec(2))
    rng = np.random.default_rng(0)
    steps = (_episode_steps(rng, spec, 1, 6) + _episode_steps(rng, spec, 2, 4, interrupted=True)
             + _episode_steps(rng, spec, 3, 3)[:2])
    w = _write(tmp_path / "v.demo", spec, steps)
    demo = load_demonstration(tmp_path / "v.demo")
    _check_round_trip(demo, steps, spec)
    assert demo.info.record_format == "pair+action_spec"
    assert demo.info.number_steps == 12 == w.steps
    assert demo.info.number_episodes == 3 == demo.episode_count == w.episodes
    assert demo.info.mean_reward == pytest.approx(sum(s["reward"] for s in steps) / 3)
    assert demo.info.name == "roundtrip" and demo.info.behavior_name == "Behavior"
    assert demo.done.sum() == 2 and demo.interrupted.sum() == 1
    assert demo.action_masks is None
    check_demo_spec(demo, "Behavior", spec)


def test_visual_round_trip_with_gray_stacked_and_masks(tmp_path):
    spec = BehaviorSpec(
        (ObservationSpec((6, 5, 3), "rgb", VISUAL), ObservationSpec((4, 7, 1), "gray", VISUAL),
         ObservationSpec((3, 3, 4), "stack4", VISUAL), ObservationSpec((2, 2, 2), "two", VISUAL)),
        ActionSpec(0, (3, 2)),
    )
    rng = np.random.default_rng(1)
    steps = _episode_steps(rng, spec, 7, 5, visual_scale=1.2)  # values above 1 are clipped
    masks = [[np.array([t % 2 == 0, False, True]), np.array([False, t == 3])] for t in range(5)]
    path = tmp_path / "vis.demo"
    with DemoWriter(path, "vis", "Behavior", spec) as w:
        for s, m in zip(steps, masks):
            w.add_step(**{k: v for k, v in s.items() if k != "continuous_action"}, action_mask=m)
    demo = load_demonstration(path)
    _check_round_trip(demo, steps, spec)
    assert [o.shape for o in demo.behavior_spec.observation_specs] == [o.shape for o in spec.observation_specs]
    assert all(o.kind == VISUAL for o in demo.behavior_spec.observation_specs)
    assert demo.action_masks.shape == (4, 5)
    np.testing.assert_array_equal(demo.action_masks[3], np.concatenate(masks[3]))
    # The bytes follow ML-Agents 2.0: (C, H, W) shapes, PNGs Pillow reads, channel mapping.
    _, records, _ = framed(path)
    obs = [fields(o) for o in fields(fields(records[0][1])[1][0])[13]]
    assert packed_varints(obs[0][1][0]) == [3, 6, 5] and packed_varints(obs[0][6][0]) == [1, 2, 2]
    assert Image.open(io.BytesIO(obs[0][3][0])).size == (5, 6)
    assert 5 not in obs[1]  # gray: one RGB image, no mapping (as Unity's cameras)
    assert packed_varints(obs[2][5][0]) == [0, 1, 2, 3, -1, -1]
    assert packed_varints(obs[3][5][0]) == [0, 1, -1]


def test_hybrid_interleaved_agents_round_trip(tmp_path):
    spec = BehaviorSpec(
        (ObservationSpec((8, 8, 3), "cam", VISUAL), ObservationSpec((1,), "vec")), ActionSpec(3, (2,))
    )
    rng = np.random.default_rng(2)
    a, b = _episode_steps(rng, spec, 10, 4), _episode_steps(rng, spec, 11, 6)
    interleaved = [s for pair in zip(a, b[:4]) for s in pair] + b[4:]
    _write(tmp_path / "h.demo", spec, interleaved)
    demo = load_demonstration(tmp_path / "h.demo")
    _check_round_trip(demo, interleaved, spec)
    # Rows are grouped per agent (agents in order of first appearance): episodes contiguous.
    np.testing.assert_array_equal(demo.agent_ids, [10] * 3 + [11] * 5)
    np.testing.assert_array_equal(demo.episode_ids, [0] * 3 + [1] * 5)
    assert demo.episode_count == 2 and demo.episode_returns.tolist() == pytest.approx([1.5 + 2.5 + 3.5, 15 + 2.5])


def test_layout_meta_and_brain(tmp_path):
    spec = BehaviorSpec((ObservationSpec((2,)),), ActionSpec(0, (4, 2)))
    path = tmp_path / "m.demo"
    with DemoWriter(path, "a-very-long-demonstration-name", "Beh", spec) as w:
        for t in range(300):
            w.add_step([np.ones(2)], discrete_action=[t % 4, 1], reward=-1.0, done=t % 100 == 99, agent_id=t // 100)
    data = path.read_bytes()
    n, p = varint(data, 0)
    assert p + n <= 33 and set(data[p + n:33]) <= {0}
    meta = demonstration_pb2.DemonstrationMetaProto.FromString(data[p:p + n])
    assert meta.demonstration_name == "a-very-long-demo" and meta.api_version == 1
    assert (meta.number_steps, meta.number_episodes) == (300, 3) and meta.mean_reward == pytest.approx(-100.0)
    n, p = varint(data, 33)
    brain = fields(data[p:p + n])
    assert brain[7] == [b"Beh"] and 9 in brain and 1 not in brain
    action_spec = fields(brain[9][0])
    assert action_spec[2] == [2] and packed_varints(action_spec[3][0]) == [4, 2]


def test_unclosed_file_still_loads(tmp_path):
    spec = BehaviorSpec((ObservationSpec((3,)),), ActionSpec(1))
    w = DemoWriter(tmp_path / "u.demo", "u", "B", spec)
    for t in range(5):
        w.add_step([np.full(3, t)], [0.1 * t], reward=1.0)
    w._file.flush()  # a crash before close: the metadata still says 0 steps
    demo = load_demonstration(tmp_path / "u.demo")
    assert demo.info.number_steps == 5 and demo.info.number_episodes == 1 and len(demo) == 4
    assert demo.info.mean_reward == pytest.approx(5.0)
    w.close()
    w.close()  # idempotent


def test_writer_rejects_bad_steps(tmp_path):
    spec = BehaviorSpec((ObservationSpec((3,)), ObservationSpec((4, 4, 3), "cam", VISUAL)), ActionSpec(1, (2,)))
    with DemoWriter(tmp_path / "bad.demo", "bad", "B", spec) as w:
        ok = [np.zeros(3), np.zeros((4, 4, 3))]
        cases = [
            (dict(obs=ok[:1], continuous_action=[0.0], discrete_action=[0]), "1 observations given"),
            (dict(obs=[np.zeros(4), ok[1]], continuous_action=[0.0], discrete_action=[0]), "observation 0 has shape"),
            (dict(obs=ok, continuous_action=[0.0, 1.0], discrete_action=[0]), "continuous action has 2 values"),
            (dict(obs=ok, continuous_action=[0.0], discrete_action=[2]), "out of range for branch 0"),
            (dict(obs=ok, continuous_action=[0.0]), "no action given"),
            (dict(obs=ok, continuous_action=[0.0], discrete_action=[1], action_mask=[True]), "action mask has 1"),
        ]
        for kwargs, message in cases:
            with pytest.raises(DemoError, match=message):
                w.add_step(**kwargs)
    with pytest.raises(DemoError, match="after close"):
        w.add_step(ok, [0.0], [0])
    with pytest.raises(DemoError, match="cannot create"):
        DemoWriter(tmp_path / "no" / "such" / "dir.demo", "x", "B", spec)


def test_demo_package_imports_no_tensorflow_or_trainers():
    code = (
        "import sys, envs.demo, envs.demo.writer; "
        "assert not [m for m in sys.modules if m.split('.')[0] in ('trainers', 'tensorflow')]; "
        "import trainers.cli.demo; "
        "bad = [m for m in sys.modules if m.split('.')[0] == 'tensorflow' or m.startswith('trainers.tf')]; "
        "assert not bad, bad; "
        "src = open(envs.demo.demonstration_pb2.__file__).read(); "
        "assert 'ValidateProtobufRuntimeVersion' not in src  # keeps the protobuf>=4.25 floor"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=str(__import__("pathlib").Path(__file__).resolve().parents[2]))
    assert result.returncode == 0, result.stderr


def test_proto_field_numbers_follow_unity():
    """The numbers Unity's files use (docs/ML-AGENTS-FACTS.md#5-the-demo-file-format): a contract, not an
    implementation detail."""
    pb = demonstration_pb2
    numbers = lambda m: {f.name: f.number for f in m.DESCRIPTOR.fields}  # noqa: E731
    assert numbers(pb.DemonstrationMetaProto) == {
        "api_version": 1, "demonstration_name": 2, "number_steps": 3, "number_episodes": 4, "mean_reward": 5}
    brain = numbers(pb.BrainParametersProto)
    assert (brain["vector_observation_size"], brain["camera_resolutions"], brain["vector_action_space_type"],
            brain["brain_name"], brain["action_spec"]) == (1, 4, 6, 7, 9)
    info = numbers(pb.AgentInfoProto)
    assert (info["stacked_vector_observation"], info["stored_vector_actions"], info["reward"], info["done"],
            info["max_step_reached"], info["id"], info["action_mask"], info["observations"],
            info["group_id"], info["group_reward"]) == (1, 4, 7, 8, 9, 10, 11, 13, 14, 15)
    obs = numbers(pb.ObservationProto)
    assert (obs["shape"], obs["compression_type"], obs["compressed_data"], obs["float_data"],
            obs["compressed_channel_mapping"], obs["dimension_properties"]) == (1, 2, 3, 4, 5, 6)
    assert numbers(pb.AgentActionProto) == {
        "vector_actions": 1, "value": 4, "continuous_actions": 6, "discrete_actions": 7}
    assert numbers(pb.AgentInfoActionPairProto) == {"agent_info": 1, "action_info": 2}
