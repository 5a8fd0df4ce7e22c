"""The .demo reader on the real Unity recordings of tests/data/demos, and on bad files."""
from __future__ import annotations

import io
import shutil
import struct
from pathlib import Path
from typing import Dict, List, Tuple

import numpy as np
import pytest
from PIL import Image

from envs.base_env import ActionSpec, BehaviorSpec, ObservationKind, ObservationSpec
from envs.demo import check_demo_spec, load_demonstration
from envs.demo.png import decode_png, decode_png_zlib, encode_png, split_pngs
from envs.exceptions import DemoError
from test_demo_support import demo_dir, fields, framed, packed_floats, packed_varints, real_demo

# file -> (record format, steps, episodes, behavior name, observation shapes, action spec,
#          trailing bytes): the MANIFEST's table, with the shapes our loader gives.
EXPECTED: Dict[str, Tuple] = {
    "test__3148108c.demo": ("legacy", 57, 2, "Ball3DBrain", [(8,)], ActionSpec(2), 17),
    "Expert3DBallHard__3130d251.demo": ("legacy", 2271, 3, "3DBallHardLearning", [(45,)], ActionSpec(2), 30),
    "testdcvis__b46b1c66.demo": (
        "legacy", 136, 1, "VisualBananaLearning", [(84, 84, 3)], ActionSpec(0, (3, 3, 3, 2)), 23),
    "test__8f188ddd.demo": ("pair", 2144, 22, "3DBall?team=0", [(8,)], ActionSpec(2), 20),
    "testdcvis__bb9c48df.demo": (
        "pair", 38, 1, "VisualFoodCollectorLearning", [(84, 84, 3)], ActionSpec(0, (3, 3, 3, 2)), 0),
    "ExpertBasic__979acb95.demo": ("pair", 73, 11, "BasicLearning", [(20,)], ActionSpec(0, (3,)), 0),
    "testhybridvis__63e810be.demo": (
        "pair+action_spec", 25, 1, "VisualFoodCollector?team=0", [(84, 84, 3), (1,)], ActionSpec(3, (2,)), 26),
    # Legacy records carrying their image as a field-13 observation; the brain declares none.
    "testdcvis__3933a392.demo": (
        "legacy", 38, 1, "VisualFoodCollectorLearning", [(84, 84, 3)], ActionSpec(0, (3, 3, 3, 2)), 13),
    # Every record holds only an empty sensor: no observation data was recorded.
    "ExpertGrid__826fc632.demo": ("pair", 326, 97, "GridWorldLearning", [], ActionSpec(0, (5,)), 0),
}
LEGACY = {f for f, e in EXPECTED.items() if e[0] == "legacy"}


@pytest.fixture(scope="module")
def demos():
    """Each real file loaded once for the module."""
    return {name: load_demonstration(real_demo(name)) for name in EXPECTED}


def test_manifest_lists_exactly_the_expected_files():
    d = demo_dir()
    assert d is not None, "tests/data/demos (the real Unity recordings) is missing"
    rows = {}
    for line in (d / "MANIFEST.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 9 and cells[0].endswith(".demo"):
            rows[cells[0]] = (int(cells[3]), int(cells[4]), int(cells[8]))
    assert set(rows) == set(EXPECTED) == {p.name for p in d.glob("*.demo")}
    for name, (steps, episodes, trailing) in rows.items():
        assert (steps, episodes, trailing) == (EXPECTED[name][1], EXPECTED[name][2], EXPECTED[name][6])


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_file_loads_with_manifest_counts(demos, name):
    fmt, steps, episodes, behavior, shapes, action_spec, trailing = EXPECTED[name]
    demo = demos[name]
    assert demo.info.record_format == fmt
    assert demo.info.number_steps == steps
    assert demo.info.number_episodes == episodes
    # Counted from the rows, not copied from the meta. Unity's recorder adds one episode when
    # it closes the file, so a recording that stops right after an episode's done record
    # (ExpertGrid) declares one (empty) episode more than its rows hold.
    assert demo.episode_count == episodes - int(demo.done[-1])
    assert demo.info.behavior_name == behavior
    assert [o.shape for o in demo.behavior_spec.observation_specs] == shapes
    assert demo.behavior_spec.action_spec == action_spec
    # The trailing bytes after number_steps records are there and were ignored.
    _, records, end = framed(real_demo(name))
    assert len(records) == steps
    assert real_demo(name).stat().st_size - end == trailing
    # One agent id per segment of records: rows = records - agents.
    agents = len({int(fields(r if fmt == "legacy" else fields(r)[1][0]).get(10, [0])[0]) for _, r in records})
    t = steps - agents
    assert len(demo) == t
    for arr, shape in zip(demo.obs, shapes):
        assert arr.shape == (t,) + shape and arr.dtype == np.float32
    assert demo.continuous_actions.shape == (t, action_spec.continuous_size)
    assert demo.discrete_actions.shape == (t, action_spec.discrete_size)
    assert demo.continuous_actions.dtype == np.float32 and demo.discrete_actions.dtype == np.int32
    for arr in (demo.rewards, demo.done, demo.interrupted, demo.agent_ids, demo.episode_ids):
        assert arr.shape == (t,)
    assert demo.done.sum() == episodes - 1  # every real file ends inside an episode
    assert not (demo.interrupted & ~demo.done).any()
    for o in demo.obs:
        if o.ndim == 4:
            assert 0.0 <= o.min() and o.max() <= 1.0
    assert np.all(np.diff(demo.episode_ids) >= 0)


def _raw_observations(record: bytes, legacy: bool) -> List[np.ndarray]:
    """Observations of one record decoded from the wire, without envs.demo."""
    top = fields(record)
    if legacy:
        out = []
        for png in top.get(2, []):
            out.append(np.asarray(Image.open(io.BytesIO(png)), np.float32) / 255.0)
        for raw in top.get(13, []):  # ML-Agents 0.11: images as compressed observations
            out.append(np.asarray(Image.open(io.BytesIO(fields(raw)[3][0])).convert("RGB"), np.float32) / 255.0)
        if 1 in top:
            out.append(np.array(packed_floats(top[1][0]), np.float32))
        return out
    info = fields(top[1][0])
    out = []
    for raw in info[13]:
        o = fields(raw)
        shape = packed_varints(o[1][0])
        if 3 in o:  # PNG
            out.append(np.asarray(Image.open(io.BytesIO(o[3][0])).convert("RGB"), np.float32) / 255.0)
        elif int(np.prod(shape)):
            out.append(np.array(packed_floats(fields(o[4][0])[1][0]), np.float32))
    return out


def _raw_action(record: bytes, legacy: bool) -> Tuple[List[float], List[int]]:
    """``(continuous-or-vector floats, discrete ints)`` stored in one record."""
    top = fields(record)
    if legacy:
        return packed_floats(top.get(4, [b""])[0]), []
    action = fields(top[2][0])
    if 6 in action or 7 in action:
        return packed_floats(action.get(6, [b""])[0]), packed_varints(action.get(7, [b""])[0])
    return packed_floats(action.get(1, [b""])[0]), []


def _raw_reward(record: bytes, legacy: bool) -> float:
    info = fields(record) if legacy else fields(fields(record)[1][0])
    return struct.unpack("<f", info[7][0])[0] if 7 in info else 0.0


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_first_rows_match_an_independent_wire_decode(demos, name):
    """Row 0 = observation of record 0 with the action and reward stored in record 1."""
    legacy = name in LEGACY
    demo = demos[name]
    _, records, _ = framed(real_demo(name))
    for row, (rec, nxt) in enumerate([(0, 1), (1, 2)]):
        raw_obs = _raw_observations(records[rec][1], legacy)
        assert len(raw_obs) == len(demo.obs)
        for got, want in zip(demo.obs, raw_obs):
            np.testing.assert_allclose(got[row], want.reshape(got[row].shape), atol=1e-6)
        floats, ints = _raw_action(records[nxt][1], legacy)
        spec = demo.behavior_spec.action_spec
        if ints or spec.continuous_size and spec.discrete_size:
            np.testing.assert_allclose(demo.continuous_actions[row], floats)
            np.testing.assert_array_equal(demo.discrete_actions[row], ints)
        elif spec.continuous_size:
            np.testing.assert_allclose(demo.continuous_actions[row], floats)
        else:
            np.testing.assert_array_equal(demo.discrete_actions[row], np.rint(floats).astype(int))
        assert demo.rewards[row] == pytest.approx(_raw_reward(records[nxt][1], legacy))


def test_known_values(demos):
    basic = demos["ExpertBasic__979acb95.demo"]
    assert int(np.argmax(basic.obs[0][0])) == 10 and basic.obs[0][0].sum() == 1.0
    assert basic.discrete_actions[0, 0] == 2
    # Basic: 7 moves right from position 10 reach the large goal (+1, minus the step cost).
    assert basic.done[6] and basic.rewards[6] == pytest.approx(0.99)
    ball = demos["test__3148108c.demo"]
    np.testing.assert_allclose(ball.obs[0][0, :5], [-0.011683367, 0.024519896, -0.36729145, 4.0, -1.2293177])
    hybrid = demos["testhybridvis__63e810be.demo"]
    np.testing.assert_allclose(hybrid.continuous_actions[0], [-0.2949032485, 0.9692676067, -1.0])
    assert hybrid.discrete_actions[0, 0] == 0


def test_recorded_behavior_ids_split_into_config_name_and_team(demos):
    """Unity's DemonstrationRecorder writes FullyQualifiedBehaviorName (``3DBall?team=0``
    since ML-Agents 0.14); a recording belongs to the config section ``3DBall``."""
    ids = {name: demos[name].info.behavior_id for name in ("test__8f188ddd.demo", "testhybridvis__63e810be.demo",
                                                           "ExpertBasic__979acb95.demo")}
    assert [(i.name, i.team, i.full) for i in ids.values()] == [
        ("3DBall", 0, "3DBall?team=0"), ("VisualFoodCollector", 0, "VisualFoodCollector?team=0"),
        ("BasicLearning", 0, "BasicLearning")]


def test_gray_camera_reads_from_rgb_and_from_true_one_channel_pngs(tmp_path):
    """A 1-channel camera: Unity sends its RGB24 texture's PNG (colours averaged, as
    ML-Agents' process_pixels does); other producers send a 1-channel PNG, which reads too."""
    from envs.demo import demonstration_pb2 as pb

    brain = pb.BrainParametersProto(brain_name="Cam?team=0")
    brain.action_spec.num_continuous_actions = 1
    rgb = np.zeros((3, 5, 3), np.uint8)
    rgb[..., 0], rgb[..., 1], rgb[..., 2] = 30, 60, 150
    records = []
    for t in range(3):
        info = pb.AgentInfoProto(id=2)
        info.observations.add(shape=[3, 5, 1], dimension_properties=[2, 2, 1],
                              compression_type=pb.COMPRESSION_TYPE_PNG, compressed_data=encode_png(rgb))
        info.observations.add(shape=[1, 3, 5], dimension_properties=[1, 2, 2], compression_type=pb.COMPRESSION_TYPE_PNG,
                              compressed_data=encode_png(np.full((3, 5, 1), 77, np.uint8)))
        records.append(pb.AgentInfoActionPairProto(agent_info=info,
                                                   action_info=pb.AgentActionProto(continuous_actions=[t])))
    demo = load_demonstration(_craft(tmp_path / "gray.demo", brain, records))
    assert [o.shape for o in demo.behavior_spec.observation_specs] == [(3, 5, 1), (3, 5, 1)]
    np.testing.assert_allclose(demo.obs[0], np.full((2, 3, 5, 1), 80 / 255), atol=1e-6)
    np.testing.assert_allclose(demo.obs[1], np.full((2, 3, 5, 1), 77 / 255), atol=1e-6)
    assert demo.info.behavior_id.name == "Cam"


def test_pair_era_stores_the_previous_action(demos):
    """In the 2020 3DBall file the rotation change between records t and t+1 is driven
    exactly by the action stored in record t+1: the reason for the one-record shift."""
    demo = demos["test__8f188ddd.demo"]
    same = (demo.agent_ids[1:] == demo.agent_ids[:-1]) & ~demo.done[:-1] & ~demo.done[1:]
    delta = demo.obs[0][1:, 0] - demo.obs[0][:-1, 0]
    shifted = np.corrcoef(demo.continuous_actions[:-1][same, 0], delta[same])[0, 1]
    unshifted = np.corrcoef(demo.continuous_actions[1:][same, 0], delta[same])[0, 1]
    assert shifted > 0.99 and abs(unshifted) < 0.5


def test_episode_returns_match_unity_mean_reward(demos):
    for name in ("ExpertBasic__979acb95.demo", "test__3148108c.demo", "Expert3DBallHard__3130d251.demo"):
        demo = demos[name]
        assert demo.mean_return == pytest.approx(demo.info.mean_reward, rel=1e-4)
    ball = demos["test__8f188ddd.demo"]
    assert ball.interrupted.sum() == 21  # every finished episode hit max_step


def test_directory_of_files_is_merged(tmp_path):
    for name in ("test__3148108c.demo", "test__8f188ddd.demo"):
        shutil.copy(real_demo(name), tmp_path / name)
    (tmp_path / "notes.txt").write_text("ignored")
    merged = load_demonstration(tmp_path)
    a = load_demonstration(real_demo("test__3148108c.demo"))
    b = load_demonstration(real_demo("test__8f188ddd.demo"))
    assert len(merged) == len(a) + len(b)
    assert merged.episode_count == 24
    assert merged.info.number_steps == 57 + 2144 and merged.info.record_format == "mixed"
    np.testing.assert_array_equal(merged.obs[0][: len(a)], a.obs[0])
    shutil.copy(real_demo("ExpertBasic__979acb95.demo"), tmp_path / "zz.demo")
    with pytest.raises(DemoError, match="different behavior specs"):
        load_demonstration(tmp_path)
    empty = tmp_path / "empty_dir"
    empty.mkdir()
    with pytest.raises(DemoError, match="no .demo files"):
        load_demonstration(empty)


def test_spec_mismatch_names_both_specs(demos):
    demo = demos["test__8f188ddd.demo"]
    check_demo_spec(demo, "3DBall", BehaviorSpec((ObservationSpec((8,), "other name"),), ActionSpec(2)))
    wrong = BehaviorSpec((ObservationSpec((8,)),), ActionSpec(0, (2,)))
    with pytest.raises(DemoError) as e:
        check_demo_spec(demo, "3DBall", wrong)
    msg = str(e.value)
    assert "\n" not in msg and "test__8f188ddd.demo" in msg and "'3DBall'" in msg
    assert "continuous 2" in msg and "discrete [2]" in msg and "actions differ" in msg
    visual = BehaviorSpec((ObservationSpec((84, 84, 1), "cam", ObservationKind.VISUAL),), ActionSpec(2))
    with pytest.raises(DemoError, match=r"observation 0 differs.*\(8,\) vector.*\(84, 84, 1\) visual"):
        check_demo_spec(demo, "3DBall", visual)


# ----------------------------------------------------------------------- bad files
def _error(path: Path) -> str:
    with pytest.raises(DemoError) as e:
        load_demonstration(path)
    msg = str(e.value)
    assert "\n" not in msg and str(path) in msg
    return msg


def test_missing_and_empty_files(tmp_path):
    assert "not found" in _error(tmp_path / "missing.demo")
    (tmp_path / "empty.demo").write_bytes(b"")
    assert "byte 0: empty file" in _error(tmp_path / "empty.demo")


@pytest.fixture()
def small(tmp_path):
    """A copy of the 57-record legacy file, its bytes and record offsets."""
    src = real_demo("test__3148108c.demo")
    _, records, end = framed(src)
    return tmp_path / "t.demo", src.read_bytes(), [o for o, _ in records], end


def test_truncated_files_name_the_offset(small):
    path, data, offsets, end = small
    cases = {
        10: "byte 0: truncated",  # inside the metadata
        33: "byte 33: truncated file: it ends before the behavior parameters",
        40: "byte 33: truncated",  # inside the behavior parameters
        offsets[5] + 3: f"byte {offsets[5]}: truncated file: record 5 of 57 is cut off",
        offsets[56]: f"byte {offsets[56]}: truncated file: it ends after 56 of 57 records",
        end - 1: f"byte {offsets[56]}: truncated file: record 56 of 57 is cut off",
    }
    for size, expected in cases.items():
        path.write_bytes(data[:size])
        assert expected in _error(path), size
    path.write_bytes(data[:end])  # without the trailing bytes: fine
    assert len(load_demonstration(path)) == 56


def test_corrupt_bytes_name_the_offset(small):
    path, data, offsets, end = small
    path.write_bytes(b"\x7f" + data[1:])  # metadata longer than the 32 reserved bytes
    assert "byte 0: corrupt metadata" in _error(path)
    o = offsets[7]
    path.write_bytes(data[:o] + b"\xff" * 6 + data[o + 6:])
    assert f"byte {o}: corrupt file: corrupt length prefix" in _error(path)
    # A record body that is not a protobuf: a field whose length runs past the record.
    length = data[o]
    body = b"\x0a\x7f" + b"\x00" * (length - 2)
    path.write_bytes(data[:o + 1] + body + data[o + 1 + length:])
    assert f"byte {o}: corrupt record 7" in _error(path)
    # Well-formed protobuf with the wrong number of vector values.
    pad = length - 7  # field 1 as one fixed32, then a text observation as filler
    body = b"\x0d\x00\x00\x80\x3f" + b"\x1a" + bytes([pad]) + b"x" * pad
    path.write_bytes(data[:o + 1] + body + data[o + 1 + length:])
    assert f"byte {o}: record 7: 1 vector observation values, the behavior parameters declare 8" in _error(path)


def test_corrupt_png_names_the_record(tmp_path):
    src = real_demo("testdcvis__bb9c48df.demo")
    data = bytearray(src.read_bytes())
    _, records, _ = framed(src)
    offset, body = records[3]
    idat = data.index(b"IDAT", offset)
    data[idat + 10: idat + 40] = b"\x00" * 30
    path = tmp_path / "vis.demo"
    path.write_bytes(bytes(data))
    msg = _error(path)
    assert f"byte {offset}: record 3: visual observation 0" in msg


def test_number_steps_zero_reads_to_the_end(small):
    path, data, offsets, end = small
    meta = bytearray(data[:33])
    i = meta.index(b"\x18\x39")  # field 3 = 57
    meta[i + 1] = 0
    path.write_bytes(bytes(meta) + data[33:end])
    demo = load_demonstration(path)
    assert demo.info.number_steps == 57 and demo.info.number_episodes == 2
    path.write_bytes(bytes(meta) + data[33:])  # now the trailing bytes are read as a record
    assert "truncated" in _error(path) or "corrupt" in _error(path)


# ---------------------------------------------------------------------------- PNG
def test_own_png_decoder_matches_pillow():
    rng = np.random.default_rng(1)
    smooth = np.cumsum(rng.integers(0, 3, (20, 17, 3)), axis=1).astype(np.uint8)
    for image in (smooth, rng.integers(0, 255, (9, 11, 3), dtype=np.uint8)):
        buf = io.BytesIO()
        Image.fromarray(image).save(buf, format="PNG", optimize=True)  # adaptive filters
        np.testing.assert_array_equal(decode_png_zlib(buf.getvalue()), image)
        np.testing.assert_array_equal(decode_png(buf.getvalue()), image)
        np.testing.assert_array_equal(decode_png_zlib(encode_png(image)), image)
    _, records, _ = framed(real_demo("testhybridvis__63e810be.demo"))
    png = fields(fields(fields(records[0][1])[1][0])[13][0])[3][0]
    np.testing.assert_array_equal(decode_png_zlib(png), decode_png(png))
    assert len(split_pngs(png + png)) == 2


# --------------------------------------------------------------- crafted files
def _craft(path: Path, brain, records, steps=None) -> Path:
    """A .demo file laid out like Unity's, from protobuf messages."""
    from envs.demo import demonstration_pb2 as pb
    from envs.demo.framing import encode_varint32

    meta = pb.DemonstrationMetaProto(api_version=1, demonstration_name="crafted",
                                     number_steps=len(records) if steps is None else steps)
    body = meta.SerializeToString()
    out = encode_varint32(len(body)) + body
    out += b"\x00" * (33 - len(out))
    for m in [brain] + list(records):
        b = m.SerializeToString()
        out += encode_varint32(len(b)) + b
    path.write_bytes(out)
    return path


def test_legacy_gray_camera_masks_and_stacking(tmp_path):
    from envs.demo import demonstration_pb2 as pb

    brain = pb.BrainParametersProto(vector_observation_size=2, num_stacked_vector_observations=3,
                                    vector_action_size=[3, 2], brain_name="Legacy")
    brain.camera_resolutions.add(width=4, height=2, gray_scale=True)
    rgb = np.zeros((2, 4, 3), np.uint8)
    rgb[..., 0], rgb[..., 1], rgb[..., 2] = 30, 60, 90
    records = []
    for t in range(4):
        records.append(pb.AgentInfoProto(
            stacked_vector_observation=list(range(t, t + 6)), visual_observations=[encode_png(rgb)],
            stored_vector_actions=[t % 3, 1] if t else [], reward=t, done=t == 2, id=-5,
            action_mask=[False, t == 1, False, True, False]))
    demo = load_demonstration(_craft(tmp_path / "l.demo", brain, records))
    assert demo.info.record_format == "legacy"
    assert [o.shape for o in demo.behavior_spec.observation_specs] == [(2, 4, 1), (6,)]
    np.testing.assert_allclose(demo.obs[0][0], np.full((2, 4, 1), 60 / 255), atol=1e-6)
    np.testing.assert_array_equal(demo.obs[1][:, 0], [0, 1, 2])
    np.testing.assert_array_equal(demo.discrete_actions, [[1, 1], [2, 1], [0, 1]])
    assert demo.done.tolist() == [False, True, False] and demo.episode_ids.tolist() == [0, 0, 1]
    assert demo.action_masks[1].tolist() == [False, True, False, True, False]


def test_pair_layouts_mapping_and_vector_action_fallback(tmp_path):
    from envs.demo import demonstration_pb2 as pb

    brain = pb.BrainParametersProto(vector_action_size=[2], vector_action_space_type=pb.SPACE_TYPE_CONTINUOUS,
                                    brain_name="Pair")
    chw = np.arange(24, dtype=np.float32).reshape(2, 3, 4)  # (C, H, W) float observation
    frames = [np.full((3, 5, 3), v, np.uint8) for v in (10, 200)]  # two stacked gray frames
    records = []
    for t in range(3):
        info = pb.AgentInfoProto(reward=1.0, id=4)
        o = info.observations.add(shape=[2, 3, 4], dimension_properties=[1, 2, 2])
        o.float_data.data.extend(chw.reshape(-1).tolist())
        o = info.observations.add(shape=[3, 5, 2], compression_type=pb.COMPRESSION_TYPE_PNG,
                                  compressed_data=encode_png(frames[0]) + encode_png(frames[1]),
                                  compressed_channel_mapping=[0, 0, 0, 1, 1, 1])
        info.observations.add(shape=[0])
        records.append(pb.AgentInfoActionPairProto(
            agent_info=info, action_info=pb.AgentActionProto(vector_actions=[0.5 * t, -t])))
    demo = load_demonstration(_craft(tmp_path / "p.demo", brain, records))
    assert demo.info.record_format == "pair"
    assert [o.shape for o in demo.behavior_spec.observation_specs] == [(3, 4, 2), (3, 5, 2)]
    np.testing.assert_array_equal(demo.obs[0][0], chw.transpose(1, 2, 0))
    np.testing.assert_allclose(demo.obs[1][0, 0, 0], [10 / 255, 200 / 255], atol=1e-6)
    np.testing.assert_allclose(demo.continuous_actions, [[0.5, -1], [1.0, -2]])


def test_unsupported_and_inconsistent_records(tmp_path):
    from envs.demo import demonstration_pb2 as pb

    brain = pb.BrainParametersProto(vector_action_size=[2], brain_name="B")
    info = pb.AgentInfoProto(id=1)
    info.observations.add(shape=[2, 2]).float_data.data.extend([0, 0, 0, 0])
    path = _craft(tmp_path / "2d.demo", brain, [pb.AgentInfoActionPairProto(agent_info=info)] * 2)
    assert "a 2-D observation must be a BufferSensor's, dimension properties [4, 1]" in _error(path)
    good = pb.AgentInfoProto(id=1)
    good.observations.add(shape=[2]).float_data.data.extend([0, 0])
    bad = pb.AgentInfoProto(id=1)
    bad.observations.add(shape=[2]).float_data.data.extend([0, 0, 0])
    path = _craft(tmp_path / "n.demo", brain, [pb.AgentInfoActionPairProto(agent_info=m) for m in (good, bad)])
    msg = _error(path)
    assert "record 1: observation 0 has 3 values for shape [2]" in msg
    act = pb.AgentActionProto(vector_actions=[5])
    path = _craft(tmp_path / "a.demo", brain, [pb.AgentInfoActionPairProto(agent_info=good, action_info=act)] * 2)
    assert "record 0: discrete action 5 out of range for branch 0 of size 2" in _error(path)


def test_observation_shapes_come_from_the_records_when_the_brain_declares_none(tmp_path):
    """The rule behind testdcvis__3933a392 and ExpertGrid__826fc632: a legacy record's images
    may be compressed observations (field 13, ML-Agents 0.11) whose shapes only the first
    record gives; records that carry no observation data give a demo without
    observations (ML-Agents read it as a zero-width vector) instead of an error."""
    from envs.demo import demonstration_pb2 as pb

    img = np.zeros((5, 6, 3), np.uint8)
    img[..., 1] = 200
    brain = pb.BrainParametersProto(vector_observation_size=2, vector_action_size=[4], brain_name="L")
    records = []
    for t in range(3):
        info = pb.AgentInfoProto(stacked_vector_observation=[t, -t], stored_vector_actions=[t] if t else [], id=3)
        o = info.observations.add(shape=[5, 6, 3], compression_type=pb.COMPRESSION_TYPE_PNG)
        o.compressed_data = encode_png(img)
        records.append(info)
    demo = load_demonstration(_craft(tmp_path / "l11.demo", brain, records))
    assert demo.info.record_format == "legacy"
    assert [(o.shape, o.kind) for o in demo.behavior_spec.observation_specs] == [
        ((5, 6, 3), ObservationKind.VISUAL), ((2,), ObservationKind.VECTOR)]
    np.testing.assert_allclose(demo.obs[0][1, 0, 0], [0.0, 200 / 255, 0.0], atol=1e-6)
    np.testing.assert_array_equal(demo.obs[1][:, 0], [0, 1])
    np.testing.assert_array_equal(demo.discrete_actions[:, 0], [1, 2])
    # A later record without the image is inconsistent: one clear error.
    records[2].ClearField("observations")
    assert "record 2: 0 observations, the first record has 1" in _error(_craft(tmp_path / "bad.demo", brain, records))

    # Pair era, only empty sensors in every record: loads, without observations.
    brain = pb.BrainParametersProto(vector_action_size=[5], brain_name="Grid")
    brain.camera_resolutions.add(width=84, height=84)
    pairs = []
    for t in range(4):
        info = pb.AgentInfoProto(id=7, reward=float(t), done=t == 2)
        info.observations.add(shape=[0])
        pairs.append(pb.AgentInfoActionPairProto(agent_info=info, action_info=pb.AgentActionProto(vector_actions=[t])))
    demo = load_demonstration(_craft(tmp_path / "grid.demo", brain, pairs))
    assert demo.behavior_spec.observation_specs == () and demo.obs == []
    assert len(demo) == 3 and demo.discrete_actions[:, 0].tolist() == [1, 2, 3]
    assert demo.episode_count == 2
    with pytest.raises(DemoError, match=r"0 vs 1 observations"):
        check_demo_spec(demo, "Grid", BehaviorSpec((ObservationSpec((84, 84, 3), "cam", ObservationKind.VISUAL),),
                                                   ActionSpec(0, (5,))))
    # A legacy file with nothing declared and nothing recorded is still refused.
    brain = pb.BrainParametersProto(vector_action_size=[2], brain_name="E")
    empty = [pb.AgentInfoProto(id=1, stored_vector_actions=[1])] * 2
    assert "no observations declared" in _error(_craft(tmp_path / "none.demo", brain, empty))
