"""The Unity communicator: wire bytes, handshake, steps mapping, side channels, faults.

A scripted fake game (`envs.unity.fake_game`) plays Unity's side of the protocol over
loopback gRPC, in a thread or as a launched "build" (a script taking Unity's flags).
"""
from __future__ import annotations

import os
import socket
import struct
import time
import uuid
from pathlib import Path
from typing import List, Optional

import numpy as np
import pytest

from envs.base_env import ActionTuple, BehaviorId, ObservationKind
from envs.demo import demonstration_pb2 as demo_pb
from envs.demo.png import decode_png, encode_png
from envs.managers import make_env_manager
from envs.exceptions import EnvError, EnvWorkerError
from envs.registry import parse_env_id, validate_env
from envs.unity import communicator_pb2 as pb
from envs.unity.environment import API_VERSION, EngineConfig, UnityEnv, check_communication_version
from envs.unity.fake_game import FakeBehavior, FakeGame, free_port, start_in_thread, write_fake_build
from envs.managers.unity import UnityEnvManager
from envs.unity.options import UnityOptions, engine_config
from envs.unity.side_channels import (
    EngineConfigurationChannel,
    EnvironmentParametersChannel,
    IncomingMessage,
    SideChannelManager,
    StatsSideChannel,
    encode_side_channels,
    split_side_channels,
)


def connect(behaviors, env_kwargs=None, **game_kwargs):
    port = free_port()
    game = FakeGame(port, behaviors, **game_kwargs)
    thread = start_in_thread(game)
    logs: List[str] = []
    env = UnityEnv(None, base_port=port, host="127.0.0.1", timeout_wait=20, log=logs.append, seed=11,
                   env_parameters={"difficulty": 2.5}, **(env_kwargs or {}))
    return env, game, thread, logs


# ----------------------------------------------------------------------------- wire bytes
def test_messages_match_hand_written_wire_bytes() -> None:
    """Field numbers and types of ML-Agents' API 1.5, checked byte by byte."""
    header = pb.HeaderProto(status=200)
    assert header.SerializeToString() == b"\x08\xc8\x01"  # field 1 varint 200
    init_out = pb.UnityRLInitializationOutputProto(communication_version="1.5.0", package_version="2.0.0")
    init_out.capabilities.baseRLCapabilities = True
    init_out.capabilities.hybridActions = True
    # 2: "1.5.0", 7: "2.0.0", 8: {1: true, 4: true}
    expected = b"\x12\x051.5.0" + b"\x3a\x052.0.0" + b"\x42\x04\x08\x01\x20\x01"
    assert init_out.SerializeToString() == expected
    assert pb.UnityRLInitializationOutputProto.FromString(expected) == init_out
    init_in = pb.UnityRLInitializationInputProto(seed=3, communication_version="1.5.0", package_version="x")
    init_in.capabilities.baseRLCapabilities = True
    assert init_in.SerializeToString() == b"\x08\x03\x12\x051.5.0\x1a\x01x\x22\x02\x08\x01"
    rl_in = pb.UnityRLInputProto(command=pb.COMMAND_RESET, side_channel=b"ab")
    assert rl_in.SerializeToString() == b"\x20\x01\x2a\x02ab"  # 4: enum 1, 5: bytes
    action = demo_pb.AgentActionProto(continuous_actions=[1.0], discrete_actions=[2])
    assert action.SerializeToString() == b"\x32\x04\x00\x00\x80\x3f" + b"\x3a\x01\x02"  # 6 packed f32, 7 packed i32
    # map<string, ListAgentActionProto> agent_actions = 1: entry {1: key, 2: {1: action}}
    rl_in = pb.UnityRLInputProto()
    rl_in.agent_actions["B"].value.add(discrete_actions=[1])
    assert rl_in.SerializeToString() == b"\x0a\x0a\x0a\x01B\x12\x05\x0a\x03\x3a\x01\x01"
    # UnityRLOutputProto: map agentInfos = 2, side_channel = 3; AgentInfoProto reward 7, done 8,
    # max_step_reached 9, id 10, observations 13.
    out = pb.UnityRLOutputProto(side_channel=b"z")
    info = out.agentInfos["B"].value.add(reward=1.0, done=True, max_step_reached=True, id=5)
    info.observations.add(shape=[2]).float_data.data.extend([0.5, 1.0])
    obs = b"\x0a\x01\x02" + b"\x22\x0a\x0a\x08\x00\x00\x00\x3f\x00\x00\x80\x3f"  # shape, float_data {data}
    agent = b"\x3d\x00\x00\x80\x3f\x40\x01\x48\x01\x50\x05\x6a" + bytes([len(obs)]) + obs
    entry = b"\x0a\x01B\x12" + bytes([len(agent) + 2]) + b"\x0a" + bytes([len(agent)]) + agent
    assert out.SerializeToString() == b"\x12" + bytes([len(entry)]) + entry + b"\x1a\x01z"
    message = pb.UnityMessageProto()
    message.header.status = 400
    message.unity_input.rl_input.command = pb.COMMAND_QUIT
    assert message.SerializeToString() == b"\x0a\x03\x08\x90\x03" + b"\x1a\x04\x0a\x02\x20\x02"
    brain = demo_pb.BrainParametersProto(brain_name="B")
    brain.action_spec.num_continuous_actions = 2
    assert brain.SerializeToString() == b"\x3a\x01B\x4a\x02\x08\x02"  # 7: name, 9: {1: 2}
    engine = pb.EngineConfigurationProto(width=84, time_scale=20.0)
    assert engine.SerializeToString() == b"\x08\x54\x25\x00\x00\xa0\x41"  # 1: 84, 4: f32 20.0
    # Each fixture parses back into the same message.
    for msg in (header, init_out, init_in, action, rl_in, out, message, brain, engine):
        assert type(msg).FromString(msg.SerializeToString()) == msg


def test_side_channel_framing_and_messages() -> None:
    engine = EngineConfigurationChannel()
    engine.set_configuration(time_scale=20.0)
    data = encode_side_channels([engine])
    cid = uuid.UUID("e951342c-4f7e-11ea-b238-784f4387d1f7")
    payload = struct.pack("<i", 2) + struct.pack("<f", 20.0)
    assert data == cid.bytes_le + struct.pack("<i", len(payload)) + payload
    assert data[:4] == bytes.fromhex("2c3451e9")  # Guid.ToByteArray: first group little-endian
    params = EnvironmentParametersChannel()
    params.set_float_parameter("gravity", -9.5)
    (cid2, body), = split_side_channels(encode_side_channels([params]))
    msg = IncomingMessage(body)
    assert cid2 == EnvironmentParametersChannel.CHANNEL_ID
    assert (msg.read_string(), msg.read_int32(), msg.read_float32()) == ("gravity", 0, -9.5)
    stats = StatsSideChannel()
    manager = SideChannelManager([stats], warn=lambda s: None)
    body = struct.pack("<i", 3) + b"hit" + struct.pack("<f", 2.0) + struct.pack("<i", 2)
    unknown = uuid.uuid4().bytes_le + struct.pack("<i", 1) + b"x"
    manager.dispatch(unknown + StatsSideChannel.CHANNEL_ID.bytes_le + struct.pack("<i", len(body)) + body)
    assert stats.drain() == {"hit": [(2.0, 2)]}
    with pytest.raises(ValueError, match="runs past"):
        split_side_channels(StatsSideChannel.CHANNEL_ID.bytes_le + struct.pack("<i", 99) + b"abc")


@pytest.mark.parametrize(
    "version, ok, warns",
    [("1.5.0", True, False), ("1.0.0", True, True), ("1.7.2", True, True), ("2.0.0", False, False),
     ("0.15.0", False, False), ("bogus", False, False)],
)
def test_version_rule(version: str, ok: bool, warns: bool) -> None:
    if ok:
        assert (check_communication_version(version) is not None) == warns
    else:
        with pytest.raises(EnvError, match="communication API|not a version"):
            check_communication_version(version)
    # Beta versions must match major and minor.
    assert check_communication_version("0.15.1", "0.15.0") is None


# ----------------------------------------------------------------------------- protocol
def test_handshake_behaviors_steps_and_actions() -> None:
    behaviors = [
        FakeBehavior("Cont", num_agents=2, continuous=2, max_step=3),
        FakeBehavior("Disc", num_agents=1, continuous=0, discrete=(2, 3), mask_last=True, obs_size=3),
        FakeBehavior("Hybrid", num_agents=1, continuous=1, discrete=(2,), visual=(6, 5, 3), visual_chw=True),
        FakeBehavior("Gray", num_agents=1, continuous=1, visual=(4, 4, 1)),
    ]
    env, game, thread, logs = connect(behaviors)
    try:
        assert game.received_seed == 11 and game.trainer_version == API_VERSION
        specs = env.behavior_specs
        assert specs["Cont?team=0"].action_spec.continuous_size == 2
        assert specs["Disc?team=0"].action_spec.discrete_branches == (2, 3)
        assert specs["Disc?team=0"].observation_specs[0].shape == (3,)
        hybrid = specs["Hybrid?team=0"]
        assert hybrid.action_spec.continuous_size == 1 and hybrid.action_spec.discrete_branches == (2,)
        assert hybrid.observation_specs[1].shape == (6, 5, 3)  # sent as (C, H, W) with dimension properties
        assert hybrid.observation_specs[1].kind == ObservationKind.VISUAL
        assert specs["Gray?team=0"].observation_specs[1].shape == (4, 4, 1)
        env.reset()  # the handshake's reset: no second RESET on the wire
        assert game.commands == [pb.COMMAND_RESET]
        d, t = env.get_steps("Disc?team=0")
        assert len(t) == 0 and d.action_mask is not None
        assert [m.tolist() for m in d.action_mask] == [[[False, True]], [[False, False, True]]]
        d, _ = env.get_steps("Hybrid?team=0")
        image = d.obs[1][0]
        assert image.shape == (6, 5, 3) and np.all((image == 0) | (image == 1))
        goal = d.obs[0][0, 0]
        assert np.allclose(image, 1.0 if goal > 0 else 0.0)
        first_ids = env.get_steps("Cont?team=0")[0].agent_id.tolist()

        # Step with distinct actions per agent; the game records them in its order.
        env.set_actions("Cont?team=0", ActionTuple(np.array([[0.1, 0.2], [0.3, 0.4]], np.float32)))
        env.set_actions("Disc?team=0", ActionTuple(discrete=np.array([[1, 2]], np.int32)))
        env.set_actions("Hybrid?team=0", ActionTuple(np.array([[0.5]], np.float32), np.array([[1]], np.int32)))
        env.step()  # "Gray" gets zeros
        sent = game.actions[-1]
        assert np.allclose([a[0] for a in sent["Cont?team=0"]], [[0.1, 0.2], [0.3, 0.4]])
        assert sent["Disc?team=0"][0][1] == [1, 2] and sent["Hybrid?team=0"][0][:2] == ([0.5], [1])
        assert sent["Gray?team=0"][0][0] == [0.0]

        # Cont agents hit max_step (3) on the third step: terminal and interrupted, then new ids.
        for _ in range(2):
            env.step()
        d, t = env.get_steps("Cont?team=0")
        assert sorted(t.agent_id.tolist()) == sorted(first_ids)
        assert t.interrupted.tolist() == [True, True]
        assert not set(d.agent_id.tolist()) & set(first_ids) and len(d) == 2
        assert np.allclose(t.reward, -0.01)
    finally:
        env.close()
        thread.join(10)
    assert game.error is None, game.error


def test_behavior_names_carry_the_team_suffix_like_a_real_build() -> None:
    """Unity packages since ML-Agents 0.14 report ``Name?team=N``
    (BehaviorParameters.FullyQualifiedBehaviorName), self-play or not. The env reports the
    ids as sent (ML-Agents' low-level API does too) and answers under them; the trainer
    maps them onto config names with BehaviorId."""
    env, game, thread, _ = connect([
        FakeBehavior("3DBall", num_agents=2), FakeBehavior("Striker", team=1), FakeBehavior("Legacy", team=None),
    ])
    try:
        assert list(env.behavior_specs) == ["3DBall?team=0", "Striker?team=1", "Legacy"]
        assert [(BehaviorId.parse(n).name, BehaviorId.parse(n).team) for n in env.behavior_specs] == [
            ("3DBall", 0), ("Striker", 1), ("Legacy", 0)]
        env.reset()
        assert len(env.get_steps("3DBall?team=0")[0]) == 2
        with pytest.raises(ValueError, match="unknown behavior '3DBall'"):
            env.set_actions("3DBall", ActionTuple(np.zeros((2, 1), np.float32)))
        env.set_actions("3DBall?team=0", ActionTuple(np.array([[0.5], [-0.5]], np.float32)))
        env.set_actions("Striker?team=1", ActionTuple(np.array([[0.25]], np.float32)))
        env.step()
        sent = game.actions[-1]
        assert set(sent) == {"3DBall?team=0", "Striker?team=1", "Legacy"}
        assert [a[0] for a in sent["3DBall?team=0"]] == [[0.5], [-0.5]] and sent["Striker?team=1"][0][0] == [0.25]
    finally:
        env.close()
        thread.join(10)
    assert game.error is None, game.error


def _png_colour_type(data: bytes) -> int:
    """Byte 9 of IHDR's body: 0 gray, 2 RGB (PNG spec 11.2.2)."""
    assert data[12:16] == b"IHDR"
    return data[25]


def test_grayscale_camera_is_an_rgb_png_on_the_wire_and_one_channel_here() -> None:
    """Unity's CameraSensor renders into an RGB24 texture and sends ``EncodeToPNG`` of it,
    grayscale or not; the spec says 1 channel and the Python side averages the colours
    (ML-Agents' rpc_utils.process_pixels). A true 1-channel PNG (other producers) still reads."""
    env, game, thread, _ = connect([
        FakeBehavior("Gray", visual=(4, 6, 1)),
        FakeBehavior("GrayCHW", visual=(4, 6, 1), visual_chw=True),
        FakeBehavior("TrueGray", visual=(4, 6, 1), gray_png=True),
        FakeBehavior("Colour", visual=(4, 6, 3)),
    ])
    try:
        env.reset()
        env.send(env.step_input())
        output = env.receive_output()
        env.receive_into(output)
        infos = output.rl_output.agentInfos
        for name, shape, colour in [("Gray?team=0", [4, 6, 1], 2), ("GrayCHW?team=0", [1, 4, 6], 2),
                                    ("TrueGray?team=0", [4, 6, 1], 0), ("Colour?team=0", [4, 6, 3], 2)]:
            camera = infos[name].value[0].observations[1]
            assert list(camera.shape) == shape and list(camera.compressed_channel_mapping) == []
            assert _png_colour_type(camera.compressed_data) == colour, name
            d, _ = env.get_steps(name)
            goal = float(d.obs[0][0, 0])
            assert d.obs[1].shape == (1, 4, 6, 3 if name.startswith("Colour") else 1), name
            np.testing.assert_array_equal(d.obs[1], 1.0 if goal > 0 else 0.0)
        # What ML-Agents' Python side does with a 1-channel observation: the mean over the
        # decoded PNG's channel axis (moved first), which needs the RGB PNG Unity sends.
        camera = infos["Gray?team=0"].value[0].observations[1]
        pixels = np.moveaxis(decode_png(camera.compressed_data).astype(np.float32) / 255.0, -1, 0)
        np.testing.assert_array_equal(np.mean(pixels, axis=0), env.get_steps("Gray?team=0")[0].obs[1][0, :, :, 0])
    finally:
        env.close()
        thread.join(10)
    assert game.error is None, game.error


def test_one_channel_observation_averages_distinct_rgb_colours() -> None:
    """The trainer's decoding of an RGB PNG into a 1-channel observation is ML-Agents'
    mean of the colour channels, not the first channel."""
    from envs.demo.messages import decode_image

    rgb = np.zeros((2, 3, 3), np.uint8)
    rgb[..., 0], rgb[..., 1], rgb[..., 2] = 30, 60, 150
    np.testing.assert_allclose(decode_image(encode_png(rgb), [], (2, 3, 1), 0), np.full((2, 3, 1), 80 / 255))
    gray = np.full((2, 3, 1), 77, np.uint8)
    np.testing.assert_allclose(decode_image(encode_png(gray), [], (2, 3, 1), 0), np.full((2, 3, 1), 77 / 255))


def test_num_areas_is_sent_in_the_handshake_and_multiplies_agents() -> None:
    """UnityRLInitializationInputProto.num_areas (field 5, com.unity.ml-agents 2.2+): a scene
    with a TrainingAreaReplicator instantiates that many copies of its area, agents included.
    ML-Agents sends 1 by default."""
    env, game, thread, _ = connect([FakeBehavior("A", num_agents=2), FakeBehavior("B")], env_kwargs={"num_areas": 3})
    try:
        assert game.received_num_areas == 3
        env.reset()
        assert len(env.get_steps("A?team=0")[0]) == 6 and len(env.get_steps("B?team=0")[0]) == 3
    finally:
        env.close()
        thread.join(10)
    assert game.error is None, game.error
    env, game, thread, _ = connect([FakeBehavior("A", num_agents=2)])
    try:
        assert game.received_num_areas == 1 and len(env.get_steps("A?team=0")[0]) == 2
    finally:
        env.close()
        thread.join(10)
    port = free_port()
    with pytest.raises(EnvError, match=r"^env_settings.num_areas: expected an integer >= 1, got 0$"):
        UnityEnv(None, base_port=port, host="127.0.0.1", timeout_wait=1, log=lambda s: None, num_areas=0)


def test_manager_sends_num_areas_to_every_game() -> None:
    port = free_port()
    game = FakeGame(port, [FakeBehavior("S", num_agents=2)])
    thread = start_in_thread(game)
    manager = UnityEnvManager(None, 1, 0, UnityOptions(base_port=port, host="127.0.0.1", timeout_wait=20,
                                                       num_areas=2))
    try:
        steps = manager.reset()
        assert game.received_num_areas == 2 and len(steps[0].steps["S?team=0"][0]) == 4
    finally:
        manager.close()
        thread.join(10)
    assert game.error is None, game.error


def test_true_terminal_episode_and_reward() -> None:
    env, game, thread, _ = connect([FakeBehavior("S", continuous=1, step_size=0.5, max_step=50)])
    try:
        env.reset()
        d, _ = env.get_steps("S?team=0")
        goal = float(d.obs[0][0, 0])
        for _ in range(2):
            env.set_actions("S?team=0", ActionTuple(np.array([[goal]], np.float32)))
            env.step()
        d, t = env.get_steps("S?team=0")
        assert len(t) == 1 and not t.interrupted[0]
        assert t.reward[0] == pytest.approx(-0.01 + 1.02)
        assert len(d) == 1 and d.agent_id[0] != t.agent_id[0]
    finally:
        env.close()
        thread.join(10)


def test_api_1_0_game_gets_vector_actions() -> None:
    env, game, thread, logs = connect(
        [FakeBehavior("Old", continuous=0, discrete=(3,)), FakeBehavior("OldC", continuous=2)], api_version="1.0.0"
    )
    try:
        assert any("1.0.0" in line and "WARNING" in line for line in logs)
        assert env.behavior_specs["Old?team=0"].action_spec.discrete_branches == (3,)
        assert env.behavior_specs["OldC?team=0"].action_spec.continuous_size == 2
        env.reset()
        env.set_actions("Old?team=0", ActionTuple(discrete=np.array([[2]], np.int32)))
        env.set_actions("OldC?team=0", ActionTuple(np.array([[0.25, -0.5]], np.float32)))
        env.step()
        assert game.actions[-1]["Old?team=0"][0][2] == [2.0]
        assert game.actions[-1]["OldC?team=0"][0][2] == [0.25, -0.5]
    finally:
        env.close()
        thread.join(10)
    assert game.error is None, game.error


def test_side_channels_both_ways() -> None:
    port = free_port()
    game = FakeGame(port, [FakeBehavior("S")])
    thread = start_in_thread(game)
    printed: List[str] = []
    env = UnityEnv(None, base_port=port, host="127.0.0.1", timeout_wait=20, log=printed.append,
                   engine=EngineConfig(width=100, height=50, time_scale=7.0, quality_level=None,
                                       target_frame_rate=None, capture_frame_rate=30),
                   env_parameters={"difficulty": 2.5})
    env.log_channel._log = printed.append
    try:
        assert game.engine == {"width": 100, "height": 50, "time_scale": 7.0, "capture_frame_rate": 30}
        assert game.parameters == {"difficulty": 2.5}
        env.reset()
        env.set_float_parameter("difficulty", 3.0)
        env.log_channel.send_string("hello game")
        env.step()
        env.step()
        assert game.parameters == {"difficulty": 3.0} and game.strings == ["hello game"]
        assert "echo: hello game" in printed
        stats = env.drain_stats()
        assert stats["Game/Steps"] == [(1.0, 1), (2.0, 1)]
        assert stats["Game/Score"] == [(1.0, 0), (2.0, 0)]
        assert env.drain_stats() == {}
    finally:
        env.close()
        thread.join(10)


# ----------------------------------------------------------------------------- faults
def test_version_mismatch_is_one_clear_error() -> None:
    port = free_port()
    game = FakeGame(port, [FakeBehavior("S")], api_version="2.0.0")
    thread = start_in_thread(game)
    with pytest.raises(EnvError) as info:
        UnityEnv(None, base_port=port, host="127.0.0.1", timeout_wait=20, log=lambda s: None)
    message = str(info.value)
    assert "2.0.0" in message and API_VERSION in message and "\n" not in message
    thread.join(10)
    assert not thread.is_alive()  # the game was told to quit


def test_editor_that_never_connects_times_out_naming_the_port() -> None:
    port = free_port()
    start = time.monotonic()
    with pytest.raises(EnvError) as info:
        UnityEnv(None, base_port=port, host="127.0.0.1", timeout_wait=1, log=lambda s: None)
    assert time.monotonic() - start < 15  # not the 60 s default; margin for a loaded machine
    assert str(info.value).startswith(f"no Unity Editor connected on port {port} within 1 s")
    # The port is free again.
    s = socket.socket()
    s.bind(("127.0.0.1", port))
    s.close()


def test_port_in_use_is_one_clear_error() -> None:
    port = free_port()
    s = socket.socket()
    s.bind(("127.0.0.1", port))
    s.listen(1)
    try:
        with pytest.raises(EnvError, match=f"cannot listen on port {port}.*--base-port"):
            UnityEnv(None, base_port=port, host="127.0.0.1", timeout_wait=1, log=lambda s: None)
    finally:
        s.close()


def test_game_that_quits_mid_run_is_a_worker_error() -> None:
    port = free_port()
    game = FakeGame(port, [FakeBehavior("S")], quit_after=2)
    thread = start_in_thread(game)
    manager = UnityEnvManager(None, 1, 0, UnityOptions(base_port=port, host="127.0.0.1", timeout_wait=20))
    steps = manager.reset()
    with pytest.raises(EnvWorkerError) as info:
        for _ in range(5):
            steps = manager.step([{}])
    assert f"the Unity Editor on port {port} disconnected" in str(info.value)
    assert "Editor stopped" in str(info.value)
    with pytest.raises(EnvWorkerError):
        manager.step([{}])
    thread.join(10)


def test_engine_settings_validation() -> None:
    assert engine_config({"time_scale": 5, "width": 64.0, "no_graphics": True}) == EngineConfig(
        width=64, time_scale=5.0, no_graphics=True)
    # ML-Agents Release 22's key, in every configuration.yaml mlagents 1.1+ writes.
    assert engine_config({"no_graphics": False, "no_graphics_monitor": True}) == EngineConfig(no_graphics_monitor=True)
    with pytest.raises(EnvError, match="engine_settings.no_graphics_monitor: expected true or false, got 1"):
        engine_config({"no_graphics_monitor": 1})
    with pytest.raises(EnvError, match="engine_settings.widht: unknown key"):
        engine_config({"widht": 3})
    with pytest.raises(EnvError, match="engine_settings.time_scale: expected a number > 0"):
        engine_config({"time_scale": 0})
    with pytest.raises(EnvError, match="engine_settings.no_graphics: expected true or false"):
        engine_config({"no_graphics": "yes"})


# ----------------------------------------------------------------------------- builds
def fake_build(tmp_path: Path, behaviors: Optional[list] = None, extra: str = "") -> str:
    """A "Unity build": a script that runs the fake game with the flags it is given."""
    return write_fake_build(str(tmp_path / "FakeGame.x86_64"), behaviors or [{"name": "Fake"}], extra.split())


def test_registry_accepts_builds_and_names_missing_ones(tmp_path: Path) -> None:
    build = fake_build(tmp_path)
    assert parse_env_id(build) == ("unity", build)
    validate_env(build)
    validate_env(build[: -len(".x86_64")])  # the suffix is found, as ML-Agents does
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        assert parse_env_id("FakeGame") == ("unity", "FakeGame")  # a bare name whose build exists
    finally:
        os.chdir(cwd)
    with pytest.raises(EnvError, match=r"Unity build 'nowhere/Game' not found"):
        validate_env("nowhere/Game")


def test_n_builds_on_n_ports_are_launched_and_killed(tmp_path: Path) -> None:
    build = fake_build(tmp_path, [{"name": "Fake", "num_agents": 2}])
    port = free_port(2)
    manager = make_env_manager(
        build, {"args": ["--custom", "1"]}, 2, 1, 5,
        unity=UnityOptions(base_port=port, host="127.0.0.1", timeout_wait=30,
                           engine=EngineConfig(no_graphics=True), log_folder=str(tmp_path / "logs")),
    )
    try:
        assert isinstance(manager, UnityEnvManager) and manager.num_workers == 2
        assert [e.port for e in manager.envs] == [port, port + 1]
        procs = [e.process for e in manager.envs]
        args = [p.args for p in procs]
        assert args[1][1:] == ["-nographics", "-batchmode", "--mlagents-port", str(port + 1), "-logFile",
                               str(tmp_path / "logs" / "Player-1.log"), "--custom", "1"]
        steps = manager.reset()
        for _ in range(3):
            steps = manager.step([{"Fake?team=0": ActionTuple(np.ones((2, 1), np.float32))}] * 2)
        assert len(steps) == 2 and len(steps[1].steps["Fake?team=0"][0]) == 2
        assert steps[0].env_stats["Game/Steps"] == [(3.0, 1)]
    finally:
        manager.close()
    for p in procs:
        assert p.poll() is not None  # exited after the quit message, or killed


def test_no_graphics_monitor_renders_worker_0_only(tmp_path: Path) -> None:
    """ML-Agents' UnityEnvironment: ``no_graphics or no_graphics_monitor and worker_id != 0``."""
    assert [EngineConfig(no_graphics_monitor=True).no_graphics_for(i) for i in range(3)] == [False, True, True]
    assert [EngineConfig(no_graphics=True, no_graphics_monitor=True).no_graphics_for(i) for i in (0, 1)] == [True, True]
    assert EngineConfig().no_graphics_for(1) is False
    build = fake_build(tmp_path)
    port = free_port(2)
    manager = UnityEnvManager(build, 2, 0, UnityOptions(
        base_port=port, host="127.0.0.1", timeout_wait=30,
        engine=engine_config({"no_graphics_monitor": True})))
    try:
        args = [e.process.args[1:] for e in manager.envs]
    finally:
        manager.close()
    assert args == [["--mlagents-port", str(port)], ["-nographics", "-batchmode", "--mlagents-port", str(port + 1)]]


def test_build_that_never_connects_is_killed_and_named(tmp_path: Path) -> None:
    build = fake_build(tmp_path, extra="--hang")
    port = free_port()
    start = time.monotonic()
    with pytest.raises(EnvError) as info:
        UnityEnv(build, base_port=port, host="127.0.0.1", timeout_wait=2, log=lambda s: None)
    assert time.monotonic() - start < 12
    assert str(info.value).startswith(f"Unity build {build!r} did not connect on port {port} within 2 s")


def test_build_that_crashes_mid_run_is_a_worker_error(tmp_path: Path) -> None:
    build = fake_build(tmp_path, extra="--crash-after 2")
    port = free_port()
    manager = UnityEnvManager(build, 1, 0, UnityOptions(base_port=port, host="127.0.0.1", timeout_wait=30))
    proc = manager.envs[0].process
    manager.reset()
    with pytest.raises(EnvWorkerError) as info:
        for _ in range(5):
            manager.step([{}])
    message = str(info.value)
    assert f"Unity build {build!r} on port {port}" in message
    assert "exited with code 3" in message or "closed the connection" in message
    assert proc.poll() is not None


def test_editor_that_vanishes_without_quitting_is_a_worker_error() -> None:
    """A game we did not launch (the Editor) dies while waiting for our reply: its call is
    cancelled, which the server notices without waiting for timeout_wait."""
    import subprocess
    import sys

    port = free_port()
    game = subprocess.Popen([sys.executable, "-m", "envs.unity.fake_game", "--mlagents-port", str(port)])
    try:
        env = UnityEnv(None, base_port=port, host="127.0.0.1", timeout_wait=60, log=lambda s: None)
        env.reset()
        env.step()
        game.kill()
        game.wait(10)
        time.sleep(1.0)  # the server sees the dropped call within 0.25 s
        start = time.monotonic()
        with pytest.raises(EnvWorkerError, match=f"the Unity Editor on port {port} disconnected: "
                                                 "the Unity process closed the connection"):
            env.step()
        assert time.monotonic() - start < 15  # not the 60 s default; margin for a loaded machine
        env.close()
    finally:
        game.kill()
