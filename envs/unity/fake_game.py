"""A scripted stand-in for a Unity game, speaking the communicator protocol as a client.

For tests and benchmarks (no Unity needed). It plays ML-Agents' SimpleEnvironment for each
behavior: every agent observes its goal (-1 or +1) in every vector entry (and, if asked, a
visual observation whose pixels are the goal); each continuous action dimension or
discrete branch (size 2: -1 / +1) moves one coordinate by ``step_size``; the episode ends
when every coordinate reaches +-1, with reward ``-0.01`` per step and at the end
``(1 + 0.01 * min_steps) * mean(position * goal)``; ``max_step`` ends it as interrupted.

What goes on the wire is what a real build sends:

* behavior names are ``Name?team=N`` (``BehaviorParameters.FullyQualifiedBehaviorName``,
  every Unity package since ML-Agents 0.14, self-play or not); ``team=None`` sends the
  plain name of an older game;
* a camera is a PNG of three channels even when the observation is grayscale
  (``CameraSensor`` renders into an RGB24 texture and ``EncodeToPNG`` encodes that; the
  spec says 1 channel and the trainer averages the colours, as ``rpc_utils.process_pixels``
  does); ``gray_png`` sends a true 1-channel PNG instead (other producers do);
* ``num_areas`` of the initialization input multiplies every behavior's agents, as a scene
  with a ``TrainingAreaReplicator`` instantiates that many copies of its training area
  (0, what an older trainer sends, keeps the scene's one area).

It follows the game's side of the protocol: first call with the initialization output,
second call empty, then one call per step with the agent infos (brain parameters with the
first infos of each behavior), answering RESET / STEP / QUIT; it reads engine
configuration, environment parameters and strings from the side channels and sends stats
and strings back. Groups (``group_size``): as Unity's ``SimpleMultiAgentGroup``, positive
group ids, and a member's success added to every member's next ``group_reward``. Faults for tests: ``quit_after`` (sends status 400 like the Editor's
Stop button), ``crash_after`` (the process exits at once), ``api_version`` (mismatch,
or "1.0.0": no capabilities, legacy brain parameters and ``vector_actions``).

Run as a "build": ``python -m envs.unity.fake_game --mlagents-port 5005 [options]``.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import threading
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import grpc
import numpy as np

from envs.demo import demonstration_pb2 as demo_pb
from envs.demo.png import encode_png
from envs.unity import communicator_pb2 as pb
from envs.unity.rpc import EXCHANGE_METHOD, MAX_MESSAGE_BYTES
from envs.unity.side_channels import (
    EngineConfigurationChannel,
    EnvironmentParametersChannel,
    IncomingMessage,
    OutgoingMessage,
    StatsSideChannel,
    StringLogChannel,
    encode_side_channels,
    split_side_channels,
    SideChannel,
)


@dataclass
class FakeBehavior:
    """One behavior of the fake game."""

    name: str
    num_agents: int = 1  # per training area
    continuous: int = 1
    discrete: Tuple[int, ...] = ()  # branch sizes; movement uses values 0 (-1) / 1 (+1)
    obs_size: int = 1
    visual: Optional[Tuple[int, int, int]] = None  # (H, W, C) PNG observation
    visual_chw: bool = False  # send ML-Agents 2.0's (C, H, W) shape with dimension properties
    step_size: float = 0.2
    max_step: int = 20
    mask_last: bool = False  # mask the last action of every discrete branch
    team: Optional[int] = 0  # sent as ``name?team=N``; None: the plain name (pre-0.14 games)
    gray_png: bool = False  # a 1-channel camera as a 1-channel PNG (not Unity's RGB24 encoding)
    # A BufferSensor (max_entities, entity_size), sent last: agent ``uid`` fills its first
    # ``1 + uid % max_entities`` rows with its goal, the rest zeros (absent entities).
    entities: Optional[Tuple[int, int]] = None
    # Multi-agent groups (API 1.5.0): consecutive agents, ``group_size`` at a time, share a
    # SimpleMultiAgentGroup (0: no groups); a member reaching its goal adds ``group_reward``
    # to the group (``AddGroupReward``: every member's next AgentInfo carries it).
    group_size: int = 0
    group_reward: float = 1.0

    @property
    def wire_name(self) -> str:
        """The behavior name as the game reports it (Unity: ``FullyQualifiedBehaviorName``)."""
        return self.name if self.team is None else f"{self.name}?team={self.team}"


@dataclass
class _Agent:
    uid: int
    goal: float
    position: np.ndarray
    steps: int = 0
    reward: float = 0.0
    group_id: int = 0  # 0: in no group (Unity's default)
    group_reward: float = 0.0  # the group's reward since this agent's last AgentInfo


@dataclass
class FakeGame:
    """The game; `run()` connects to ``127.0.0.1:port`` and plays until told to quit."""

    port: int
    behaviors: Sequence[FakeBehavior]
    api_version: str = "1.5.0"
    seed: int = 0
    quit_after: Optional[int] = None
    crash_after: Optional[int] = None
    connect_timeout: float = 30.0
    # What the trainer told us (for tests to check).
    received_seed: Optional[int] = None
    trainer_version: str = ""
    received_num_areas: int = 0
    engine: Dict[str, object] = field(default_factory=dict)
    parameters: Dict[str, object] = field(default_factory=dict)  # a float, or a sampler's tuple
    parameter_messages: List[bytes] = field(default_factory=list)  # EnvironmentParametersChannel payloads
    strings: List[str] = field(default_factory=list)
    actions: List[Dict[str, List[Tuple[List[float], List[int], List[float]]]]] = field(default_factory=list)
    commands: List[int] = field(default_factory=list)
    episodes: int = 0
    error: Optional[BaseException] = None

    def __post_init__(self) -> None:
        self._rng = np.random.default_rng(self.seed)
        self._agents: Dict[str, List[_Agent]] = {}
        self._done: Dict[str, List[Tuple[_Agent, bool]]] = {}
        self._next_uid = 0
        self._sent_brains: set = set()
        self._steps = 0
        self._legacy = self.api_version.startswith("1.0")
        self._next_group = 1  # Unity's MultiAgentGroupIdCounter: group ids start at 1
        self._echo: List[str] = []  # strings to echo back on the log channel (reset by `_run`)

    # ----------------------------------------------------------------- game
    def _new_agent(self, b: FakeBehavior, uid: Optional[int] = None) -> _Agent:
        if uid is None:
            uid = self._next_uid
            self._next_uid += 1
        n_moves = b.continuous + len(b.discrete)
        return _Agent(uid, float(self._rng.choice([-1.0, 1.0])), np.zeros(n_moves, np.float32))

    def _reset_all(self) -> None:
        # Each replicated training area holds its own copy of every agent.
        areas = max(1, self.received_num_areas)
        for b in self.behaviors:
            agents = [self._new_agent(b) for _ in range(b.num_agents * areas)]
            if b.group_size > 0 and not self._legacy:  # API 1.0 games had no groups
                for start in range(0, len(agents), b.group_size):
                    for agent in agents[start: start + b.group_size]:
                        agent.group_id = self._next_group
                    self._next_group += 1
            self._agents[b.wire_name] = agents
            self._done[b.wire_name] = []

    def _restart(self, b: FakeBehavior, agent: _Agent) -> _Agent:
        new = self._new_agent(b, agent.uid)
        new.group_id = agent.group_id
        return new

    def _apply(self, b: FakeBehavior, agent: _Agent, cont: List[float], disc: List[int]) -> None:
        moves = [float(np.clip(c, -1.0, 1.0)) for c in cont] + [1.0 if d == 1 else -1.0 for d in disc]
        agent.position = np.clip(agent.position + b.step_size * np.asarray(moves, np.float32), -1.0, 1.0)
        agent.steps += 1
        agent.reward = -0.01
        if np.all(np.abs(agent.position) >= 1.0):
            min_steps = int(np.ceil(1.0 / b.step_size))
            agent.reward += (1.0 + 0.01 * min_steps) * float(np.mean(agent.position * agent.goal))
            self._done[b.wire_name].append((agent, False))
        elif agent.steps >= b.max_step:
            self._done[b.wire_name].append((agent, True))

    def _step(self, rl_input: pb.UnityRLInputProto) -> None:
        record: Dict[str, List[Tuple[List[float], List[int], List[float]]]] = {}
        for b in self.behaviors:
            name = b.wire_name  # the trainer answers under the name the game reported
            agents = self._agents[name]
            sent = rl_input.agent_actions[name].value if name in rl_input.agent_actions else []
            if agents and len(sent) != len(agents):
                raise AssertionError(f"{name}: {len(sent)} actions for {len(agents)} agents")
            record[name] = []
            self._done[name] = []
            for agent, a in zip(agents, sent):
                cont, disc = list(a.continuous_actions), list(a.discrete_actions)
                if self._legacy:
                    vec = list(a.vector_actions)
                    cont, disc = vec[: b.continuous], [int(v) for v in vec[b.continuous:]]
                record[name].append((cont, disc, list(a.vector_actions)))
                self._apply(b, agent, cont, disc)
            # SimpleMultiAgentGroup.AddGroupReward: a member at its goal rewards every member;
            # each one's next AgentInfo (the finisher's terminal one too) carries the sum.
            for agent in agents:
                agent.group_reward = 0.0  # sent with the previous output (Unity resets it then)
            for finisher, interrupted in self._done[name]:
                if finisher.group_id and not interrupted:
                    for agent in agents:
                        if agent.group_id == finisher.group_id:
                            agent.group_reward += b.group_reward
            finished = {id(agent) for agent, _ in self._done[name]}
            # A finished agent starts a new episode under the same Unity id (as Unity agents
            # do), in the same group, with no group reward yet.
            self._agents[name] = [
                self._restart(b, agent) if id(agent) in finished else agent for agent in agents
            ]
            self.episodes += len(finished)
        self.actions.append(record)

    # ----------------------------------------------------------------- messages
    def _obs(self, b: FakeBehavior, agent: _Agent) -> List[demo_pb.ObservationProto]:
        out = []
        vec = demo_pb.ObservationProto(shape=[b.obs_size], dimension_properties=[1], name="VectorSensor")
        vec.float_data.data.extend([agent.goal] * b.obs_size)
        out.append(vec)
        if b.visual is not None:
            h, w, c = b.visual
            # Unity's CameraSensor encodes its RGB24 texture whatever the observation's
            # channels: a grayscale camera still sends three (equal) colour channels.
            png_channels = c if (c != 1 or b.gray_png) else 3
            image = np.full((h, w, png_channels), 255 if agent.goal > 0 else 0, np.uint8)
            shape = [c, h, w] if b.visual_chw else [h, w, c]
            dims = [1, 2, 2] if b.visual_chw else [2, 2, 1]
            o = demo_pb.ObservationProto(shape=shape, compression_type=demo_pb.COMPRESSION_TYPE_PNG,
                                         compressed_data=encode_png(image), name="CameraSensor")
            if not self._legacy:
                o.dimension_properties.extend(dims)
            out.append(o)
        if b.entities is not None:
            rows, size = b.entities
            values = np.zeros((rows, size), np.float32)
            values[: 1 + agent.uid % rows] = agent.goal
            # BufferSensor: shape (max_entities, entity_size), (VARIABLE_SIZE, NONE).
            o = demo_pb.ObservationProto(shape=[rows, size], dimension_properties=[4, 1], name="BufferSensor")
            o.float_data.data.extend(values.ravel().tolist())
            out.append(o)
        return out

    def _brain(self, b: FakeBehavior) -> demo_pb.BrainParametersProto:
        brain = demo_pb.BrainParametersProto(brain_name=b.wire_name, is_training=True)
        if self._legacy:
            if b.continuous and b.discrete:
                raise ValueError("API 1.0 has no hybrid actions")
            brain.vector_action_space_type = demo_pb.SPACE_TYPE_CONTINUOUS if b.continuous else demo_pb.SPACE_TYPE_DISCRETE
            brain.vector_action_size.extend([b.continuous] if b.continuous else list(b.discrete))
        else:
            brain.action_spec.num_continuous_actions = b.continuous
            brain.action_spec.num_discrete_actions = len(b.discrete)
            brain.action_spec.discrete_branch_sizes.extend(b.discrete)
        return brain

    def _info(self, b: FakeBehavior, agent: _Agent, done: bool, interrupted: bool) -> demo_pb.AgentInfoProto:
        info = demo_pb.AgentInfoProto(id=agent.uid, reward=agent.reward, done=done, max_step_reached=interrupted,
                                      group_id=agent.group_id, group_reward=agent.group_reward)
        info.observations.extend(self._obs(b, agent))
        if b.mask_last and b.discrete and not done:
            for size in b.discrete:
                info.action_mask.extend([False] * (size - 1) + [True])
        return info

    def _output(self, stats: Sequence[Tuple[str, float, int]] = ()) -> pb.UnityMessageProto:
        message = pb.UnityMessageProto()
        message.header.status = 200
        out = message.unity_output
        for b in self.behaviors:
            name = b.wire_name
            infos = out.rl_output.agentInfos[name].value
            for agent, interrupted in self._done.get(name, []):
                infos.append(self._info(b, agent, True, interrupted))
            for agent in self._agents[name]:
                infos.append(self._info(b, agent, False, False))
            if name not in self._sent_brains:
                self._sent_brains.add(name)
                out.rl_initialization_output.brain_parameters.append(self._brain(b))
        channels: List[SideChannel] = []
        if stats:
            stats_channel = SideChannel(StatsSideChannel.CHANNEL_ID)
            for key, value, aggregation in stats:
                msg = OutgoingMessage()
                msg.write_string(key)
                msg.write_float32(value)
                msg.write_int32(aggregation)
                stats_channel.queue_message(msg)
            channels.append(stats_channel)
        log_channel = SideChannel(StringLogChannel.CHANNEL_ID)
        for text in self._echo:
            msg = OutgoingMessage()
            msg.write_string(f"echo: {text}")
            log_channel.queue_message(msg)
        self._echo = []
        channels.append(log_channel)
        out.rl_output.side_channel = encode_side_channels(channels)
        return message

    def _read_side_channels(self, data: bytes) -> None:
        for channel_id, payload in split_side_channels(data):
            msg = IncomingMessage(payload)
            if channel_id == EngineConfigurationChannel.CHANNEL_ID:
                kind = msg.read_int32()
                if kind == EngineConfigurationChannel.SCREEN_RESOLUTION:
                    self.engine["width"], self.engine["height"] = msg.read_int32(), msg.read_int32()
                else:
                    key = {1: "quality_level", 2: "time_scale", 3: "target_frame_rate", 4: "capture_frame_rate"}[kind]
                    self.engine[key] = msg.read_float32() if kind == 2 else msg.read_int32()
            elif channel_id == EnvironmentParametersChannel.CHANNEL_ID:
                # As C#'s EnvironmentParametersChannel reads it: a float, or a sampler kept
                # here as (type, seed, *its float32s) for tests to look at.
                key = msg.read_string()
                kind = msg.read_int32()
                if kind == EnvironmentParametersChannel.FLOAT:
                    self.parameters[key] = msg.read_float32()
                else:
                    assert kind == EnvironmentParametersChannel.SAMPLER, kind
                    seed, sampler = msg.read_int32(), msg.read_int32()
                    if sampler == EnvironmentParametersChannel.MULTIRANGEUNIFORM:
                        self.parameters[key] = ("multirangeuniform", seed, *msg.read_float32_list())
                    else:
                        name = "uniform" if sampler == EnvironmentParametersChannel.UNIFORM else "gaussian"
                        self.parameters[key] = (name, seed, msg.read_float32(), msg.read_float32())
                self.parameter_messages.append(payload)
            elif channel_id == StringLogChannel.CHANNEL_ID:
                text = msg.read_string()
                self.strings.append(text)
                self._echo.append(text)

    # ----------------------------------------------------------------- loop
    def run(self) -> None:
        """Plays until QUIT (or a fault); errors are kept in ``self.error``."""
        try:
            self._run()
        except BaseException as e:  # the test thread reports it
            self.error = e

    def _run(self) -> None:
        self._echo = []
        options = [("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                   ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)]
        with grpc.insecure_channel(f"127.0.0.1:{self.port}", options=options) as channel:
            grpc.channel_ready_future(channel).result(timeout=self.connect_timeout)
            call = channel.unary_unary(
                EXCHANGE_METHOD,
                request_serializer=pb.UnityMessageProto.SerializeToString,
                response_deserializer=pb.UnityMessageProto.FromString,
            )
            init = pb.UnityMessageProto()
            init.header.status = 200
            io = init.unity_output.rl_initialization_output
            io.name = "FakeAcademy"
            io.communication_version = self.api_version
            io.package_version = "2.0.0-fake"
            if not self._legacy:
                io.capabilities.CopyFrom(pb.UnityRLCapabilitiesProto(
                    baseRLCapabilities=True, concatenatedPngObservations=True, compressedChannelMapping=True,
                    hybridActions=True, trainingAnalytics=True, variableLengthObservation=True,
                    multiAgentGroups=True))
            reply = call(init)
            if reply.header.status != 200:
                return
            ri = reply.unity_input.rl_initialization_input
            self.received_seed, self.trainer_version = ri.seed, ri.communication_version
            self.received_num_areas = ri.num_areas
            empty = pb.UnityMessageProto()
            empty.header.status = 200
            reply = call(empty)
            while True:
                if reply.header.status != 200:
                    return
                rl_input = reply.unity_input.rl_input
                self.commands.append(int(rl_input.command))
                self._read_side_channels(rl_input.side_channel)
                if rl_input.command == pb.COMMAND_QUIT:
                    return
                stats: List[Tuple[str, float, int]] = []
                if rl_input.command == pb.COMMAND_RESET:
                    self._reset_all()
                else:
                    self._step(rl_input)
                    self._steps += 1
                    stats = [("Game/Steps", float(self._steps), 1), ("Game/Score", float(self._steps % 3), 0)]
                if self.crash_after is not None and self._steps >= self.crash_after:
                    os._exit(3)
                if self.quit_after is not None and self._steps >= self.quit_after:
                    bye = pb.UnityMessageProto()
                    bye.header.status = 400
                    bye.header.message = "Editor stopped"
                    try:
                        call(bye, timeout=5.0)
                    except grpc.RpcError:
                        pass
                    return
                reply = call(self._output(stats))


def start_in_thread(game: FakeGame) -> threading.Thread:
    """Runs ``game`` on a daemon thread (it connects once the trainer listens)."""
    thread = threading.Thread(target=game.run, name="fake-unity", daemon=True)
    thread.start()
    return thread


def free_port(n: int = 1) -> int:
    """A base port with ``n`` consecutive free ports on 127.0.0.1 (free when checked)."""
    for _ in range(50):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        base = s.getsockname()[1]
        s.close()
        if base + n > 65535:
            continue
        ok = True
        for p in range(base + 1, base + n):
            t = socket.socket()
            try:
                t.bind(("127.0.0.1", p))
            except OSError:
                ok = False
            finally:
                t.close()
        if ok:
            return base
    raise RuntimeError("no free ports")



def write_fake_build(path: str, behaviors: Sequence[Dict[str, object]], extra_args: Sequence[str] = ()) -> str:
    """Writes an executable "Unity build" at ``path``: a shell script that runs this fake
    game with the flags it is given (``--mlagents-port`` ...). POSIX only.

    Args:
        behaviors: `FakeBehavior` fields per behavior, e.g. ``[{"name": "Fake", "discrete": [2]}]``.
        extra_args: more options of this module (``--crash-after 5``, ``--hang``).
    """
    import shlex

    command = [sys.executable, "-m", "envs.unity.fake_game", "--behaviors", json.dumps(list(behaviors)),
               *map(str, extra_args)]
    with open(path, "w") as f:
        f.write("#!/bin/sh\nexec " + " ".join(shlex.quote(c) for c in command) + ' "$@"\n')
    os.chmod(path, 0o755)
    return path


def _behavior_from_json(fields: Dict[str, Any]) -> FakeBehavior:
    """A `FakeBehavior` from its JSON fields (JSON lists become the dataclass's tuples)."""
    kwargs: Dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in fields.items()}
    return FakeBehavior(**kwargs)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """A fake build: ``--mlagents-port`` as Unity builds take it; behaviors as JSON."""
    parser = argparse.ArgumentParser(description="fake Unity game (tests)")
    parser.add_argument("--mlagents-port", type=int, required=True)
    parser.add_argument("--behaviors", default='[{"name": "Fake"}]', help="JSON list of FakeBehavior fields")
    parser.add_argument("--api-version", default="1.5.0")
    parser.add_argument("--crash-after", type=int)
    parser.add_argument("--quit-after", type=int)
    parser.add_argument("--hang", action="store_true", help="never connect")
    parser.add_argument("--record", help="write the command line, received engine settings and num_areas to this "
                        "JSON file ({port} in the name: the --mlagents-port, one file per worker)")
    args, unknown = parser.parse_known_args(argv)
    if args.hang:
        threading.Event().wait()
    behaviors = [_behavior_from_json(d) for d in json.loads(args.behaviors)]
    game = FakeGame(args.mlagents_port, behaviors, api_version=args.api_version,
                    crash_after=args.crash_after, quit_after=args.quit_after)
    game.run()
    if args.record:
        with open(args.record.replace("{port}", str(args.mlagents_port)), "w") as f:
            json.dump({"argv": list(sys.argv[1:]), "unknown": unknown, "engine": game.engine,
                       "parameters": game.parameters, "num_areas": game.received_num_areas,
                       "parameter_messages": [m.hex() for m in game.parameter_messages],
                       "commands": game.commands}, f)
    if game.error is not None and not isinstance(game.error, grpc.RpcError):
        raise game.error
    return 0


if __name__ == "__main__":
    sys.exit(main())
